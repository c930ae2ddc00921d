//! The SQLite backend of slotguard: slot rows and a lease lock in one file, safe for several processes
//! on one host. The embedded default: nothing to run besides the application.
//!
//! ```no_run
//! use slotguard::{Scheduler, scheduled};
//! use slotguard_sqlite::SqliteBackend;
//!
//! #[scheduled("0 2 * * *", tz = "Asia/Seoul")]
//! async fn daily_settlement() {}
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Creates the file and its tables on first use; every process on the host opens the same path.
//!     let backend = SqliteBackend::open("/var/lib/myapp/slotguard.db").await?;
//!     let scheduler = Scheduler::builder()
//!         .jobs(slotguard::jobs![daily_settlement])
//!         .backend(backend)
//!         .build()?;
//!     let handle = scheduler.start();
//!     tokio::signal::ctrl_c().await?;
//!     handle.shutdown().await;
//!     Ok(())
//! }
//! ```
//!
//! # Storage
//!
//! The library's tables live in the application's file, prefixed `slotguard_` (SQLite has no
//! schemas), with their own migrations table `slotguard_migrations`, so the application's own
//! `sqlx::migrate!` never sees them:
//!
//! | table | what |
//! |---|---|
//! | `slotguard_job_runs` | one row per `(job_name, scheduled_at, partition_key)` (UNIQUE): status, attempt, owner, fencing token, heartbeat, staleness threshold, next attempt, error, zone, wall time, business date, trigger, schedule fingerprint |
//! | `slotguard_job_run_attempts` | one row per attempt, `UNIQUE(run_id, attempt)`: owner, token, times, outcome |
//! | `slotguard_fencing` | one row: the last fencing token handed out, for slot claims and locks alike |
//! | `slotguard_locks` | one row per held lease lock: `lock_key`, `owner`, `token`, `expires_at` |
//! | `slotguard_jobs` | one row per registered job: cron expression, zone, DST policy, guard level, schedule fingerprint, pause state (`paused`, `paused_by`, `paused_reason`, `paused_at`), `registered_at`, `seen_at` |
//! | `slotguard_job_run_audit` | one row per operator change (pause, resume, retry, trigger, backfill, cancel, skip, schedule changes): job, run and slot (for run-level changes), action, actor, reason, `at` |
//! | `slotguard_job_schedules` | one row per version of a stored schedule, `UNIQUE(schedule_id, version)`, `seq` rising in the order written: the spec (job, cron, zone, DST policy, partition, start, end, remaining runs, pause and note) or `removed`, `effective_at`, who, when and why |
//!
//! Every instant is an `INTEGER` of **Unix milliseconds, UTC** (`scheduled_at`, `heartbeat_at`,
//! `expires_at`, ...), and every duration an `INTEGER` of milliseconds (`stale_after_ms`): integers
//! compare exactly, and a staleness threshold of one second needs sub-second precision. The tables
//! are `STRICT`, so a value of another type is refused rather than compared wrongly. For reading by
//! hand: `datetime(scheduled_at / 1000, 'unixepoch')`.
//!
//! # Several processes
//!
//! The file is opened in WAL mode with a `busy_timeout` (default 5 s), and every write is a
//! `BEGIN IMMEDIATE` transaction: it takes SQLite's single write lock before reading anything, so
//! writers from any number of processes queue on it instead of failing on a stale snapshot. Inside
//! one process, writes also queue on an async mutex first, so they do not spin in SQLite's busy
//! handler against each other. A claim answers a whole batch in one transaction, and decides each new
//! slot's overlap policy there (`skip`, `buffer_one`, `replace`, `allow`) against the runs of the same
//! job and partition, so replicas cannot decide it differently. `claim_due` (retries, hand-overs,
//! buffered slots, stale runs) and `record_skipped` are one transaction each as well.
//!
//! Operators' changes ([`AdminStore`](slotguard::store::AdminStore): pauses, retries, manual and
//! backfill runs, cancellation) are one `BEGIN IMMEDIATE` transaction each, written together with
//! their audit record; of concurrent retries of one run, from any number of processes, exactly one
//! is done. A cancelled run's holder loses its token: its next heartbeat drops it and its outcome is
//! refused.
//!
//! The replica registry ([`ReplicaStore`](slotguard::store::ReplicaStore), `slotguard_replicas`)
//! and history retention ([`RetentionStore`](slotguard::store::RetentionStore): a batch of finished
//! runs with their attempts and audit records per transaction) are written the same way.
//!
//! Staleness and lease expiry are judged by the store's clock, which for SQLite is the host clock read
//! inside the transaction (`unixepoch('now', 'subsec')`), never the caller's: every process sharing
//! the file is on the same host. The file must be on a local disk: WAL needs shared memory between
//! the processes, which network file systems do not give.
//!
//! # Lease locks
//!
//! The `lock` guard level uses a **lease**: a row with an expiry, not a PostgreSQL session lock that
//! lives exactly as long as its connection. A lease is kept only by renewal: while a process holds
//! leases, a background task renews all of them in one statement every third of the lease TTL
//! (default TTL 30 s; see [`SqliteBackendBuilder::lease_ttl`] and
//! [`SqliteBackendBuilder::renew_every`]). If a renewal finds a lease gone or taken by another owner
//! (it lapsed: the process was paused, or the file was unreachable for longer than the TTL), the
//! lease's [`LockLease::lost`](slotguard::store::LockLease::lost) is cancelled and the job is told
//! through its context. If renewals keep failing, the lease is declared lost once its TTL has passed
//! locally. Conversely, a process that dies without unlocking keeps its keys for up to one TTL. Slot
//! rows (the `slot` level) do not depend on the lease: their fencing tokens refuse a stale writer's
//! outcome whatever the lock did.
#![forbid(unsafe_code)]

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use slotguard::store::Backend;
use slotguard::store::held::HeldLeases;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Sqlite, SqlitePool, Transaction};
use tokio_util::sync::CancellationToken;

mod admin;
mod calendars;
mod claims;
mod error;
mod inspect;
mod lease;
mod migrate;
mod replicas;
mod retention;
mod schedules;
mod slots;
mod trace;
mod values;

pub use error::SqliteError;
// The rows `SqliteBackend::runs` answers are core's records, under the names this crate always used.
pub use slotguard::store::{AttemptRecord as AttemptRow, RunRecord as RunRow};

/// The host clock in Unix milliseconds, as SQL. `'now'` is fixed for the duration of one statement,
/// so several uses in one statement agree.
macro_rules! now_ms {
    () => {
        "CAST(ROUND(unixepoch('now', 'subsec') * 1000) AS INTEGER)"
    };
}
pub(crate) use now_ms;

/// The slotguard backend on one SQLite file: slot rows with fencing tokens, and lease locks.
///
/// Clones share the same connection pool and lease renewal. Several `SqliteBackend`s (in one
/// process or many) may open the same file; they coordinate through SQLite's write lock.
///
/// ```no_run
/// use slotguard_sqlite::SqliteBackend;
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let backend = SqliteBackend::open("slotguard.db").await?;
/// // Or with settings:
/// let backend = SqliteBackend::builder("slotguard.db")
///     .lease_ttl(std::time::Duration::from_secs(10))
///     .open()
///     .await?;
/// for run in backend.runs(Some("daily_settlement")).await? {
///     println!("{} {} attempt {} by {:?}", run.key.scheduled_at, run.status, run.attempt, run.owner);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SqliteBackend {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// Stops lease renewal.
    stop: CancellationToken,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last clone is gone: nobody can use the leases any more, so stop renewing them. Their rows
        // lapse after the TTL.
        self.stop.cancel();
    }
}

/// What the backend's handles and its renewal task share.
pub(crate) struct Shared {
    pub(crate) pool: SqlitePool,
    pub(crate) path: PathBuf,
    /// One writer per process at a time; other processes queue on SQLite's own write lock.
    writer: tokio::sync::Mutex<()>,
    /// The leases this backend holds, by key.
    leases: HeldLeases<lease::Held>,
    lease_ttl: Duration,
}

/// A write transaction (`BEGIN IMMEDIATE`) holding this process's writer slot. Fields drop in order:
/// the transaction rolls back (if not committed) before the next writer may start.
pub(crate) struct WriteTx<'a> {
    pub(crate) tx: Transaction<'static, Sqlite>,
    pub(crate) writer: tokio::sync::MutexGuard<'a, ()>,
}

impl Shared {
    /// Starts a write transaction: this process's writer slot first, then SQLite's write lock.
    pub(crate) async fn write(&self) -> Result<WriteTx<'_>, SqliteError> {
        let writer = self.writer.lock().await;
        let tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(WriteTx { tx, writer })
    }

    /// The host clock, read inside the transaction.
    pub(crate) async fn now(&self, tx: &mut WriteTx<'_>) -> Result<i64, SqliteError> {
        sqlx::query_scalar(concat!("SELECT ", now_ms!()))
            .fetch_one(&mut *tx.tx)
            .await
            .map_err(|e| self.query_error(e))
    }

    pub(crate) fn query_error(&self, source: sqlx::Error) -> SqliteError {
        SqliteError::Query {
            path: self.path.clone(),
            source,
        }
    }
}

impl fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("path", &self.inner.shared.path)
            .field("lease_ttl", &self.inner.shared.lease_ttl)
            .finish_non_exhaustive()
    }
}

impl SqliteBackend {
    /// Opens (creating if needed) the store in the file at `path` with default settings, and brings
    /// its tables up to date. Must be called inside a tokio runtime: it starts lease renewal.
    ///
    /// # Errors
    ///
    /// [`SqliteError::Open`] when the file cannot be opened or created; a migration error when its
    /// tables cannot be brought up to date (see [`SqliteError`]).
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteBackend, SqliteError> {
        SqliteBackend::builder(path).open().await
    }

    /// Settings for the store in the file at `path`; finish with [`SqliteBackendBuilder::open`].
    pub fn builder(path: impl AsRef<Path>) -> SqliteBackendBuilder {
        SqliteBackendBuilder {
            path: path.as_ref().to_owned(),
            busy_timeout: Duration::from_secs(5),
            max_connections: 4,
            lease_ttl: Duration::from_secs(30),
            renew_every: None,
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.shared.path
    }

    /// The connection pool, for reading the `slotguard_` tables (or the application's own) directly.
    pub fn pool(&self) -> &SqlitePool {
        &self.inner.shared.pool
    }

    /// The schema version this crate brings the file to.
    pub fn schema_version() -> i64 {
        migrate::latest_version()
    }

    /// Releases every lease lock this backend holds, stops their renewal and closes the pool, for all
    /// clones. Slot rows are left as they are. Later calls on any clone fail.
    ///
    /// # Errors
    ///
    /// When the leases cannot be deleted; they then lapse after their TTL.
    pub async fn close(&self) -> Result<(), SqliteError> {
        self.inner.stop.cancel();
        let released = self.inner.shared.release_all().await;
        self.inner.shared.pool.close().await;
        released
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }
}

impl Backend for SqliteBackend {
    fn name(&self) -> &'static str {
        "sqlite"
    }
}

/// Settings for a [`SqliteBackend`], from [`SqliteBackend::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct SqliteBackendBuilder {
    path: PathBuf,
    busy_timeout: Duration,
    max_connections: u32,
    lease_ttl: Duration,
    renew_every: Option<Duration>,
}

impl SqliteBackendBuilder {
    /// How long a write waits for another process's write to finish before failing with
    /// [`StoreError::Unavailable`](slotguard::store::StoreError::Unavailable) (default 5 s).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// The most connections this backend opens (default 4). Writes use one at a time; the others
    /// serve reads.
    pub fn max_connections(mut self, max: u32) -> Self {
        self.max_connections = max;
        self
    }

    /// How long a lease lock lasts without renewal (default 30 s): after a crash, how long its keys
    /// stay locked.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// How often held leases are renewed (default a third of [`lease_ttl`](Self::lease_ttl)). An
    /// interval at or above the TTL lets leases lapse between renewals: it is allowed, for tests, and
    /// logged as a warning.
    pub fn renew_every(mut self, interval: Duration) -> Self {
        self.renew_every = Some(interval);
        self
    }

    /// Opens (creating if needed) the file, sets WAL mode and the busy timeout, applies the crate's
    /// migrations and starts lease renewal. Must be called inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`SqliteError::Config`] for impossible settings, [`SqliteError::Open`] when the file cannot be
    /// opened or created, and the migration errors of [`SqliteError`].
    pub async fn open(self) -> Result<SqliteBackend, SqliteError> {
        let path = self.path;
        let config = |reason: &str| SqliteError::Config {
            path: path.clone(),
            reason: reason.to_owned(),
        };
        if self.lease_ttl < Duration::from_millis(1) {
            return Err(config("the lease TTL must be at least a millisecond"));
        }
        let renew_every = self.renew_every.unwrap_or(self.lease_ttl / 3);
        if renew_every.is_zero() {
            return Err(config("the lease renewal interval must not be zero"));
        }
        if self.max_connections == 0 {
            return Err(config("at least one connection is needed"));
        }
        if renew_every >= self.lease_ttl {
            tracing::warn!(
                path = %path.display(),
                ?renew_every,
                lease_ttl = ?self.lease_ttl,
                "lease renewal is not more frequent than the lease TTL: held locks will lapse"
            );
        }

        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(self.busy_timeout)
            .foreign_keys(true);
        // Several processes opening a fresh file at once race to switch it to WAL: SQLite answers
        // SQLITE_BUSY at once (without its busy handler, which could deadlock there) to all but one of
        // them. Such an open is retried, within the busy timeout.
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(5);
        let (pool, mode) = loop {
            match connect(&options, self.max_connections).await {
                Ok(opened) => break opened,
                Err(source) if is_busy(&source) && started.elapsed() < self.busy_timeout => {
                    tracing::debug!(path = %path.display(), error = %source, "file busy while opening; retrying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(source) => {
                    return Err(SqliteError::Open {
                        path: path.clone(),
                        source,
                    });
                }
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            // Still correct (the rollback journal serializes writers too), but readers then block
            // writers.
            tracing::warn!(path = %path.display(), journal_mode = %mode, "SQLite refused WAL mode");
        }
        migrate::run(&pool, &path).await?;

        let shared = Arc::new(Shared {
            pool,
            path,
            writer: tokio::sync::Mutex::new(()),
            leases: HeldLeases::default(),
            lease_ttl: self.lease_ttl,
        });
        let stop = CancellationToken::new();
        tokio::spawn(lease::renew_loop(
            Arc::clone(&shared),
            renew_every,
            stop.clone(),
        ));
        Ok(SqliteBackend {
            inner: Arc::new(Inner { shared, stop }),
        })
    }
}

/// A pool on the file, and the journal mode it ended up in.
async fn connect(
    options: &SqliteConnectOptions,
    max_connections: u32,
) -> Result<(SqlitePool, String), sqlx::Error> {
    let pool = SqlitePoolOptions::new()
        .max_connections(max_connections)
        .connect_with(options.clone())
        .await?;
    match sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&pool)
        .await
    {
        Ok(mode) => Ok((pool, mode)),
        Err(e) => {
            pool.close().await;
            Err(e)
        }
    }
}

/// SQLITE_BUSY or SQLITE_LOCKED, with any extended code.
fn is_busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}

/// A duration in whole milliseconds, rounded up (a threshold is never shortened), capped far below
/// overflow when added to an instant.
pub(crate) fn duration_ms(d: Duration) -> i64 {
    const CAP: i64 = i64::MAX / 4;
    i64::try_from(d.as_nanos().div_ceil(1_000_000)).map_or(CAP, |ms| ms.min(CAP))
}

/// Integers as a JSON array, bound as one parameter and read with `json_each`: one statement for
/// any number of tokens or keys, with no SQL built from data.
pub(crate) fn json_array(values: impl IntoIterator<Item = i64>) -> String {
    let items: Vec<String> = values.into_iter().map(|v| v.to_string()).collect();
    format!("[{}]", items.join(","))
}
