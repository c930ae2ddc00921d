//! The jobs schedulers register, and their pause state.

/// Registers job definitions, one array per field (`$1` names, `$2` cron expressions, `$3` zones,
/// `$4` DST policies, `$5` guard levels, `$6` fingerprints, `$7` calendars as
/// `CalendarDefinition::to_stored` writes them, or NULL), in one upsert.
///
/// A job named twice in one call keeps its last definition (`DISTINCT ON`, so that the upsert never
/// touches one row twice). An existing job gets the new definition and a fresh `seen_at`; its pause
/// state is left alone. Rows are written in name order, so concurrent registrations wait on each
/// other in one direction only.
pub(crate) const REGISTER_JOBS: &str = "
INSERT INTO {schema}.jobs AS j (job_name, cron, zone, dst, guard, schedule_fingerprint, calendar)
SELECT DISTINCT ON (d.job_name) d.job_name, d.cron, d.zone, d.dst, d.guard, d.fingerprint,
       d.calendar
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[])
     WITH ORDINALITY AS d(job_name, cron, zone, dst, guard, fingerprint, calendar, ord)
ORDER BY d.job_name, d.ord DESC
ON CONFLICT (job_name) DO UPDATE
SET cron = excluded.cron,
    zone = excluded.zone,
    dst = excluded.dst,
    guard = excluded.guard,
    schedule_fingerprint = excluded.schedule_fingerprint,
    calendar = excluded.calendar,
    seen_at = now()
";

/// Every registered job, by name (byte order, whatever the database's collation).
pub(crate) const JOBS: &str = r#"
SELECT job_name, cron, zone, dst, guard, schedule_fingerprint, calendar, paused, paused_by,
       paused_reason, paused_at, registered_at, seen_at
FROM {schema}.jobs
ORDER BY job_name COLLATE "C"
"#;

/// Pauses (`$2 = true`) or resumes job `$1` and writes the audit record (`$3` action, `$4` actor,
/// `$5` reason), in one statement. Answers how many jobs changed (0 or 1).
pub(crate) const SET_PAUSED: &str = "
WITH job AS (
    UPDATE {schema}.jobs
    SET paused = $2,
        paused_by = CASE WHEN $2 THEN $4 ELSE paused_by END,
        paused_reason = CASE WHEN $2 THEN $5 ELSE paused_reason END,
        paused_at = CASE WHEN $2 THEN now() ELSE paused_at END
    WHERE job_name = $1 AND paused IS DISTINCT FROM $2
    RETURNING job_name
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, action, actor, reason)
    SELECT job_name, $3, $4, $5 FROM job
)
SELECT count(*) FROM job
";
