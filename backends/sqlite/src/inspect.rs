//! Reading the slot rows back, for tests and operators.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use slotguard::ErrorClass;
use slotguard::store::{AttemptRecord, CalendarStamp, RunRecord, RunStatus, SlotKey, Trigger};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::error::SqliteError;
use crate::{Shared, SqliteBackend};

/// The columns of a run that [`Decoder::run`] reads, qualified by the alias `r`.
pub(crate) const RUN_COLUMNS: &str = "
r.id, r.job_name, r.scheduled_at, r.partition_key, r.status, r.attempt, r.owner, r.fencing_token,
r.heartbeat_at, r.stale_after_ms, r.next_attempt_at, r.created_at, r.updated_at, r.started_at,
r.finished_at, r.error_class, r.error_message, r.zone, r.wall_time, r.business_date, r.trigger_kind,
r.schedule_fingerprint, r.nominal_dates, r.calendar_name, r.calendar_version";

/// The columns of an attempt that [`Decoder::attempt`] reads, qualified by the alias `a`.
pub(crate) const ATTEMPT_COLUMNS: &str = "
a.run_id, a.attempt, a.owner, a.fencing_token, a.status, a.started_at, a.finished_at,
a.error_message";

const RUNS_WHERE: &str = "
FROM slotguard_job_runs AS r
WHERE ?1 IS NULL OR r.job_name = ?1
ORDER BY r.job_name, r.scheduled_at, r.partition_key";

const ATTEMPTS_WHERE: &str = "
FROM slotguard_job_run_attempts AS a
JOIN slotguard_job_runs AS r ON r.id = a.run_id
WHERE ?1 IS NULL OR r.job_name = ?1
ORDER BY a.run_id, a.attempt";

impl SqliteBackend {
    /// Every run of `job` (of every job with `None`) with its attempts, ordered by job, slot and
    /// partition. Read in one snapshot.
    ///
    /// This inherent method takes precedence over
    /// [`AdminStore::runs`](slotguard::store::AdminStore::runs) in method-call syntax; call that one as
    /// `AdminStore::runs(&backend, &filter)`.
    ///
    /// # Errors
    ///
    /// When the file cannot be read, or holds a value this crate never writes
    /// ([`SqliteError::Corrupt`]).
    pub async fn runs(&self, job: Option<&str>) -> Result<Vec<RunRecord>, SqliteError> {
        let shared = self.shared();
        let q = |e| shared.query_error(e);
        // A deferred transaction is one WAL snapshot: the attempts match the runs.
        let mut tx = shared.pool.begin().await.map_err(q)?;
        let runs = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {RUN_COLUMNS}{RUNS_WHERE}"
        )))
        .bind(job)
        .fetch_all(&mut *tx)
        .await
        .map_err(q)?;
        let attempts = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {ATTEMPT_COLUMNS}{ATTEMPTS_WHERE}"
        )))
        .bind(job)
        .fetch_all(&mut *tx)
        .await
        .map_err(q)?;
        tx.rollback().await.map_err(q)?;
        Decoder { shared }.assemble(&runs, &attempts)
    }
}

/// Turns rows into records, naming the file and the row in errors.
pub(crate) struct Decoder<'a> {
    pub(crate) shared: &'a Shared,
}

impl Decoder<'_> {
    pub(crate) fn get<'r, T>(&self, row: &'r SqliteRow, column: &str) -> Result<T, SqliteError>
    where
        T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
    {
        row.try_get(column).map_err(|e| self.shared.query_error(e))
    }

    fn corrupt(&self, run_id: i64, what: &'static str, value: impl ToString) -> SqliteError {
        SqliteError::Corrupt {
            path: self.shared.path.clone(),
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

    fn optional_instant(
        &self,
        row: &SqliteRow,
        run_id: i64,
        column: &'static str,
    ) -> Result<Option<DateTime<Utc>>, SqliteError> {
        match self.get::<Option<i64>>(row, column)? {
            Some(ms) => Ok(Some(self.instant(run_id, column, ms)?)),
            None => Ok(None),
        }
    }

    fn status(&self, run_id: i64, value: String) -> Result<RunStatus, SqliteError> {
        parse_status(&value).ok_or_else(|| self.corrupt(run_id, "status", value))
    }

    /// Runs with their attempts: `attempts` (any order of runs, each run's in order) are attached to
    /// the runs they belong to.
    pub(crate) fn assemble(
        &self,
        runs: &[SqliteRow],
        attempts: &[SqliteRow],
    ) -> Result<Vec<RunRecord>, SqliteError> {
        let mut by_run: HashMap<i64, Vec<AttemptRecord>> = HashMap::new();
        for row in attempts {
            let (run_id, attempt) = self.attempt(row)?;
            by_run.entry(run_id).or_default().push(attempt);
        }
        runs.iter()
            .map(|row| {
                let mut run = self.run(row)?;
                run.attempts = by_run.remove(&run.id).unwrap_or_default();
                Ok(run)
            })
            .collect()
    }

    /// A run from the [`RUN_COLUMNS`], with no attempts yet.
    fn run(&self, row: &SqliteRow) -> Result<RunRecord, SqliteError> {
        let id: i64 = self.get(row, "id")?;
        let attempt: i64 = self.get(row, "attempt")?;
        let stale_after: i64 = self.get(row, "stale_after_ms")?;
        let trigger: String = self.get(row, "trigger_kind")?;
        let wall: String = self.get(row, "wall_time")?;
        let business_date: String = self.get(row, "business_date")?;
        let error_class: Option<String> = self.get(row, "error_class")?;
        let fingerprint: i64 = self.get(row, "schedule_fingerprint")?;
        Ok(RunRecord {
            id,
            key: SlotKey {
                job: self.get(row, "job_name")?,
                scheduled_at: self.instant(id, "scheduled_at", self.get(row, "scheduled_at")?)?,
                partition: self.get(row, "partition_key")?,
            },
            status: self.status(id, self.get(row, "status")?)?,
            attempt: u32::try_from(attempt).map_err(|_| self.corrupt(id, "attempt", attempt))?,
            owner: self.get(row, "owner")?,
            // A row that never ran (skipped, buffered) has no token: 0, below every token handed out.
            token: self.get::<Option<i64>>(row, "fencing_token")?.unwrap_or(0),
            heartbeat_at: self.optional_instant(row, id, "heartbeat_at")?,
            stale_after: Duration::from_millis(
                u64::try_from(stale_after)
                    .map_err(|_| self.corrupt(id, "stale_after_ms", stale_after))?,
            ),
            next_attempt_at: self.optional_instant(row, id, "next_attempt_at")?,
            created_at: self.instant(id, "created_at", self.get(row, "created_at")?)?,
            updated_at: self.instant(id, "updated_at", self.get(row, "updated_at")?)?,
            started_at: self.optional_instant(row, id, "started_at")?,
            finished_at: self.optional_instant(row, id, "finished_at")?,
            error_class: match error_class {
                None => None,
                Some(class) if class.parse::<ErrorClass>().is_ok() => Some(class),
                Some(other) => return Err(self.corrupt(id, "error_class", other)),
            },
            error_message: self.get(row, "error_message")?,
            zone: self.get(row, "zone")?,
            wall_time: parse_wall(&wall).ok_or_else(|| self.corrupt(id, "wall_time", &wall))?,
            business_date: parse_date(&business_date)
                .ok_or_else(|| self.corrupt(id, "business_date", &business_date))?,
            trigger: parse_trigger(&trigger)
                .ok_or_else(|| self.corrupt(id, "trigger", &trigger))?,
            // The bits of the u64 the claim stored.
            fingerprint: fingerprint as u64,
            calendar: CalendarStamp::from_columns(
                self.get::<Option<String>>(row, "nominal_dates")?.as_deref(),
                self.get(row, "calendar_name")?,
                self.get(row, "calendar_version")?,
            ),
            attempts: Vec::new(),
        })
    }

    /// An attempt from the [`ATTEMPT_COLUMNS`], with its run's id.
    fn attempt(&self, row: &SqliteRow) -> Result<(i64, AttemptRecord), SqliteError> {
        let run_id: i64 = self.get(row, "run_id")?;
        let attempt: i64 = self.get(row, "attempt")?;
        Ok((
            run_id,
            AttemptRecord {
                attempt: u32::try_from(attempt)
                    .map_err(|_| self.corrupt(run_id, "attempt", attempt))?,
                owner: self.get(row, "owner")?,
                token: self.get(row, "fencing_token")?,
                status: self.status(run_id, self.get(row, "status")?)?,
                started_at: self.instant(run_id, "started_at", self.get(row, "started_at")?)?,
                finished_at: self.optional_instant(row, run_id, "finished_at")?,
                message: self.get(row, "error_message")?,
            },
        ))
    }
}

/// A wall time as stored (ISO 8601 without offset).
pub(crate) fn parse_wall(s: &str) -> Option<NaiveDateTime> {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").ok()
}

/// A business date as stored.
pub(crate) fn parse_date(s: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
}

/// A status as stored.
pub(crate) fn parse_status(s: &str) -> Option<RunStatus> {
    s.parse().ok()
}

/// A trigger as stored.
pub(crate) fn parse_trigger(s: &str) -> Option<Trigger> {
    s.parse().ok()
}
