//! Redis lease locks with fencing tokens, for slotguard's `lock` level.
//!
//! ```no_run
//! use std::time::Duration;
//! use slotguard::{GuardLevel, Job, Scheduler};
//! use slotguard_redis::RedisLocks;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let locks = RedisLocks::new("redis://127.0.0.1:6379")?.lease_ttl(Duration::from_secs(30));
//! let scheduler = Scheduler::builder()
//!     .lock_store(locks)
//!     .job(Job::new("report", "0 */5 * * * *", |ctx| async move {
//!         // A write the target refuses unless its token is the highest it has seen.
//!         let _token = ctx.fencing_token();
//!     }).guard(GuardLevel::Lock))
//!     .build()?;
//! let handle = scheduler.try_start().await?;
//! # handle.shutdown().await; Ok(()) }
//! ```
//!
//! A lock is a key `{slotguard:<prefix>:<lock key>}:lock` set with `PX <ttl>` to
//! `<token> <request> <owner>`, taken by one Lua script that also advances the key's fence counter
//! (`…:fence`, the same hash slot). A `try_lock` that gets no answer (Redis slow or gone, or the
//! caller went away) takes back in the background what its request may have been granted. A
//! background task renews every held lease every TTL/3 with a compare-and-`PEXPIRE`; a lease found
//! gone or another's, or not renewed within its TTL (Redis unreachable), is reported lost through
//! [`LockLease::lost`], and the job is told to stop. The lease's deadline
//! ([`LockLease::deadline`]) is shared with the run, so a body that checks `ctx.is_lost()` right
//! before a side effect sees the loss from the deadline on, even when it is woken (after a pause)
//! before the renewal task has run.
//!
//! A lease lock can lapse while its holder is paused (GC, `SIGSTOP`, a VM migration) and still
//! working; then another replica takes it. Only the fencing token makes the late holder harmless:
//! [`LockLease::token`] (and `ctx.fencing_token()` at the `lock` level) rises with every grant of the
//! key, and the system the job writes to must refuse a token lower than the highest it has seen.
//!
//! Tokens never go backwards, even on a Redis that keeps nothing on disk: a token is
//! `max(last + 1, server time in µs)`, so when the counter is lost the next token starts from the
//! server's clock, above every earlier one (see `docs/DECISIONS.md`). They are large numbers
//! (about 1.7·10^15), exact in an `i64` and in a JSON double.
//!
//! Errors: Redis unreachable or timing out is [`StoreError::Unavailable`]; the runtime then skips
//! the slot (no body runs without its lock) and tries again at the next one.
//!
//! Deployment: a single Redis primary (or Sentinel). Use `maxmemory-policy noeviction` (or a
//! `volatile-*` one): an evicted lock key is a lock that nobody holds. A Redis that keeps nothing on
//! disk forgets the locks when it restarts: start it again no sooner than one lease TTL after it
//! went down (or run it with `appendonly yes` and `appendfsync always`, which keeps them), else a
//! holder still working may hear `lost` only after another replica has started (by up to a third of
//! the TTL), and only the fencing token protects the target.

#![forbid(unsafe_code)]

mod renew;
mod scripts;

use std::sync::{Arc, Once, Weak};
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError, Script, ServerErrorKind, Value};
use slotguard::store::held::HeldLeases;
use slotguard::store::renewal::RenewedLeases as _;
use slotguard::store::{LockLease, LockStore, StaleLock, StoreError};
use tokio::time::Instant;

use scripts::Scripts;

/// Cluster-wide lease locks in Redis, with fencing tokens. Cheap to clone: clones share one
/// connection and one renewal task.
#[derive(Clone)]
pub struct RedisLocks {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLocks")
            .field("prefix", &self.inner.prefix)
            .field("lease_ttl", &self.inner.ttl)
            .field("held", &self.inner.held.len())
            .finish_non_exhaustive()
    }
}

struct Inner {
    conn: ConnectionManager,
    scripts: Scripts,
    prefix: String,
    ttl: Duration,
    /// How long one round trip may take before it counts as Redis being unreachable.
    op_timeout: Duration,
    held: HeldLeases<Held>,
    renewer: Once,
}

/// What is kept of a lease this process holds. Its deadline (in [`HeldLeases`]) is when the lease
/// expires at the latest, measured locally from before the round trip that last set its expiry:
/// past it without a renewal, another may hold it.
struct Held {
    owner: String,
    token: i64,
    /// The lock key's value: `<token> <request> <owner>`.
    value: String,
}

impl RedisLocks {
    /// Locks on the Redis at `url` (`redis://host:port/db`), with a 30 s lease, renewed every 10 s.
    /// The connection is made on first use and made again after it breaks.
    ///
    /// # Errors
    /// [`StoreError::Rejected`] for a URL that is not a Redis URL.
    pub fn new(url: &str) -> Result<Self, StoreError> {
        let client = redis::Client::open(url)
            .map_err(|e| StoreError::rejected(e.to_string()).with_source(e))?;
        Self::with_client(client, Duration::from_secs(30))
    }

    fn with_client(client: redis::Client, ttl: Duration) -> Result<Self, StoreError> {
        let op_timeout = op_timeout(ttl);
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(op_timeout))
            .set_connection_timeout(Some(op_timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| StoreError::rejected(e.to_string()).with_source(e))?;
        Ok(RedisLocks {
            inner: Arc::new(Inner {
                conn,
                scripts: Scripts::new(),
                prefix: "default".to_owned(),
                ttl,
                op_timeout,
                held: HeldLeases::default(),
                renewer: Once::new(),
            }),
        })
    }

    /// The lease's time to live (default 30 s, at least 300 ms): how long a lock outlives a holder
    /// that stopped renewing it (a dead or paused process, or one cut off from Redis). Renewed
    /// every third of it. Call before the first lock is taken.
    ///
    /// # Panics
    /// If called on a clone that shares its connection with another (call it first).
    pub fn lease_ttl(self, ttl: Duration) -> Self {
        let ttl = ttl.max(Duration::from_millis(300));
        let mut inner = Arc::try_unwrap(self.inner)
            .unwrap_or_else(|_| panic!("RedisLocks::lease_ttl on a shared RedisLocks"));
        inner.ttl = ttl;
        inner.op_timeout = op_timeout(ttl);
        RedisLocks {
            inner: Arc::new(inner),
        }
    }

    /// The prefix of this application's keys (default `default`): two applications sharing a Redis
    /// give different prefixes.
    ///
    /// # Panics
    /// If called on a clone that shares its connection with another (call it first).
    pub fn prefix(self, prefix: impl Into<String>) -> Self {
        let mut inner = Arc::try_unwrap(self.inner)
            .unwrap_or_else(|_| panic!("RedisLocks::prefix on a shared RedisLocks"));
        inner.prefix = prefix.into();
        RedisLocks {
            inner: Arc::new(inner),
        }
    }

    /// The lease's time to live.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl
    }

    /// The keys of lock `key`: the lock and its fence counter, in one hash slot.
    pub fn redis_keys(&self, key: i64) -> (String, String) {
        self.inner.keys(key)
    }

    /// Renews every lease this process holds, now, in one pipelined round trip, as the background
    /// task does every TTL/3; a lease found gone or another's is reported lost. Returns how many
    /// leases are still held. For benchmarks, and for a caller that knows it was paused.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when Redis does not answer; the leases stay held until their
    /// deadlines.
    pub async fn renew_now(&self) -> Result<usize, StoreError> {
        self.inner.renew().await?;
        Ok(self.held())
    }

    /// How many leases this process holds.
    pub fn held(&self) -> usize {
        self.inner.held.len()
    }
}

/// A round trip longer than a third of the TTL could not renew in time anyway.
fn op_timeout(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(100))
}

impl Inner {
    fn keys(&self, key: i64) -> (String, String) {
        let tag = format!("{{slotguard:{}:{key}}}", self.prefix);
        (format!("{tag}:lock"), format!("{tag}:fence"))
    }

    /// Runs `script` once per `(keys, args)` in one pipelined round trip, loading the scripts again
    /// if the server has lost them (a restart).
    async fn eval_many(
        &self,
        script: &Script,
        calls: &[(Vec<String>, Vec<String>)],
    ) -> Result<Vec<Value>, StoreError> {
        let mut pipe = redis::pipe();
        for (keys, args) in calls {
            pipe.cmd("EVALSHA")
                .arg(script.get_hash())
                .arg(keys.len())
                .arg(keys)
                .arg(args);
        }
        let mut conn = self.conn.clone();
        let first = self.timed(pipe.query_async::<Vec<Value>>(&mut conn)).await;
        match first {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                let mut load = redis::pipe();
                for (_, source) in self.scripts.all() {
                    load.cmd("SCRIPT").arg("LOAD").arg(source);
                }
                self.timed(load.query_async::<Vec<Value>>(&mut conn))
                    .await
                    .map_err(store_error)?;
                self.timed(pipe.query_async::<Vec<Value>>(&mut conn))
                    .await
                    .map_err(store_error)
            }
            other => other.map_err(store_error),
        }
    }

    /// `fut`, failing as a timeout after [`op_timeout`](Inner::op_timeout).
    async fn timed<T>(
        &self,
        fut: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, RedisError> {
        match tokio::time::timeout(self.op_timeout, fut).await {
            Ok(result) => result,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer from Redis within {:?}", self.op_timeout),
            ))),
        }
    }

    async fn try_lock(
        self: &Arc<Self>,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError> {
        self.renewer.call_once(|| {
            tokio::spawn(slotguard::store::renewal::renew_until_dropped(
                Arc::downgrade(self) as Weak<Inner>,
                "redis",
            ));
        });
        let ttl = self.ttl.as_millis().to_string();
        let mut pending = Pending {
            inner: Arc::downgrade(self),
            keys: keys.to_vec(),
            request: request_id(),
        };
        let request = pending.request.clone();
        let calls: Vec<_> = keys
            .iter()
            .map(|&k| {
                let (lock, fence) = self.keys(k);
                let args = vec![owner.to_owned(), ttl.clone(), request.clone()];
                (vec![lock, fence], args)
            })
            .collect();
        let started = Instant::now();
        let answers = self.eval_many(&self.scripts.acquire, &calls).await?;
        // Answered: what was granted is known, and held below.
        pending.keys.clear();
        keys.iter()
            .zip(answers)
            .map(|(&key, answer)| {
                let token = match answer {
                    Value::Nil => return Ok(None),
                    other => parse_token(&other)?,
                };
                let lease = Held {
                    owner: owner.to_owned(),
                    token,
                    value: format!("{token} {request} {owner}"),
                };
                // An earlier lease of this process on the key had lapsed and was taken again: its
                // holder is told it lost it.
                let (lost, deadline) = self.held.hold(key, lease, started + self.ttl);
                Ok(Some(LockLease {
                    key,
                    lost,
                    token: Some(token),
                    deadline: Some(deadline),
                }))
            })
            .collect()
    }

    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), StoreError> {
        {
            // Forgotten first: a lease whose release fails is not renewed, and lapses.
            for &key in keys {
                self.held.release(key, |h| h.owner == owner);
            }
        }
        let calls: Vec<_> = keys
            .iter()
            .map(|&k| (vec![self.keys(k).0], vec![owner.to_owned()]))
            .collect();
        self.eval_many(&self.scripts.release, &calls).await?;
        Ok(())
    }
}

/// A `try_lock` whose answer has not arrived. Dropped with keys left (the caller went away, or the
/// round trip failed or timed out after Redis may have granted them), it takes back in the
/// background whatever Redis granted to its request, so that a grant nobody heard of does not keep
/// the key from everyone for a TTL.
struct Pending {
    inner: Weak<Inner>,
    keys: Vec<i64>,
    request: String,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.keys.is_empty() {
            return;
        }
        let (Some(inner), Ok(runtime)) =
            (self.inner.upgrade(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let keys = std::mem::take(&mut self.keys);
        let request = std::mem::take(&mut self.request);
        runtime.spawn(async move { inner.cancel(&keys, &request).await });
    }
}

/// A request id no other `try_lock` of any process uses (64 random bits).
fn request_id() -> String {
    use std::hash::{BuildHasher, RandomState};
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!(
        "{:016x}",
        RandomState::new().hash_one((n, std::process::id()))
    )
}

impl Inner {
    /// Deletes the locks of `keys` that Redis granted to `request`, trying a few times while Redis
    /// does not answer.
    async fn cancel(&self, keys: &[i64], request: &str) {
        let calls: Vec<_> = keys
            .iter()
            .map(|&k| (vec![self.keys(k).0], vec![request.to_owned()]))
            .collect();
        for _ in 0..3 {
            match self.eval_many(&self.scripts.cancel, &calls).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::debug!(error = %e, "could not take back an unanswered lock request");
                    tokio::time::sleep(self.op_timeout).await;
                }
            }
        }
    }
}

fn parse_token(value: &Value) -> Result<i64, StoreError> {
    let text = match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => return Ok(*n),
        other => return Err(StoreError::rejected(format!("unexpected token {other:?}"))),
    };
    text.parse()
        .map_err(|_| StoreError::rejected(format!("fencing token {text:?} is not an integer")))
}

/// Unreachable, timing out, loading or failing over is `Unavailable`; anything else the server
/// refused is `Rejected`.
fn store_error(e: RedisError) -> StoreError {
    let transient = match e.kind() {
        ErrorKind::Server(kind) => matches!(
            kind,
            ServerErrorKind::BusyLoading
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
                | ServerErrorKind::ReadOnly
        ),
        ErrorKind::Io | ErrorKind::ClusterConnectionNotFound => true,
        _ => e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal(),
    };
    if transient {
        StoreError::unavailable(e.to_string()).with_source(e)
    } else {
        StoreError::rejected(e.to_string()).with_source(e)
    }
}

/// Lease locks, renewed in the background while held.
///
/// # Cancel safety
/// A `try_lock` future dropped, failed or timed out after Redis may have granted leases but before
/// it answered takes them back in the background (a script deletes the keys still holding its
/// request id), best effort: when that does not reach Redis either, they lapse after the TTL.
/// `unlock` forgets the leases before it asks Redis, so a release that does not complete lets them
/// lapse.
#[async_trait]
impl LockStore for RedisLocks {
    async fn try_lock(
        &self,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.inner.try_lock(owner, keys).await
    }

    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        self.inner.unlock(owner, keys).await
    }

    /// Frees nothing: a lease lapses by itself after its TTL once its holder stops renewing it.
    async fn break_stale_locks(
        &self,
        _owner: &str,
        _locks: &[StaleLock],
    ) -> Result<Vec<i64>, StoreError> {
        Ok(Vec::new())
    }

    async fn register_lock_keys(
        &self,
        namespace: &str,
        keys: &[(i64, String)],
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        let table = format!("{{slotguard:{}}}:keys:{namespace}", inner.prefix);
        let calls: Vec<_> = keys
            .iter()
            .map(|(key, job)| (vec![table.clone()], vec![key.to_string(), job.clone()]))
            .collect();
        let answers = inner.eval_many(&inner.scripts.register, &calls).await?;
        for ((key, job), answer) in keys.iter().zip(answers) {
            let registered: String = redis::from_redis_value(answer)
                .map_err(|e| StoreError::rejected(e.to_string()).with_source(e))?;
            if &registered != job {
                return Err(StoreError::rejected(format!(
                    "lock key {key} is registered to job `{registered}`, not `{job}`"
                )));
            }
        }
        Ok(())
    }
}
