//! Operators' commands on runs (retry, enqueue, cancel), each with its audit record, and the audit
//! trail.

/// Makes the finished run with key (`$1` job, `$2` slot, `$3` partition) `pending` and due now, and
/// writes the audit record (`$4` action, `$5` actor, `$6` reason), in one statement. Answers the
/// run's id, or no row when no run with that key is `failed`, `dead`, `abandoned` or `skipped`.
///
/// Of concurrent retries of one run, the first locks the row; the others wait for it to commit,
/// re-check the condition on the new version (now `pending`) and update nothing.
pub(crate) const RETRY: &str = "
WITH run AS (
    UPDATE {schema}.job_runs
    SET status = 'pending', next_attempt_at = now(), finished_at = NULL, updated_at = now()
    WHERE job_name = $1 AND scheduled_at = $2 AND partition_key = $3
      AND status IN ('failed', 'dead', 'abandoned', 'skipped')
    RETURNING id, job_name, scheduled_at
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
    SELECT job_name, id, scheduled_at, $4, $5, $6 FROM run
)
SELECT id FROM run
";

/// The status of the run with key (`$1` job, `$2` slot, `$3` partition), if there is one.
pub(crate) const RUN_STATUS: &str = "
SELECT status
FROM {schema}.job_runs
WHERE job_name = $1 AND scheduled_at = $2 AND partition_key = $3
";

/// Creates a `pending` run (attempt 0, no owner, due at its `not_before`) per request unless its
/// slot has a row, with one audit record per created run; one statement.
///
/// Parameters: `$1` not-before instants, then one array per request field as in
/// [`CLAIM`](super::claim::CLAIM) (`$2` job names to `$10` stale-after in microseconds), then `$11`
/// action, `$12` actor, `$13` reason, and per request `$14` nominal dates, `$15` calendar names,
/// `$16` calendar versions.
/// Answers one row per request, in order: the new run's id, or NULL.
///
/// Each request draws a token (the column is unique and not null; `claim_due` gives the run a new
/// one). A slot named twice in the batch is created once, for its first request. Rows are inserted
/// in slot-key order, as claims insert them, so the two cannot deadlock.
pub(crate) const ENQUEUE: &str = r#"
WITH req AS (
    SELECT r.*, nextval('{schema}.fencing_tokens') AS token
    FROM unnest($2::text[], $3::timestamptz[], $4::text[], $5::text[], $6::text[],
                $7::timestamp[], $8::date[], $9::bigint[], $10::bigint[], $1::timestamptz[],
                $14::text[], $15::text[], $16::text[])
         WITH ORDINALITY
         AS r(job_name, scheduled_at, partition_key, trigger_kind, zone, wall_time,
              business_date, fingerprint, stale_after_us, not_before, nominal_dates,
              calendar_name, calendar_version, ord)
),
first AS (
    SELECT DISTINCT ON (job_name, scheduled_at, partition_key) *
    FROM req
    ORDER BY job_name, scheduled_at, partition_key, ord
),
ins AS (
    INSERT INTO {schema}.job_runs AS j
        (job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
         stale_after, created_at, updated_at, next_attempt_at, zone, wall_time, business_date,
         "trigger", schedule_fingerprint, nominal_dates, calendar_name, calendar_version)
    SELECT job_name, scheduled_at, partition_key, 'pending', 0, NULL, token, NULL,
           stale_after_us * interval '1 microsecond', now(), now(), not_before, zone, wall_time,
           business_date, trigger_kind, fingerprint, nominal_dates, calendar_name,
           calendar_version
    FROM first
    ORDER BY job_name, scheduled_at, partition_key
    ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
    RETURNING j.id, j.job_name, j.scheduled_at, j.fencing_token
),
audit AS (
    INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
    SELECT i.job_name, i.id, i.scheduled_at, $11, $12, $13
    FROM ins i
    JOIN req r ON r.token = i.fencing_token
    ORDER BY r.ord
)
SELECT r.ord, i.id
FROM req r
LEFT JOIN ins i ON i.fencing_token = r.token
ORDER BY r.ord
"#;

/// Cancels the `running` or `pending` run with key (`$1` job, `$2` slot, `$3` partition): `failed`,
/// class `permanent`, message `$4`, no next attempt. Answers its id, or no row. The first statement
/// of the cancel transaction: it locks the row (waiting for a concurrent writer to commit and
/// re-checking the status on the new version).
///
/// The owner and token are kept: the holder's heartbeat and fenced writes demand `running`, so they
/// stop matching.
pub(crate) const CANCEL_RUN: &str = "
UPDATE {schema}.job_runs
SET status = 'failed',
    error_class = 'permanent',
    error_message = $4,
    next_attempt_at = NULL,
    finished_at = now(),
    updated_at = now()
WHERE job_name = $1 AND scheduled_at = $2 AND partition_key = $3
  AND status IN ('running', 'pending')
RETURNING id, job_name, scheduled_at
";

/// The second statement of the cancel transaction: records the running attempt of run `$1`
/// `abandoned` with message `$2`, and writes the audit record (`$3` job, `$4` slot, `$5` action,
/// `$6` actor, `$7` reason). A statement of its own so that it sees an attempt row committed by a
/// concurrent re-claim just before `CANCEL_RUN` locked the run.
pub(crate) const CANCEL_ATTEMPT: &str = "
WITH attempt AS (
    UPDATE {schema}.job_run_attempts
    SET status = 'abandoned', finished_at = now(), message = $2
    WHERE run_id = $1 AND status = 'running'
)
INSERT INTO {schema}.job_run_audit (job_name, run_id, scheduled_at, action, actor, reason)
VALUES ($3, $1, $4, $5, $6, $7)
";

/// The audit trail (of job `$1`, when not NULL), newest first, at most `$2` records, with ids below
/// `$3` when not NULL (the page after the record `$3`).
pub(crate) const AUDIT_LOG: &str = "
SELECT id, job_name, run_id, scheduled_at, action, actor, reason, at
FROM {schema}.job_run_audit
WHERE ($1::text IS NULL OR job_name = $1) AND ($3::bigint IS NULL OR id < $3)
ORDER BY id DESC
LIMIT $2
";
