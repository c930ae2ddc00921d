//! The holder's fenced writes on its running attempt: heartbeats and how the attempt ended.

/// Refreshes the heartbeat of every attempt `$1` holds with a token in `$2`.
pub(crate) const HEARTBEAT: &str = "
UPDATE {schema}.job_runs
SET heartbeat_at = {now}
WHERE owner = $1 AND fencing_token = ANY($2) AND status = 'running'
RETURNING fencing_token
";

/// Records how an attempt ended on the run and on its attempt row, only while `$3` holds run `$1`
/// with token `$2`, the run is `running` and it is the run of slot (`$9`, `$10`, `$11`): a run id
/// and token handed out again by a database that went back in time never match another slot's
/// run. Answers how many run rows matched (0 or 1).
///
/// `$4` run status, `$5` attempt status, `$6` error class, `$7` message, `$8` microseconds until
/// the run is due again (`NULL`: not due; `next_attempt_at` is cleared).
pub(crate) const FINISH: &str = "
WITH run AS (
    UPDATE {schema}.job_runs
    SET status = $4,
        error_class = $6,
        error_message = $7,
        next_attempt_at = {now} + $8::bigint * interval '1 microsecond',
        finished_at = {now},
        updated_at = {now}
    WHERE id = $1 AND fencing_token = $2 AND owner = $3 AND status = 'running'
      AND job_name = $9 AND scheduled_at = $10 AND partition_key = $11
    RETURNING id, attempt, fencing_token, scheduled_at
),
attempt AS (
    UPDATE {schema}.job_run_attempts a
    SET status = $5, finished_at = {now}, message = $7
    FROM run
    WHERE a.run_id = run.id AND (a.scheduled_at = run.scheduled_at OR a.scheduled_at IS NULL)
      AND a.attempt = run.attempt AND a.fencing_token = run.fencing_token
    RETURNING a.id
)
SELECT (SELECT count(*) FROM run) AS runs
";

/// [`FINISH`] for many attempts of owner `$1` at once: run ids `$2`, tokens `$3`, run statuses `$4`,
/// attempt statuses `$5`, error classes `$6`, messages `$7`, microseconds until due again `$8`
/// (`NULL`: not due), and the slots' jobs `$9`, instants `$10` and partitions `$11`. Answers the
/// ids of the runs that matched.
///
/// The run ids find the rows; the status test is `running!` (`sql/mod.rs`), so that no index of
/// running runs can lead the join, however few running runs the statistics expect.
pub(crate) const FINISH_MANY: &str = concat!(
    "
WITH input AS (
    SELECT *
    FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
                $9::text[], $10::timestamptz[], $11::text[])
        AS i(id, token, status, attempt_status, class, message, retry_us, job, slot, part)
),
run AS (
    UPDATE {schema}.job_runs r
    SET status = i.status,
        error_class = i.class,
        error_message = i.message,
        next_attempt_at = {now} + i.retry_us * interval '1 microsecond',
        finished_at = {now},
        updated_at = {now}
    FROM input i
    WHERE r.id = i.id AND r.fencing_token = i.token AND r.owner = $1 AND ",
    running!("r"),
    "
      AND r.job_name = i.job AND r.scheduled_at = i.slot AND r.partition_key = i.part
    RETURNING r.id, r.attempt, r.fencing_token, r.scheduled_at, i.attempt_status, i.message
),
attempt AS (
    UPDATE {schema}.job_run_attempts a
    SET status = run.attempt_status, finished_at = {now}, message = run.message
    FROM run
    WHERE a.run_id = run.id AND (a.scheduled_at = run.scheduled_at OR a.scheduled_at IS NULL)
      AND a.attempt = run.attempt AND a.fencing_token = run.fencing_token
    RETURNING a.id
)
SELECT id FROM run
"
);
