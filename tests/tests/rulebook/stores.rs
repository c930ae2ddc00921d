//! The stores under test, side by side: how each is reset, aged and read back for comparison.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeDelta, Utc};
use slotguard::store::{Backend, RunFilter, RunRecord, RunStatus, SlotKey};
use slotguard::{Clock, MemoryBackend};
use slotguard_postgres::{HistoryPartitions, PgBackend};
use slotguard_sqlite::SqliteBackend;
use slotguard_tests::pg::{TestSchema, database_url};
use sqlx::AssertSqlSafe;

/// A row as the stores are compared: what a user of the store could see, with instants made
/// relative to the store's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowView {
    pub(crate) key: SlotKey,
    pub(crate) status: RunStatus,
    pub(crate) attempt: u32,
    pub(crate) owner: Option<String>,
    pub(crate) message: Option<String>,
    /// Whether the next attempt is due by the store's clock; `None` for no next attempt.
    pub(crate) due: Option<bool>,
    pub(crate) finished: bool,
    /// `running` with a heartbeat older than its threshold.
    pub(crate) stale: bool,
    /// Owner, status and message of each attempt.
    pub(crate) attempts: Vec<(String, RunStatus, Option<String>)>,
}

/// The memory backend's clock: moved by the test only.
#[derive(Debug)]
pub(crate) struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    pub(crate) fn new(at: DateTime<Utc>) -> Self {
        ManualClock(Mutex::new(at))
    }

    fn advance(&self, by: TimeDelta) {
        let mut now = self.0.lock().expect("clock");
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().expect("clock")
    }
}

/// One store under test.
pub(crate) enum Store {
    Memory(MemoryBackend, Arc<ManualClock>),
    /// The directory is removed when the store is dropped.
    Sqlite {
        backend: SqliteBackend,
        _dir: tempfile::TempDir,
    },
    /// The schema is dropped when the store is.
    Postgres {
        backend: PgBackend,
        partitioned: bool,
        _schema: TestSchema,
    },
}

impl Store {
    pub(crate) fn memory(now: DateTime<Utc>) -> Self {
        let clock = Arc::new(ManualClock::new(now));
        Store::Memory(MemoryBackend::with_clock(clock.clone()), clock)
    }

    pub(crate) async fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let backend = SqliteBackend::open(dir.path().join("rulebook.db"))
            .await
            .expect("open SQLite");
        Store::Sqlite { backend, _dir: dir }
    }

    /// PostgreSQL, its history a plain table or partitioned by day (`partitioned`).
    pub(crate) async fn postgres(partitioned: bool) -> Self {
        let schema = TestSchema::with_prefix("sg_rulebook");
        let mut builder = PgBackend::builder(&database_url())
            .schema(schema.name.clone())
            .pool_size(2);
        if partitioned {
            builder = builder.partitioned_history(HistoryPartitions::daily());
        }
        let backend = builder
            .connect()
            .await
            .expect("connect to PostgreSQL on 127.0.0.1:5432");
        if partitioned {
            // The steps' slots are a day before now (a partition of their own) or a month after
            // it (the default partition).
            let now = Utc::now();
            backend
                .make_history_partitions(now - TimeDelta::days(2), now + TimeDelta::days(2))
                .await
                .expect("partitions");
        }
        Store::Postgres {
            backend,
            partitioned,
            _schema: schema,
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Store::Memory(..) => "memory",
            Store::Sqlite { .. } => "sqlite",
            Store::Postgres {
                partitioned: false, ..
            } => "postgres",
            Store::Postgres {
                partitioned: true, ..
            } => "postgres (partitioned)",
        }
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        match self {
            Store::Memory(b, _) => b,
            Store::Sqlite { backend: b, .. } => b,
            Store::Postgres { backend: b, .. } => b,
        }
    }

    /// Every row removed (the memory store is made anew by the caller).
    pub(crate) async fn reset(&self) {
        match self {
            Store::Memory(..) => {}
            Store::Sqlite { backend: b, .. } => {
                for table in ["slotguard_job_run_attempts", "slotguard_job_runs"] {
                    sqlx::query(AssertSqlSafe(format!("DELETE FROM {table}")))
                        .execute(b.pool())
                        .await
                        .expect("reset SQLite");
                }
            }
            Store::Postgres { backend: b, .. } => {
                let sql = format!(
                    "TRUNCATE \"{0}\".job_run_attempts, \"{0}\".job_runs",
                    b.schema()
                );
                sqlx::raw_sql(AssertSqlSafe(sql))
                    .execute(b.pool())
                    .await
                    .expect("reset PostgreSQL");
            }
        }
    }

    /// Moves the store's clock forward by `by`; a database's clock cannot move, so its stored
    /// instants move back instead (heartbeats and next attempts: all that staleness and dueness
    /// read).
    pub(crate) async fn age(&self, by: TimeDelta) {
        let ms = by.num_milliseconds();
        match self {
            Store::Memory(_, clock) => clock.advance(by),
            Store::Sqlite { backend: b, .. } => {
                sqlx::query(
                    "UPDATE slotguard_job_runs SET heartbeat_at = heartbeat_at - ?1, \
                     next_attempt_at = next_attempt_at - ?1",
                )
                .bind(ms)
                .execute(b.pool())
                .await
                .expect("age SQLite");
            }
            Store::Postgres { backend: b, .. } => {
                let sql = format!(
                    "UPDATE \"{}\".job_runs SET heartbeat_at = heartbeat_at - $1 * interval '1 millisecond', \
                     next_attempt_at = next_attempt_at - $1 * interval '1 millisecond'",
                    b.schema()
                );
                sqlx::query(AssertSqlSafe(sql))
                    .bind(ms as f64)
                    .execute(b.pool())
                    .await
                    .expect("age PostgreSQL");
            }
        }
    }

    /// The run of `key`, if it is `pending`, never attempted and due at a time, falls due `by`
    /// after the store's now (see `Op::EnqueueAhead`).
    pub(crate) async fn delay(&self, key: &SlotKey, by: TimeDelta) {
        let ms = by.num_milliseconds();
        let (job, at, partition) = (&key.job, key.scheduled_at, &key.partition);
        match self {
            Store::Memory(b, clock) => {
                b.delay_queued(key, clock.now() + by);
            }
            Store::Sqlite { backend: b, .. } => {
                sqlx::query(
                    "UPDATE slotguard_job_runs \
                     SET next_attempt_at = CAST(ROUND(unixepoch('now', 'subsec') * 1000) AS INTEGER) + ?1 \
                     WHERE job_name = ?2 AND scheduled_at = ?3 AND partition_key = ?4 \
                       AND status = 'pending' AND attempt = 0 AND next_attempt_at IS NOT NULL",
                )
                .bind(ms)
                .bind(job)
                .bind(at.timestamp_millis())
                .bind(partition)
                .execute(b.pool())
                .await
                .expect("delay SQLite");
            }
            Store::Postgres { backend: b, .. } => {
                let sql = format!(
                    "UPDATE \"{}\".job_runs \
                     SET next_attempt_at = clock_timestamp() + $1 * interval '1 millisecond' \
                     WHERE job_name = $2 AND scheduled_at = $3 AND partition_key = $4 \
                       AND status = 'pending' AND attempt = 0 AND next_attempt_at IS NOT NULL",
                    b.schema()
                );
                sqlx::query(AssertSqlSafe(sql))
                    .bind(ms as f64)
                    .bind(job)
                    .bind(at)
                    .bind(partition)
                    .execute(b.pool())
                    .await
                    .expect("delay PostgreSQL");
            }
        }
    }

    /// Every row, sorted by slot key.
    pub(crate) async fn snapshot(&self) -> Vec<RowView> {
        let backend = self.backend();
        let now = backend.store_now().await.expect("store clock");
        let filter = RunFilter {
            limit: 10_000,
            ..RunFilter::default()
        };
        let mut rows: Vec<RowView> = backend
            .runs(&filter)
            .await
            .expect("read the runs")
            .iter()
            .map(|r| view(r, now))
            .collect();
        rows.sort_by(|a, b| a.key.cmp(&b.key));
        rows
    }
}

fn view(r: &RunRecord, now: DateTime<Utc>) -> RowView {
    let stale = r.status == RunStatus::Running
        && r.heartbeat_at.is_some_and(|beat| {
            TimeDelta::from_std(r.stale_after).is_ok_and(|limit| beat + limit < now)
        });
    RowView {
        key: r.key.clone(),
        status: r.status,
        attempt: r.attempt,
        owner: r.owner.clone().filter(|o| !o.is_empty()),
        message: r.error_message.clone(),
        due: r.next_attempt_at.map(|at| at <= now),
        finished: r.finished_at.is_some(),
        stale,
        attempts: r
            .attempts
            .iter()
            .map(|a| (a.owner.clone(), a.status, a.message.clone()))
            .collect(),
    }
}
