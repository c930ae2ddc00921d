//! Rows as operators and tests read them.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use slotguard::store::{RunStatus, SlotKey, Trigger};
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::error::PgError;

/// One run (`job_runs` row) with its attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRow {
    /// The run's id.
    pub id: i64,
    /// The slot: job, instant, partition.
    pub key: SlotKey,
    /// Its status.
    pub status: RunStatus,
    /// The number of its latest attempt.
    pub attempt: u32,
    /// The owner of the latest attempt.
    pub owner: Option<String>,
    /// The fencing token of the latest attempt.
    pub token: i64,
    /// The latest heartbeat (database clock).
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// The staleness threshold of the latest attempt.
    pub stale_after: Duration,
    /// When the next attempt is due, if one is planned.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the row was created.
    pub created_at: DateTime<Utc>,
    /// When the row last changed (heartbeats excluded).
    pub updated_at: DateTime<Utc>,
    /// When the latest attempt started.
    pub started_at: Option<DateTime<Utc>>,
    /// When the run reached its status, if it is final.
    pub finished_at: Option<DateTime<Utc>>,
    /// `transient` or `permanent`, when the run failed.
    pub error_class: Option<String>,
    /// The error, or the reason it was abandoned.
    pub error_message: Option<String>,
    /// The IANA zone of the schedule.
    pub zone: String,
    /// The slot's local wall time.
    pub wall_time: NaiveDateTime,
    /// The slot's business date.
    pub business_date: NaiveDate,
    /// Why the run exists.
    pub trigger: Trigger,
    /// The schedule's fingerprint.
    pub fingerprint: u64,
    /// Every attempt, in order.
    pub attempts: Vec<AttemptRow>,
}

/// One attempt (`job_run_attempts` row).
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
    /// When it was claimed (database clock).
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// The error, or the reason it was abandoned.
    pub message: Option<String>,
}

pub(crate) fn parse_status(value: &str) -> Result<RunStatus, PgError> {
    Ok(match value {
        "pending" => RunStatus::Pending,
        "running" => RunStatus::Running,
        "succeeded" => RunStatus::Succeeded,
        "failed" => RunStatus::Failed,
        "abandoned" => RunStatus::Abandoned,
        "skipped" => RunStatus::Skipped,
        "dead" => RunStatus::Dead,
        other => {
            return Err(PgError::UnexpectedValue {
                column: "status",
                value: other.to_owned(),
            });
        }
    })
}

pub(crate) fn parse_trigger(value: &str) -> Result<Trigger, PgError> {
    Ok(match value {
        "schedule" => Trigger::Schedule,
        "catch_up" => Trigger::CatchUp,
        "manual" => Trigger::Manual,
        "backfill" => Trigger::Backfill,
        other => {
            return Err(PgError::UnexpectedValue {
                column: "trigger",
                value: other.to_owned(),
            });
        }
    })
}

fn count(column: &'static str, value: i32) -> Result<u32, PgError> {
    u32::try_from(value).map_err(|_| PgError::UnexpectedValue {
        column,
        value: value.to_string(),
    })
}

/// Folds the rows of [`RUNS`](crate::sql::RUNS) (one per attempt, ordered by run) into runs.
pub(crate) fn fold_runs(rows: Vec<PgRow>) -> Result<Vec<RunRow>, PgError> {
    let mut runs: Vec<RunRow> = Vec::new();
    for row in rows {
        let id: i64 = row.try_get("id")?;
        if runs.last().is_none_or(|r| r.id != id) {
            runs.push(run(&row)?);
        }
        let a_attempt: Option<i32> = row.try_get("a_attempt")?;
        if let (Some(attempt), Some(run)) = (a_attempt, runs.last_mut()) {
            let status: String = row.try_get("a_status")?;
            run.attempts.push(AttemptRow {
                attempt: count("job_run_attempts.attempt", attempt)?,
                owner: row.try_get("a_owner")?,
                token: row.try_get("a_token")?,
                status: parse_status(&status)?,
                started_at: row.try_get("a_started_at")?,
                finished_at: row.try_get("a_finished_at")?,
                message: row.try_get("a_message")?,
            });
        }
    }
    Ok(runs)
}

fn run(row: &PgRow) -> Result<RunRow, PgError> {
    let status: String = row.try_get("status")?;
    let trigger: String = row.try_get("trigger")?;
    let stale_us: i64 = row.try_get("stale_after_us")?;
    let fingerprint: i64 = row.try_get("schedule_fingerprint")?;
    Ok(RunRow {
        id: row.try_get("id")?,
        key: SlotKey {
            job: row.try_get("job_name")?,
            scheduled_at: row.try_get("scheduled_at")?,
            partition: row.try_get("partition_key")?,
        },
        status: parse_status(&status)?,
        attempt: count("job_runs.attempt", row.try_get("attempt")?)?,
        owner: row.try_get("owner")?,
        token: row.try_get("fencing_token")?,
        heartbeat_at: row.try_get("heartbeat_at")?,
        stale_after: Duration::from_micros(u64::try_from(stale_us).unwrap_or(0)),
        next_attempt_at: row.try_get("next_attempt_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        error_class: row.try_get("error_class")?,
        error_message: row.try_get("error_message")?,
        zone: row.try_get("zone")?,
        wall_time: row.try_get("wall_time")?,
        business_date: row.try_get("business_date")?,
        trigger: parse_trigger(&trigger)?,
        fingerprint: u64::from_ne_bytes(fingerprint.to_ne_bytes()),
        attempts: Vec::new(),
    })
}
