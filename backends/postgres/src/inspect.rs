//! Rows as operators and tests read them: runs with their attempts, registered jobs, the audit
//! trail.

use std::str::FromStr;
use std::time::Duration;

use slotguard::store::{
    AttemptRecord, AuditEntry, AuditRecord, CalendarStamp, JobDefinition, JobRecord, RunRecord,
    RunStatus, SlotKey, Trigger,
};
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::error::PgError;

pub(crate) fn parse_status(value: &str) -> Result<RunStatus, PgError> {
    parse("status", value)
}

pub(crate) fn parse_trigger(value: &str) -> Result<Trigger, PgError> {
    parse("trigger", value)
}

/// A stored name of the store's vocabulary; any other value is [`PgError::UnexpectedValue`].
fn parse<T: FromStr>(column: &'static str, value: &str) -> Result<T, PgError> {
    value.parse().map_err(|_| PgError::UnexpectedValue {
        column,
        value: value.to_owned(),
    })
}

fn count(column: &'static str, value: i32) -> Result<u32, PgError> {
    u32::try_from(value).map_err(|_| PgError::UnexpectedValue {
        column,
        value: value.to_string(),
    })
}

/// Folds the rows of [`RUNS`](crate::sql::runs::RUNS) or [`LIST_RUNS`](crate::sql::runs::LIST_RUNS)
/// (one per attempt, the attempts of a run next to each other) into runs.
pub(crate) fn fold_runs(rows: Vec<PgRow>) -> Result<Vec<RunRecord>, PgError> {
    let mut runs: Vec<RunRecord> = Vec::new();
    for row in rows {
        let id: i64 = row.try_get("id")?;
        if runs.last().is_none_or(|r| r.id != id) {
            runs.push(run(&row)?);
        }
        let a_attempt: Option<i32> = row.try_get("a_attempt")?;
        if let (Some(attempt), Some(run)) = (a_attempt, runs.last_mut()) {
            let status: String = row.try_get("a_status")?;
            run.attempts.push(AttemptRecord {
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

fn run(row: &PgRow) -> Result<RunRecord, PgError> {
    let status: String = row.try_get("status")?;
    let trigger: String = row.try_get("trigger")?;
    let stale_us: i64 = row.try_get("stale_after_us")?;
    let fingerprint: i64 = row.try_get("schedule_fingerprint")?;
    Ok(RunRecord {
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
        fingerprint: fingerprint_from_db(fingerprint),
        calendar: CalendarStamp::from_columns(
            row.try_get::<Option<&str>, _>("nominal_dates")?,
            row.try_get("calendar_name")?,
            row.try_get("calendar_version")?,
        ),
        attempts: Vec::new(),
    })
}

/// A u64 fingerprint as the `bigint` column stores it, bit for bit.
pub(crate) fn fingerprint_to_db(fingerprint: u64) -> i64 {
    i64::from_ne_bytes(fingerprint.to_ne_bytes())
}

/// A `bigint` fingerprint column read back as the u64 it stores.
pub(crate) fn fingerprint_from_db(stored: i64) -> u64 {
    u64::from_ne_bytes(stored.to_ne_bytes())
}

/// A stored calendar column.
fn calendar_from_db(stored: Option<String>) -> Option<slotguard::CalendarDefinition> {
    stored.as_deref().map(slotguard::CalendarDefinition::read)
}

/// A row of [`JOBS`](crate::sql::jobs::JOBS).
pub(crate) fn job(row: &PgRow) -> Result<JobRecord, PgError> {
    let fingerprint: i64 = row.try_get("schedule_fingerprint")?;
    Ok(JobRecord {
        definition: JobDefinition {
            name: row.try_get("job_name")?,
            cron: row.try_get("cron")?,
            zone: row.try_get("zone")?,
            dst: row.try_get("dst")?,
            guard: row.try_get("guard")?,
            fingerprint: fingerprint_from_db(fingerprint),
            calendar: calendar_from_db(row.try_get("calendar")?),
        },
        paused: row.try_get("paused")?,
        paused_by: row.try_get("paused_by")?,
        paused_reason: row.try_get("paused_reason")?,
        paused_at: row.try_get("paused_at")?,
        registered_at: row.try_get("registered_at")?,
        seen_at: row.try_get("seen_at")?,
    })
}

/// A row of [`AUDIT_LOG`](crate::sql::admin::AUDIT_LOG).
pub(crate) fn audit(row: &PgRow) -> Result<AuditRecord, PgError> {
    Ok(AuditRecord {
        id: row.try_get("id")?,
        job: row.try_get("job_name")?,
        run_id: row.try_get("run_id")?,
        scheduled_at: row.try_get("scheduled_at")?,
        entry: AuditEntry {
            action: row.try_get("action")?,
            actor: row.try_get("actor")?,
            reason: row.try_get("reason")?,
        },
        at: row.try_get("at")?,
    })
}
