//! Reading the slot rows back, for tests and operators.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use slotguard::ErrorClass;
use slotguard::store::{RunStatus, SlotKey, Trigger};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::SqliteBackend;
use crate::error::SqliteError;

/// A run, as the store recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRow {
    /// The run's id.
    pub id: i64,
    /// The slot.
    pub key: SlotKey,
    /// Its status.
    pub status: RunStatus,
    /// The number of its latest attempt (0 before the first).
    pub attempt: u32,
    /// The process that holds, or last held, it.
    pub owner: Option<String>,
    /// The fencing token of its latest attempt.
    pub token: Option<i64>,
    /// When its holder last proved alive, by the host clock.
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// How old a heartbeat may get before the run counts as abandoned.
    pub stale_after: Duration,
    /// Why it exists.
    pub trigger: Trigger,
    /// The IANA zone of its schedule.
    pub zone: String,
    /// The wall-clock time its schedule names.
    pub wall: NaiveDateTime,
    /// The slot's business date.
    pub business_date: NaiveDate,
    /// The schedule's fingerprint.
    pub fingerprint: u64,
    /// How its last attempt failed, when it failed.
    pub error_class: Option<ErrorClass>,
    /// The error, or the reason it was abandoned.
    pub error_message: Option<String>,
    /// Every attempt, in order.
    pub attempts: Vec<AttemptRow>,
}

/// One attempt of a run, as the store recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptRow {
    /// From 1.
    pub attempt: u32,
    /// The process that held it.
    pub owner: String,
    /// Its fencing token.
    pub token: i64,
    /// `running` until it ends; then `succeeded`, `failed` or `abandoned`.
    pub status: RunStatus,
    /// When it was claimed, by the host clock.
    pub started_at: DateTime<Utc>,
    /// When it ended, by the host clock.
    pub finished_at: Option<DateTime<Utc>>,
    /// The error, or the reason it was abandoned.
    pub error_message: Option<String>,
}

const RUNS: &str = "
SELECT id, job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token,
       heartbeat_at, stale_after_ms, trigger_kind, zone, wall_time, business_date,
       schedule_fingerprint, error_class, error_message
FROM slotguard_job_runs
WHERE ?1 IS NULL OR job_name = ?1
ORDER BY job_name, scheduled_at, partition_key";

const ATTEMPTS: &str = "
SELECT a.run_id, a.attempt, a.owner, a.fencing_token, a.status, a.started_at, a.finished_at,
       a.error_message
FROM slotguard_job_run_attempts AS a
JOIN slotguard_job_runs AS r ON r.id = a.run_id
WHERE ?1 IS NULL OR r.job_name = ?1
ORDER BY a.run_id, a.attempt";

impl SqliteBackend {
    /// Every run of `job` (of every job with `None`) with its attempts, ordered by job, slot and
    /// partition. Read in one snapshot.
    ///
    /// # Errors
    ///
    /// When the file cannot be read, or holds a value this crate never writes
    /// ([`SqliteError::Corrupt`]).
    pub async fn runs(&self, job: Option<&str>) -> Result<Vec<RunRow>, SqliteError> {
        let shared = self.shared();
        let q = |e| shared.query_error(e);
        // A deferred transaction is one WAL snapshot: the attempts match the runs.
        let mut tx = shared.pool.begin().await.map_err(q)?;
        let runs = sqlx::query(RUNS)
            .bind(job)
            .fetch_all(&mut *tx)
            .await
            .map_err(q)?;
        let attempts = sqlx::query(ATTEMPTS)
            .bind(job)
            .fetch_all(&mut *tx)
            .await
            .map_err(q)?;
        tx.rollback().await.map_err(q)?;

        let decode = Decoder { backend: self };
        let mut by_run: HashMap<i64, Vec<AttemptRow>> = HashMap::new();
        for row in &attempts {
            let (run_id, attempt) = decode.attempt(row)?;
            by_run.entry(run_id).or_default().push(attempt);
        }
        runs.iter()
            .map(|row| {
                let mut run = decode.run(row)?;
                run.attempts = by_run.remove(&run.id).unwrap_or_default();
                Ok(run)
            })
            .collect()
    }
}

struct Decoder<'a> {
    backend: &'a SqliteBackend,
}

impl Decoder<'_> {
    fn get<'r, T>(&self, row: &'r SqliteRow, column: &str) -> Result<T, SqliteError>
    where
        T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
    {
        row.try_get(column)
            .map_err(|e| self.backend.shared().query_error(e))
    }

    fn corrupt(&self, run_id: i64, what: &'static str, value: impl ToString) -> SqliteError {
        SqliteError::Corrupt {
            path: self.backend.path().to_owned(),
            run_id,
            what,
            value: value.to_string(),
        }
    }

    fn instant(
        &self,
        run_id: i64,
        what: &'static str,
        ms: i64,
    ) -> Result<DateTime<Utc>, SqliteError> {
        DateTime::from_timestamp_millis(ms).ok_or_else(|| self.corrupt(run_id, what, ms))
    }

    fn status(&self, run_id: i64, value: String) -> Result<RunStatus, SqliteError> {
        parse_status(&value).ok_or_else(|| self.corrupt(run_id, "status", value))
    }

    fn run(&self, row: &SqliteRow) -> Result<RunRow, SqliteError> {
        let id: i64 = self.get(row, "id")?;
        let attempt: i64 = self.get(row, "attempt")?;
        let stale_after: i64 = self.get(row, "stale_after_ms")?;
        let trigger: String = self.get(row, "trigger_kind")?;
        let wall: String = self.get(row, "wall_time")?;
        let business_date: String = self.get(row, "business_date")?;
        let error_class: Option<String> = self.get(row, "error_class")?;
        let fingerprint: i64 = self.get(row, "schedule_fingerprint")?;
        Ok(RunRow {
            id,
            key: SlotKey {
                job: self.get(row, "job_name")?,
                scheduled_at: self.instant(id, "scheduled_at", self.get(row, "scheduled_at")?)?,
                partition: self.get(row, "partition_key")?,
            },
            status: self.status(id, self.get(row, "status")?)?,
            attempt: u32::try_from(attempt).map_err(|_| self.corrupt(id, "attempt", attempt))?,
            owner: self.get(row, "owner")?,
            token: self.get(row, "fencing_token")?,
            heartbeat_at: match self.get::<Option<i64>>(row, "heartbeat_at")? {
                Some(ms) => Some(self.instant(id, "heartbeat_at", ms)?),
                None => None,
            },
            stale_after: Duration::from_millis(
                u64::try_from(stale_after)
                    .map_err(|_| self.corrupt(id, "stale_after_ms", stale_after))?,
            ),
            trigger: parse_trigger(&trigger)
                .ok_or_else(|| self.corrupt(id, "trigger", &trigger))?,
            zone: self.get(row, "zone")?,
            wall: NaiveDateTime::parse_from_str(&wall, "%Y-%m-%dT%H:%M:%S%.f")
                .map_err(|_| self.corrupt(id, "wall_time", &wall))?,
            business_date: NaiveDate::parse_from_str(&business_date, "%Y-%m-%d")
                .map_err(|_| self.corrupt(id, "business_date", &business_date))?,
            // The bits of the u64 the claim stored.
            fingerprint: fingerprint as u64,
            error_class: match error_class.as_deref() {
                None => None,
                Some("transient") => Some(ErrorClass::Transient),
                Some("permanent") => Some(ErrorClass::Permanent),
                Some(other) => return Err(self.corrupt(id, "error_class", other)),
            },
            error_message: self.get(row, "error_message")?,
            attempts: Vec::new(),
        })
    }

    fn attempt(&self, row: &SqliteRow) -> Result<(i64, AttemptRow), SqliteError> {
        let run_id: i64 = self.get(row, "run_id")?;
        let attempt: i64 = self.get(row, "attempt")?;
        Ok((
            run_id,
            AttemptRow {
                attempt: u32::try_from(attempt)
                    .map_err(|_| self.corrupt(run_id, "attempt", attempt))?,
                owner: self.get(row, "owner")?,
                token: self.get(row, "fencing_token")?,
                status: self.status(run_id, self.get(row, "status")?)?,
                started_at: self.instant(run_id, "started_at", self.get(row, "started_at")?)?,
                finished_at: match self.get::<Option<i64>>(row, "finished_at")? {
                    Some(ms) => Some(self.instant(run_id, "finished_at", ms)?),
                    None => None,
                },
                error_message: self.get(row, "error_message")?,
            },
        ))
    }
}

/// A status as stored.
pub(crate) fn parse_status(s: &str) -> Option<RunStatus> {
    Some(match s {
        "pending" => RunStatus::Pending,
        "running" => RunStatus::Running,
        "succeeded" => RunStatus::Succeeded,
        "failed" => RunStatus::Failed,
        "abandoned" => RunStatus::Abandoned,
        "skipped" => RunStatus::Skipped,
        "dead" => RunStatus::Dead,
        _ => return None,
    })
}

/// A trigger as stored.
pub(crate) fn parse_trigger(s: &str) -> Option<Trigger> {
    Some(match s {
        "schedule" => Trigger::Schedule,
        "catch_up" => Trigger::CatchUp,
        "manual" => Trigger::Manual,
        "backfill" => Trigger::Backfill,
        _ => return None,
    })
}
