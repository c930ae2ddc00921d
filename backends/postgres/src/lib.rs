//! The PostgreSQL backend of slotguard: slot rows with fencing tokens, session advisory locks, and a
//! registry of lock keys, in the library's own schema.
//!
//! ```no_run
//! # async fn demo() -> Result<(), slotguard_postgres::PgError> {
//! use slotguard_postgres::PgBackend;
//!
//! // Connects, and migrates the `slotguard` schema (idempotent, safe with many starting replicas).
//! let backend = PgBackend::connect("postgres://app:secret@db/app").await?;
//!
//! // Or, with options:
//! let backend = PgBackend::builder("postgres://app:secret@db/app")
//!     .schema("jobs")
//!     .pool_size(4)
//!     .connect()
//!     .await?;
//! # let _ = backend;
//! # Ok(())
//! # }
//! ```
//!
//! # What it stores
//!
//! Everything lives in one schema (default `slotguard`), migrated by the library itself into its own
//! table `<schema>.migrations(version, description, applied_at)`; the application's own
//! `sqlx::migrate!` never sees these migrations, nor they its. Tables:
//!
//! - `job_runs`: one row per slot, `UNIQUE(job_name, scheduled_at, partition_key)`, with status,
//!   attempt, owner, fencing token, heartbeat, timestamps, error, zone, wall time, business date,
//!   trigger and schedule fingerprint;
//! - `job_run_attempts`: one row per attempt, `UNIQUE(run_id, attempt)`, with its run's slot time;
//! - `history_layout`: how the two tables above are partitioned by slot time, if they are
//!   ([`PgBackendBuilder::partitioned_history`]; then both keys above also hold the slot time);
//! - the sequence `fencing_tokens`;
//! - `lock_keys`: which job of which application owns an advisory-lock key;
//! - `lease_locks`: the lock leases of [`PgLeaseLocks`], for processes behind a transaction pooler;
//! - `jobs`: the jobs schedulers registered, with their pause state;
//! - `job_run_audit`: who retried, triggered, backfilled, paused, resumed or cancelled what, and why;
//! - `replicas`: the scheduler processes, each refreshed on its recovery cadence;
//! - `job_schedules`: one row per version of a stored schedule, `PRIMARY KEY(schedule_id, version)`,
//!   `seq` rising in the order written (writes and reads of changes serialized by an advisory
//!   transaction lock).
//!
//! Staleness of a heartbeat is always judged by the database clock, never by a replica's: the start
//! of the statement that judges (`statement_timestamp()`, not the transaction's `now()`, which is as
//! old as the claim-lock wait before it; see the `sql` module).
//!
//! A process that dies is noticed sooner than its stale threshold: from its first claim a backend
//! holds a random presence key on a connection of its own and writes it on the attempts it starts,
//! and the runs whose key no session holds any more are made stale once their heartbeat is half
//! the threshold old (`presence.rs`; docs/guards.md, "Recovery").
//!
//! # Advisory locks and poolers
//!
//! Locks are PostgreSQL *session* advisory locks, held on one dedicated connection that is never
//! returned to the pool, for as long as any lock is held (it stays open in between, so that a
//! tick does not pay for a new connection). A liveness check runs on it every few seconds while
//! locks are held; when the session is gone, every held [`LockLease::lost`] token is cancelled.
//!
//! Session locks do **not** survive a transaction-mode pooler (PgBouncer with
//! `pool_mode = transaction`): each statement may run in a different server session, so a lock
//! would be taken in one session and "released" in another. Point this backend at PostgreSQL
//! directly or at a session-mode pool. The backend checks `pg_backend_pid()` across statements on
//! the lock connection and refuses to lock ([`PgError::TransactionPooler`]) when it changes.
//! Behind such a pooler, [`PgLeaseLocks`] holds the `lock` level's locks as lease rows instead,
//! and a backend built with [`PgBackendBuilder::transaction_pooler`] keeps the slot rows: every
//! statement unprepared in a transaction of its own, no `LISTEN`, no presence key (docs/poolers.md).
//!
//! Every held lock, and every job a claim transaction serializes on, takes an entry in the server's
//! shared lock table (`max_locks_per_transaction × max_connections`, 6,400 by default). Thousands
//! of jobs on several replicas fill it, and statements then fail with `out of shared memory`,
//! which this backend reports as an unavailable store; docs/guards.md ("The locks") says how to
//! size it.
//!
//! [`LockLease::lost`]: slotguard::store::LockLease::lost

mod admin;
mod builder;
mod calendars;
mod claims;
mod error;
mod failover;
mod finishes;
mod inspect;
mod keys;
mod lease;
mod locks;
mod migrate;
mod partitions;
mod presence;
mod queue;
mod replicas;
mod retention;
mod schedules;
mod sql;
mod statement;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use slotguard::ErrorClass;
use slotguard::store::{
    Backend, CheckpointStore, Claim, ClaimRequest, ClockStore, DueClaim, DueSpec, Finish, Lease,
    LockLease, LockStore, QueueStore, SlotKey, SlotStore, StaleLock, StoreError,
};
use sqlx::postgres::PgPool;
use tokio_util::sync::CancellationToken;

pub use builder::PgBackendBuilder;
pub use error::PgError;
pub use lease::{PgLeaseLocks, PgLeaseLocksBuilder};
pub use partitions::{HistoryPartitions, PartitionSpan};
/// An attempt of a run: core's [`AttemptRecord`](slotguard::store::AttemptRecord), under the name
/// this crate used before the admin store.
pub use slotguard::store::AttemptRecord as AttemptRow;
/// A run as [`PgBackend::runs`] reads it: core's [`RunRecord`](slotguard::store::RunRecord), under the name this crate used
/// before the admin store.
pub use slotguard::store::RunRecord as RunRow;

use crate::finishes::FinishArgs;
use crate::locks::Locks;
use crate::sql::{Statements, sql};

/// The schema the backend uses unless told otherwise.
pub const DEFAULT_SCHEMA: &str = "slotguard";

/// The statement the lock connection's liveness check runs every interval while locks are held:
/// this session's pid and the advisory keys it holds. Public for the lock benchmark
/// (`benches/benches/locks.rs`), which times it beside a Redis renewal.
#[doc(hidden)]
pub const LOCK_LIVENESS_QUERY: &str = locks::LIVENESS;

/// The longest staleness threshold stored; longer ones are cut to it (a century is "never").
const MAX_STALE_AFTER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The PostgreSQL backend: implements [`SlotStore`], [`LockStore`],
/// [`AdminStore`](slotguard::store::AdminStore), [`ReplicaStore`](slotguard::store::ReplicaStore),
/// [`RetentionStore`](slotguard::store::RetentionStore) and [`Backend`].
///
/// Cheap to clone; clones share the pool and the lock connection. When the last clone is dropped,
/// the lock connection closes and the server releases its locks; call [`PgBackend::close`] to do
/// that eagerly.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use slotguard::store::{LockStore, SlotStore};
/// use slotguard_postgres::PgBackend;
///
/// let backend = PgBackend::builder(&std::env::var("DATABASE_URL")?)
///     .pool_size(4)
///     .connect()
///     .await?;
/// // Tell other binaries sharing the database which job owns which lock key.
/// backend.register_lock_keys("billing", &[(42, "daily_settlement".into())]).await?;
///
/// if let Some(lease) = backend.try_lock("replica-1", &[42]).await?.remove(0) {
///     // ... run, watching `lease.lost` ...
///     backend.unlock("replica-1", &[lease.key]).await?;
/// }
/// for run in backend.runs(Some("daily_settlement")).await? {
///     println!("{} {} attempt {}", run.key.scheduled_at, run.status, run.attempt);
/// }
/// backend.close().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PgBackend {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    schema: String,
    /// The schema, quoted for splicing (`sql::quote_schema`).
    quoted: String,
    /// How many spans of a partitioned history have their partitions made ahead
    /// (`partitions.rs`).
    ahead: u32,
    url: String,
    statements: Statements,
    locks: Arc<Locks>,
    stop: CancellationToken,
    /// Workers' wake-ups from `LISTEN`, started on the first `due_signal`.
    queue: queue::Signal,
    /// The tokens granted and the server's identity, to notice a failover.
    watch: Arc<failover::Watch>,
    /// This backend's presence key and the session that holds it, started on the first claim;
    /// none through a transaction pooler.
    presence: Option<Arc<presence::Presence>>,
    /// Whether the pool reaches the database through a transaction-mode pooler (`statement.rs`).
    pooler: bool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Fallback only: `close` is the eager path. Stopping the liveness task drops the lock
        // connection, which ends the session and releases its locks on the server.
        self.stop.cancel();
    }
}

impl fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the connect options: they hold the password.
        f.debug_struct("PgBackend")
            .field("url", &self.inner.url)
            .field("schema", &self.inner.schema)
            .finish_non_exhaustive()
    }
}

impl PgBackend {
    /// The schema holding the library's tables.
    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    /// The connection pool used for slot rows, for operators' own queries on the library's tables.
    /// Through a transaction pooler ([`PgBackendBuilder::transaction_pooler`]) run them as the
    /// backend does: `persistent(false)`, inside a transaction (`pool().begin()`).
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// Records that `namespace` (an application) uses each advisory-lock key for the job named with
    /// it, in one transaction. Registering a key again for the same job is a no-op.
    ///
    /// # Errors
    ///
    /// [`PgError::LockKeyCollision`] when a key is registered to another job or another namespace;
    /// nothing is registered then. [`PgError::Query`] when the database fails.
    pub async fn register_lock_keys(
        &self,
        namespace: &str,
        keys: &[(i64, String)],
    ) -> Result<(), PgError> {
        keys::register(
            &self.inner.pool,
            &self.inner.statements,
            namespace,
            keys,
            self.prepared(),
        )
        .await
    }

    /// Every run, or the runs of `job`, with their attempts, ordered by job, slot and partition.
    ///
    /// # Errors
    ///
    /// [`PgError::Query`] when the database fails; [`PgError::UnexpectedValue`] for a row this
    /// release cannot read.
    pub async fn runs(&self, job: Option<&str>) -> Result<Vec<RunRow>, PgError> {
        let rows = self
            .fetch_all(sqlx::query(sql(&self.inner.statements.runs)).bind(job))
            .await?;
        inspect::fold_runs(rows)
    }

    /// The server process id of the lock session, while one is connected. With it an operator (or a
    /// fault test) can find the session in `pg_stat_activity` or `pg_locks`.
    pub async fn lock_session_pid(&self) -> Option<i32> {
        self.inner.locks.session_pid().await
    }

    /// Releases every lock, closes the lock connection, the presence connection and the pool.
    /// Holders of locks still held see their `lost` token cancelled. The backend (and its clones)
    /// cannot be used afterwards.
    pub async fn close(&self) {
        self.inner.stop.cancel();
        self.inner.locks.close().await;
        self.inner.pool.close().await;
    }
}

impl PgBackend {
    /// One attempt's outcome: the single-row statement, cheaper than the batch one.
    async fn finish_single(
        &self,
        owner: &str,
        lease: &Lease,
        finish: &Finish,
    ) -> Result<bool, StoreError> {
        let class = finish.error_class.map(ErrorClass::as_str);
        let retry_in = finish.retry_in.map(|d| micros(d.min(MAX_STALE_AFTER)));
        let matched: i64 = self
            .fetch_one(
                sqlx::query_scalar(sql(&self.inner.statements.finish))
                    .bind(lease.run_id)
                    .bind(lease.token)
                    .bind(owner)
                    .bind(finish.status.as_str())
                    .bind(finish.attempt_status.as_str())
                    .bind(class)
                    .bind(finish.message.as_deref())
                    .bind(retry_in)
                    .bind(&lease.key.job)
                    .bind(lease.key.scheduled_at)
                    .bind(&lease.key.partition),
            )
            .await
            .map_err(PgError::from)?;
        // A refused write is the runtime's to log (`accepted = false` on the run's end event).
        Ok(matched > 0)
    }
}

#[async_trait]
impl SlotStore for PgBackend {
    /// One statement for the whole batch, after the batch's jobs' claim locks; see the crate's
    /// `sql/claim.rs` for how it stays exclusive under concurrent claimers.
    async fn claim(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
    ) -> Result<Vec<Claim>, StoreError> {
        self.claim_rows(owner, requests, false).await
    }

    async fn heartbeat(&self, owner: &str, tokens: &[i64]) -> Result<Vec<i64>, StoreError> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let held: Vec<i64> = self
            .fetch_all(
                sqlx::query_scalar(sql(&self.inner.statements.heartbeat))
                    .bind(owner)
                    .bind(tokens),
            )
            .await
            .map_err(PgError::from)?;
        Ok(held)
    }

    /// One statement for every attempt: runs that end together cost one round trip.
    async fn finish(
        &self,
        owner: &str,
        finishes: &[(Lease, Finish)],
    ) -> Result<Vec<bool>, StoreError> {
        match finishes {
            [] => return Ok(Vec::new()),
            [(lease, finish)] => return Ok(vec![self.finish_single(owner, lease, finish).await?]),
            _ => {}
        }
        let args = FinishArgs::new(finishes);
        let query = args.query(sql(&self.inner.statements.finish_many), owner);
        let matched: Vec<i64> = self.fetch_all(query).await.map_err(PgError::from)?;
        let matched: std::collections::HashSet<i64> = matched.into_iter().collect();
        let answers: Vec<bool> = args.ids.iter().map(|id| matched.contains(id)).collect();
        Ok(answers)
    }

    /// One read.
    async fn existing_slots(&self, keys: &[SlotKey]) -> Result<Vec<bool>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let jobs: Vec<&str> = keys.iter().map(|k| k.job.as_str()).collect();
        let slots: Vec<chrono::DateTime<chrono::Utc>> =
            keys.iter().map(|k| k.scheduled_at).collect();
        let partitions: Vec<&str> = keys.iter().map(|k| k.partition.as_str()).collect();
        let found = self
            .fetch_all(
                sqlx::query_scalar(sql(&self.inner.statements.existing_slots))
                    .bind(&jobs)
                    .bind(&slots)
                    .bind(&partitions),
            )
            .await
            .map_err(PgError::from)?;
        Ok(found)
    }

    /// One read; see `DUE_JOBS` in the crate's `sql/due.rs`.
    async fn due_jobs(&self, specs: &[DueSpec]) -> Result<Vec<String>, StoreError> {
        if specs.is_empty() {
            return Ok(Vec::new());
        }
        let (jobs, max_attempts, overlaps) = spec_columns(specs);
        let due = self
            .fetch_all(
                sqlx::query_scalar(sql(&self.inner.statements.due_jobs))
                    .bind(&jobs)
                    .bind(&max_attempts)
                    .bind(&overlaps)
                    .bind(leads(specs)),
            )
            .await
            .map_err(PgError::from)?;
        Ok(due)
    }

    /// One statement (`FOR UPDATE SKIP LOCKED`, oldest slot first); see `CLAIM_DUE` in the crate's
    /// `sql/due.rs`.
    async fn claim_due(
        &self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> Result<Vec<DueClaim>, StoreError> {
        self.claim_due_rows(owner, specs, limit).await
    }

    /// One statement for the batch (`ON CONFLICT DO NOTHING`).
    async fn record_skipped(
        &self,
        requests: &[ClaimRequest],
        reason: &str,
    ) -> Result<(), StoreError> {
        self.record_skipped_rows(requests, reason).await
    }
}

#[async_trait]
impl QueueStore for PgBackend {
    /// `CLAIM` in its enqueue mode, then a `NOTIFY` that wakes the workers; see `queue.rs`.
    async fn enqueue_slots(
        &self,
        requests: &[ClaimRequest],
        traces: &[Option<String>],
    ) -> Result<Vec<Claim>, StoreError> {
        self.enqueue_rows(requests, traces).await
    }

    /// One read; see `NEXT_DUE` in the crate's `sql/due.rs`.
    async fn next_due(
        &self,
        specs: &[DueSpec],
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
        self.next_due_at(specs).await
    }

    /// `LISTEN` on a connection of its own, started on the first call; see `queue.rs`.
    /// `None` through a transaction pooler, which cannot hold a `LISTEN`: workers poll there.
    async fn due_signal(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.prepared().then(|| self.queue_signal())
    }
}

#[async_trait]
impl CheckpointStore for PgBackend {
    async fn save_checkpoint(
        &self,
        owner: &str,
        lease: &Lease,
        data: &str,
    ) -> Result<bool, StoreError> {
        let matched: i64 = self
            .fetch_one(
                sqlx::query_scalar(sql(&self.inner.statements.save_checkpoint))
                    .bind(lease.run_id)
                    .bind(lease.token)
                    .bind(owner)
                    .bind(data)
                    .bind(&lease.key.job)
                    .bind(lease.key.scheduled_at)
                    .bind(&lease.key.partition),
            )
            .await
            .map_err(PgError::from)?;
        Ok(matched > 0)
    }

    async fn load_checkpoint(&self, run_id: i64) -> Result<Option<String>, StoreError> {
        let saved: Option<Option<String>> = self
            .fetch_optional(
                sqlx::query_scalar(sql(&self.inner.statements.load_checkpoint)).bind(run_id),
            )
            .await
            .map_err(PgError::from)?;
        Ok(saved.flatten())
    }
}

#[async_trait]
impl ClockStore for PgBackend {
    /// `clock_timestamp()`: the server's clock when the statement runs, which judges heartbeats.
    async fn store_now(&self) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
        let now: chrono::DateTime<chrono::Utc> = self
            .fetch_one(sqlx::query_scalar("SELECT clock_timestamp()"))
            .await
            .map_err(PgError::from)?;
        Ok(now)
    }
}

#[async_trait]
impl LockStore for PgBackend {
    /// One statement for the keys this process does not hold yet; keys it holds (for any owner)
    /// are `None` without asking the server, because session locks are re-entrant.
    ///
    /// Cancel safe: locks granted after the caller went away are released again.
    async fn try_lock(
        &self,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError> {
        if self.inner.pooler {
            return Err(PgError::SessionLocksThroughPooler.into());
        }
        self.inner.locks.try_lock(owner, keys).await
    }

    /// Releases the keys `owner` holds, on the lock connection; other keys are left alone.
    ///
    /// Cancel safe: the release completes even if the caller goes away.
    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), StoreError> {
        self.inner.locks.unlock(owner, keys).await
    }

    /// One statement: ends the lock sessions of frozen holders (`pg_terminate_backend`, which needs
    /// the same role or `pg_signal_backend`); see `BREAK_STALE_LOCKS` in the crate's
    /// `sql/locks.rs`.
    async fn break_stale_locks(
        &self,
        _owner: &str,
        locks: &[StaleLock],
    ) -> Result<Vec<i64>, StoreError> {
        if locks.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<i64> = locks.iter().map(|l| l.key).collect();
        let jobs: Vec<&str> = locks.iter().map(|l| l.job.as_str()).collect();
        let freed: Vec<i64> = self
            .fetch_all(
                sqlx::query_scalar(sql(&self.inner.statements.break_stale_locks))
                    .bind(&keys)
                    .bind(&jobs),
            )
            .await
            .map_err(PgError::from)?;
        if !freed.is_empty() {
            // The ended session's locks go when its server process has exited: give it a moment.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(freed)
    }

    /// Records the keys in the schema's `lock_keys` table; see [`PgBackend::register_lock_keys`].
    async fn register_lock_keys(
        &self,
        namespace: &str,
        keys: &[(i64, String)],
    ) -> Result<(), StoreError> {
        PgBackend::register_lock_keys(self, namespace, keys)
            .await
            .map_err(StoreError::from)
    }
}

impl Backend for PgBackend {
    fn name(&self) -> &'static str {
        "postgres"
    }
}

/// The columns of due specs, as `CLAIM_DUE` and `DUE_JOBS` take them.
pub(crate) fn spec_columns(specs: &[DueSpec]) -> (Vec<&str>, Vec<i32>, Vec<&'static str>) {
    let jobs = specs.iter().map(|s| s.job.as_str()).collect();
    let max_attempts = specs
        .iter()
        .map(|s| i32::try_from(s.max_attempts).unwrap_or(i32::MAX))
        .collect();
    let overlaps = specs.iter().map(|s| s.overlap.as_str()).collect();
    (jobs, max_attempts, overlaps)
}

/// The specs' leads ([`DueSpec::lead`]) in microseconds, as `CLAIM_DUE` and `DUE_JOBS` take them.
pub(crate) fn leads(specs: &[DueSpec]) -> Vec<i64> {
    specs.iter().map(|s| micros(s.lead())).collect()
}

pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}
