//! The statements of the operators' reads and changes, and how a run listing's SQL is built from
//! the filter fields that are set.

use chrono::{DateTime, Utc};
use slotguard::store::RunFilter;

use crate::inspect::RUN_COLUMNS;

/// The most runs or audit records one read returns, whatever the caller asks.
pub(super) const MAX_LIST: usize = 10_000;

/// A job as a scheduler registers it: inserted, or its definition and `seen_at` refreshed with its
/// pause state and first registration kept.
pub(super) const REGISTER_JOB: &str = "
INSERT INTO slotguard_jobs (
    job_name, cron, zone, dst, guard, schedule_fingerprint, registered_at, seen_at, calendar)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8)
ON CONFLICT (job_name) DO UPDATE SET
    cron = excluded.cron,
    zone = excluded.zone,
    dst = excluded.dst,
    guard = excluded.guard,
    schedule_fingerprint = excluded.schedule_fingerprint,
    calendar = excluded.calendar,
    seen_at = excluded.seen_at";

pub(super) const JOBS: &str = "
SELECT job_name, cron, zone, dst, guard, schedule_fingerprint, calendar, paused, paused_by,
       paused_reason, paused_at, registered_at, seen_at
FROM slotguard_jobs
ORDER BY job_name";

pub(super) const SET_PAUSED: &str = "
UPDATE slotguard_jobs
SET paused = ?2,
    paused_by = CASE WHEN ?2 THEN ?3 ELSE paused_by END,
    paused_reason = CASE WHEN ?2 THEN ?4 ELSE paused_reason END,
    paused_at = CASE WHEN ?2 THEN ?5 ELSE paused_at END
WHERE job_name = ?1 AND paused <> ?2";

pub(super) const INSERT_AUDIT: &str = "
INSERT INTO slotguard_job_run_audit (job_name, run_id, scheduled_at, action, actor, reason, at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// The attempts of the runs whose ids are in the JSON array `?1`, each run's in order.
pub(super) const ATTEMPTS_OF: &str = "
FROM slotguard_job_run_attempts AS a
WHERE a.run_id IN (SELECT value FROM json_each(?1))
ORDER BY a.run_id, a.attempt";

pub(super) const SLOT_TIMES: &str = "
SELECT DISTINCT scheduled_at FROM slotguard_job_runs
WHERE job_name = ?1 AND scheduled_at >= ?2 AND scheduled_at < ?3
ORDER BY scheduled_at";

/// The catch-up watermark of a job: manual runs (any slot an operator picked) do not move it.
/// Per job: runs `running`, `pending`, and `failed`/`dead`/`abandoned` with a slot at or after `?1`.
pub(super) const RUN_COUNTS: &str = "
SELECT job_name,
       sum(status = 'running') AS running,
       sum(status = 'pending') AS queued,
       sum(status IN ('failed', 'dead', 'abandoned')) AS failed
FROM slotguard_job_runs
WHERE status IN ('running', 'pending')
   OR (status IN ('failed', 'dead', 'abandoned') AND scheduled_at >= ?1)
GROUP BY job_name
ORDER BY job_name";

pub(super) const LATEST_SLOT: &str = "
SELECT max(scheduled_at) FROM slotguard_job_runs
WHERE job_name = ?1 AND trigger_kind IN ('schedule', 'catch_up', 'backfill')";

/// A finished run due again now, its slot, attempts and message kept.
pub(super) const RETRY_RUN: &str = "
UPDATE slotguard_job_runs
SET status = 'pending', next_attempt_at = ?2, finished_at = NULL, updated_at = ?2
WHERE id = ?1";

/// An operator's run: `pending` with no attempt, due at `not_before`, with the next fencing token.
/// Nothing when the slot has a row.
pub(super) const ENQUEUE_RUN: &str = "
INSERT INTO slotguard_job_runs (
    job_name, scheduled_at, partition_key, status, attempt, fencing_token, stale_after_ms,
    next_attempt_at, created_at, updated_at, zone, wall_time, business_date, trigger_kind,
    schedule_fingerprint, nominal_dates, calendar_name, calendar_version)
VALUES (
    ?1, ?2, ?3, 'pending', 0, (SELECT last_token + 1 FROM slotguard_fencing WHERE id = 1), ?4,
    ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
RETURNING id, fencing_token";

/// cancel: the running attempt (if any) is abandoned with the cancellation message.
pub(super) const CANCEL_ATTEMPT: &str = "
UPDATE slotguard_job_run_attempts
SET status = 'abandoned', finished_at = ?2, error_message = ?3
WHERE run_id = ?1 AND status = 'running'";

/// cancel: the run fails for good; its holder's token no longer names a `running` row, so its
/// heartbeat drops the token and its outcome is refused.
pub(super) const CANCEL_RUN: &str = "
UPDATE slotguard_job_runs
SET status = 'failed', error_class = 'permanent', error_message = ?3, next_attempt_at = NULL,
    finished_at = ?2, updated_at = ?2
WHERE id = ?1";

pub(super) const AUDIT_COLUMNS: &str =
    "id, job_name, run_id, scheduled_at, action, actor, reason, at";

/// An instant as a bound of stored milliseconds, rounded up: for a whole-millisecond column `c`,
/// `c >= t` exactly when `c >= ceil_ms(t)`, and `c < t` exactly when `c < ceil_ms(t)`.
pub(super) fn ceil_ms(t: DateTime<Utc>) -> i64 {
    let floor = t.timestamp_millis();
    if t.timestamp_subsec_nanos().is_multiple_of(1_000_000) {
        floor
    } else {
        floor.saturating_add(1)
    }
}

/// A caller's limit, capped at [`MAX_LIST`].
pub(super) fn capped(limit: usize) -> i64 {
    // MAX_LIST fits an i64.
    limit.min(MAX_LIST) as i64
}

/// The SQL of a run listing: a condition per filter field that is set, numbered in the order
/// [`RunFilter`] lists them, then the limit. Built from which fields are set only; every value is
/// bound, and the planner sees exactly the conditions that apply.
pub(super) fn runs_sql(filter: &RunFilter) -> String {
    let fields = [
        ("r.job_name = ", filter.job.is_some()),
        ("r.status = ", filter.status.is_some()),
        ("r.partition_key = ", filter.partition.is_some()),
        ("r.scheduled_at >= ", filter.from.is_some()),
        ("r.scheduled_at < ", filter.to.is_some()),
    ];
    let mut conditions = Vec::new();
    for (condition, set) in fields {
        if set {
            conditions.push(format!("{condition}?{}", conditions.len() + 1));
        }
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    format!(
        "SELECT {RUN_COLUMNS}\nFROM slotguard_job_runs AS r\n{filter}\n\
         ORDER BY r.scheduled_at DESC, r.id DESC\nLIMIT ?{}",
        conditions.len() + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use slotguard::store::RunStatus;

    #[test]
    fn run_listing_numbers_only_the_set_fields() {
        let all = runs_sql(&RunFilter::default());
        assert!(!all.contains("WHERE"), "{all}");
        assert!(all.ends_with("LIMIT ?1"), "{all}");
        let some = runs_sql(&RunFilter {
            status: Some(RunStatus::Failed),
            to: Some(DateTime::UNIX_EPOCH),
            ..RunFilter::default()
        });
        assert!(
            some.contains("WHERE r.status = ?1 AND r.scheduled_at < ?2"),
            "{some}"
        );
        assert!(some.ends_with("LIMIT ?3"), "{some}");
    }

    #[test]
    fn bounds_round_up_to_the_millisecond() {
        let whole = DateTime::from_timestamp_millis(1_500).expect("instant");
        assert_eq!(ceil_ms(whole), 1_500);
        let between = whole + chrono::Duration::nanoseconds(1);
        assert_eq!(ceil_ms(between), 1_501);
        let before_epoch = DateTime::from_timestamp_millis(-1_500).expect("instant")
            + chrono::Duration::nanoseconds(1);
        assert_eq!(ceil_ms(before_epoch), -1_499);
    }
}
