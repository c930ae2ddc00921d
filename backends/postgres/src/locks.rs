//! Session advisory locks on one dedicated connection, with a liveness check.
//!
//! A session lock belongs to the server session that took it, so every lock of this backend lives
//! on one `PgConnection` that is never returned to a pool, and is released on that same
//! connection. If the session dies (network, failover, `pg_terminate_backend`), PostgreSQL drops
//! its locks while the jobs that held them may still be running; the liveness task notices within
//! one interval and cancels every held [`LockLease::lost`] token. The next `try_lock` connects
//! again.
//!
//! PostgreSQL counts session locks: a session that takes a key twice must release it twice. This
//! module never asks the server for a key it already holds, so one key is held at most once and
//! one `pg_advisory_unlock` releases it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use slotguard::store::{LockLease, StoreError};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection, Row};
use tokio::sync::{Mutex, oneshot};
use tokio_util::sync::CancellationToken;

use crate::error::{PgError, is_unavailable};

/// Tries every key, in the order given; answers one row: the keys it got and the server pid, so
/// that a pooler that moved us to another session is caught in the same round trip. Only the keys
/// it got come back: in a storm most tries fail (another replica holds the key), and a row per
/// key was most of the statement's cost on both sides.
const TRY_LOCK: &str = "
SELECT pg_backend_pid() AS pid,
       ARRAY(SELECT k
             FROM unnest($1::bigint[]) WITH ORDINALITY AS u(k, ord)
             WHERE pg_try_advisory_lock(k)
             ORDER BY ord) AS got
";

const UNLOCK: &str =
    "SELECT k, pg_advisory_unlock(k) AS released FROM unnest($1::bigint[]) AS u(k)";

/// The liveness probe: which session are we, and which `bigint` advisory keys does it hold.
/// (`pg_locks` shows a `bigint` key as its high half in `classid` and its low half in `objid`, with
/// `objsubid = 1`.)
pub(crate) const LIVENESS: &str = "
SELECT pg_backend_pid() AS pid,
       ARRAY(SELECT (l.classid::bigint << 32) | l.objid::bigint
             FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
               AND l.pid = pg_backend_pid()) AS keys
";

/// The lock session's `application_name` once `owner` uses it: `<app> (slotguard locks) <owner>`,
/// cut to PostgreSQL's 63 bytes on a character boundary.
pub(crate) fn session_name(app: &str, owner: &str) -> String {
    let mut name = format!("{app} {owner}");
    let mut end = name.len().min(63);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name.truncate(end);
    name
}

/// How the lock connection is made and watched.
#[derive(Debug, Clone)]
pub(crate) struct LockConfig {
    pub(crate) options: PgConnectOptions,
    pub(crate) url: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) liveness_interval: Duration,
    pub(crate) liveness_timeout: Duration,
}

/// The lock connection and what it holds.
#[derive(Debug)]
pub(crate) struct Locks {
    config: LockConfig,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    conn: Option<Session>,
    held: HashMap<i64, Held>,
    /// Set by `close`: no new session is made after it, because nothing would watch it.
    closed: bool,
}

#[derive(Debug)]
struct Session {
    conn: PgConnection,
    /// The server process id, read twice at connect time.
    pid: i32,
    /// The owner named in the session's `application_name`, once set.
    named: Option<String>,
}

#[derive(Debug)]
struct Held {
    owner: String,
    lost: CancellationToken,
}

impl Locks {
    pub(crate) fn new(config: LockConfig) -> Arc<Self> {
        Arc::new(Locks {
            config,
            state: Mutex::new(State::default()),
        })
    }

    /// The lock session's `application_name` before an owner is added to it.
    pub(crate) fn app_name(&self) -> &str {
        self.config
            .options
            .get_application_name()
            .unwrap_or("slotguard (slotguard locks)")
    }

    /// See [`LockStore::try_lock`](slotguard::store::LockStore::try_lock).
    ///
    /// Cancel safe: the work runs in its own task, and if the caller is gone by the time the
    /// locks are granted, they are released again.
    pub(crate) async fn try_lock(
        self: &Arc<Self>,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError> {
        let (tx, rx) = oneshot::channel();
        let this = Arc::clone(self);
        let (owner, keys) = (owner.to_owned(), keys.to_vec());
        tokio::spawn(async move {
            let mut state = this.state.lock().await;
            let result = this.try_lock_in(&mut state, &owner, &keys).await;
            if let Err(Ok(leases)) = tx.send(result) {
                let granted: Vec<i64> = leases.into_iter().flatten().map(|l| l.key).collect();
                if !granted.is_empty() {
                    tracing::debug!(?granted, "try_lock was cancelled; releasing what it took");
                    let _ = this.unlock_in(&mut state, &owner, &granted).await;
                }
            }
        });
        rx.await.map_err(|_| {
            StoreError::unavailable("the lock task stopped (is the runtime shutting down?)")
        })?
    }

    async fn try_lock_in(
        &self,
        state: &mut State,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError> {
        // Keys this process holds already (for any owner), and repeats within the batch, are
        // refused here: the server would grant them again to the same session.
        let mut seen = HashSet::new();
        let ask: Vec<i64> = keys
            .iter()
            .copied()
            .filter(|k| !state.held.contains_key(k) && seen.insert(*k))
            .collect();
        let mut granted = HashMap::new();
        if !ask.is_empty() {
            for key in self.query_locks(state, owner, &ask).await? {
                let lost = CancellationToken::new();
                state.held.insert(
                    key,
                    Held {
                        owner: owner.to_owned(),
                        lost: lost.clone(),
                    },
                );
                granted.insert(key, lost);
            }
        }
        Ok(keys
            .iter()
            .map(|key| {
                granted.remove(key).map(|lost| LockLease {
                    key: *key,
                    lost,
                    token: None,
                    deadline: None,
                })
            })
            .collect())
    }

    /// Runs [`TRY_LOCK`] on the lock connection, connecting first if there is none; answers the
    /// keys it got. A connection that holds nothing and turns out dead is replaced once; one that
    /// holds locks is not, because those locks are gone with it and their holders must hear about
    /// it first.
    async fn query_locks(
        &self,
        state: &mut State,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<i64>, StoreError> {
        let mut retried = false;
        loop {
            let session = self.session(state).await?;
            let pid = session.pid;
            if session.named.as_deref() != Some(owner) {
                // So that another replica can tell this session's owner (and so its runs) in
                // `pg_stat_activity`: see `BREAK_STALE_LOCKS`.
                let name = session_name(self.app_name(), owner);
                if sqlx::query("SELECT set_config('application_name', $1, false)")
                    .bind(&name)
                    .execute(&mut session.conn)
                    .await
                    .is_ok()
                {
                    session.named = Some(owner.to_owned());
                }
            }
            match sqlx::query_as::<_, (i32, Vec<i64>)>(TRY_LOCK)
                .bind(keys)
                .fetch_one(&mut session.conn)
                .await
            {
                Ok((other, got)) => {
                    if other != pid {
                        state.conn = None;
                        self.lose_all(state, "the lock connection changed server sessions");
                        return Err(PgError::TransactionPooler {
                            url: self.config.url.clone(),
                            first: pid,
                            second: other,
                        }
                        .into());
                    }
                    return Ok(got);
                }
                Err(e) if is_unavailable(&e) => {
                    state.conn = None;
                    if !state.held.is_empty() {
                        self.lose_all(state, "the lock connection failed");
                        return Err(PgError::Query(e).into());
                    }
                    if retried {
                        return Err(PgError::Query(e).into());
                    }
                    tracing::debug!(error = %e, "idle lock connection was dead; reconnecting");
                    retried = true;
                }
                Err(e) => return Err(PgError::Query(e).into()),
            }
        }
    }

    /// See [`LockStore::unlock`](slotguard::store::LockStore::unlock). Keys `owner` does not hold
    /// are left alone.
    ///
    /// Cancel safe: the release runs in its own task and completes even if the caller is gone.
    pub(crate) async fn unlock(
        self: &Arc<Self>,
        owner: &str,
        keys: &[i64],
    ) -> Result<(), StoreError> {
        let this = Arc::clone(self);
        let (owner, keys) = (owner.to_owned(), keys.to_vec());
        tokio::spawn(async move {
            let mut state = this.state.lock().await;
            this.unlock_in(&mut state, &owner, &keys).await
        })
        .await
        .map_err(|e| StoreError::unavailable(format!("the unlock task stopped: {e}")))?
    }

    async fn unlock_in(
        &self,
        state: &mut State,
        owner: &str,
        keys: &[i64],
    ) -> Result<(), StoreError> {
        let mine: Vec<i64> = keys
            .iter()
            .copied()
            .filter(|k| state.held.get(k).is_some_and(|h| h.owner == owner))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if mine.is_empty() {
            return Ok(());
        }
        for key in &mine {
            state.held.remove(key);
        }
        let Some(session) = state.conn.as_mut() else {
            // The connection was dropped after a failure: the server released everything with it.
            return Ok(());
        };
        match sqlx::query(UNLOCK)
            .bind(&mine)
            .fetch_all(&mut session.conn)
            .await
        {
            Ok(rows) => {
                for row in rows {
                    if !row.try_get::<bool, _>("released").unwrap_or(true) {
                        let key: i64 = row.try_get("k").unwrap_or_default();
                        tracing::warn!(
                            lock_key = key,
                            "advisory lock was not held by the lock session at unlock"
                        );
                    }
                }
                Ok(())
            }
            Err(e) => {
                // Dropping the connection ends the session, and the server releases its locks.
                state.conn = None;
                self.lose_all(state, "the lock connection failed during unlock");
                Err(PgError::Query(e).into())
            }
        }
    }

    /// The lock connection, made if there is none.
    async fn session<'s>(&self, state: &'s mut State) -> Result<&'s mut Session, StoreError> {
        if state.closed {
            return Err(StoreError::unavailable("the backend was closed"));
        }
        if state.conn.is_none() {
            state.conn = Some(self.connect().await?);
        }
        Ok(state.conn.as_mut().expect("connected above"))
    }

    async fn connect(&self) -> Result<Session, PgError> {
        let cfg = &self.config;
        let connect_err = |source| PgError::Connect {
            url: cfg.url.clone(),
            source,
        };
        let mut conn = tokio::time::timeout(
            cfg.connect_timeout,
            PgConnection::connect_with(&cfg.options),
        )
        .await
        .map_err(|_| connect_err(timed_out("connecting the lock session")))?
        .map_err(connect_err)?;
        // Two statements, two answers from a transaction-mode pooler: catch it before any lock is
        // taken.
        let first: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut conn)
            .await?;
        let second: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut conn)
            .await?;
        if first != second {
            return Err(PgError::TransactionPooler {
                url: cfg.url.clone(),
                first,
                second,
            });
        }
        tracing::debug!(pid = first, "advisory lock session connected");
        Ok(Session {
            conn,
            pid: first,
            named: None,
        })
    }

    /// Tells every holder that its lock is gone, and forgets them.
    fn lose_all(&self, state: &mut State, why: &str) {
        if state.held.is_empty() {
            return;
        }
        let keys: Vec<i64> = state.held.keys().copied().collect();
        tracing::error!(
            lock_keys = ?keys,
            reason = why,
            "advisory locks lost; cancelling the jobs that held them"
        );
        for (_, held) in state.held.drain() {
            held.lost.cancel();
        }
    }

    /// One liveness check: if locks are held, the session must answer, be the same server process,
    /// and still hold every key it should.
    pub(crate) async fn check(&self) {
        let mut state = self.state.lock().await;
        if state.held.is_empty() {
            return;
        }
        let Some(session) = state.conn.as_mut() else {
            self.lose_all(&mut state, "the lock connection is gone");
            return;
        };
        let probe = tokio::time::timeout(
            self.config.liveness_timeout,
            sqlx::query(LIVENESS).fetch_one(&mut session.conn),
        )
        .await;
        let row = match probe {
            Ok(Ok(row)) => row,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "advisory lock session failed its liveness check");
                state.conn = None;
                self.lose_all(&mut state, "the lock connection failed its liveness check");
                return;
            }
            Err(_) => {
                // The probe was cut off mid-query, so the connection is unusable anyway; dropping
                // it ends the session and the server releases what it may still hold.
                state.conn = None;
                self.lose_all(&mut state, "the lock connection did not answer in time");
                return;
            }
        };
        let pid: i32 = row.try_get("pid").unwrap_or_default();
        if pid != session.pid {
            let first = session.pid;
            state.conn = None;
            self.lose_all(&mut state, "the lock connection changed server sessions");
            tracing::error!(
                "{}",
                PgError::TransactionPooler {
                    url: self.config.url.clone(),
                    first,
                    second: pid,
                }
            );
            return;
        }
        let on_server: HashSet<i64> = row
            .try_get::<Vec<i64>, _>("keys")
            .unwrap_or_default()
            .into_iter()
            .collect();
        let missing: Vec<i64> = state
            .held
            .keys()
            .copied()
            .filter(|k| !on_server.contains(k))
            .collect();
        for key in missing {
            if let Some(held) = state.held.remove(&key) {
                tracing::error!(
                    lock_key = key,
                    "advisory lock no longer held by its session; cancelling its job"
                );
                held.lost.cancel();
            }
        }
    }

    /// Releases every lock and closes the lock connection.
    pub(crate) async fn close(&self) {
        let mut state = self.state.lock().await;
        state.closed = true;
        let keys: Vec<i64> = state.held.keys().copied().collect();
        if !keys.is_empty() {
            tracing::warn!(lock_keys = ?keys, "closing the backend while locks are held");
        }
        // The holders are told: their lock ends with the session.
        self.lose_all(&mut state, "the backend was closed");
        if let Some(session) = state.conn.take() {
            let _ = session.conn.close().await;
        }
    }

    /// The server process id of the lock session, if connected.
    pub(crate) async fn session_pid(&self) -> Option<i32> {
        self.state.lock().await.conn.as_ref().map(|s| s.pid)
    }

    /// Runs [`Locks::check`] every liveness interval until `stop`.
    pub(crate) fn spawn_liveness(self: &Arc<Self>, stop: CancellationToken) {
        let this = Arc::downgrade(self);
        let interval = self.config.liveness_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let Some(locks) = this.upgrade() else { break };
                locks.check().await;
            }
        });
    }
}

pub(crate) fn timed_out(what: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("timed out {what}"),
    ))
}
