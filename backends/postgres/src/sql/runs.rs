//! Reads of the run history: runs with their attempts, and the slot instants catch-up and backfill
//! look at.

/// Every run (of job `$1`, when not NULL) with its attempts.
pub(crate) const RUNS: &str = r#"
SELECT r.id, r.job_name, r.scheduled_at, r.partition_key, r.status, r.attempt, r.owner,
       r.fencing_token, r.heartbeat_at, (extract(epoch FROM r.stale_after) * 1000000)::bigint AS stale_after_us,
       r.next_attempt_at, r.created_at, r.updated_at, r.started_at, r.finished_at, r.error_class,
       r.error_message, r.zone, r.wall_time, r.business_date, r."trigger", r.schedule_fingerprint,
       r.nominal_dates, r.calendar_name, r.calendar_version,
       a.attempt AS a_attempt, a.owner AS a_owner, a.fencing_token AS a_token,
       a.started_at AS a_started_at, a.finished_at AS a_finished_at, a.status AS a_status,
       a.message AS a_message
FROM {schema}.job_runs r
LEFT JOIN {schema}.job_run_attempts a
       ON a.run_id = r.id AND (a.scheduled_at = r.scheduled_at OR a.scheduled_at IS NULL)
WHERE $1::text IS NULL OR r.job_name = $1
ORDER BY r.job_name, r.scheduled_at, r.partition_key, a.attempt
"#;

/// The columns of the runs of a CTE `page` (as `r`), each joined with its attempts (as `a`).
macro_rules! runs_with_attempts {
    () => {
        r#"SELECT r.id, r.job_name, r.scheduled_at, r.partition_key, r.status, r.attempt, r.owner,
       r.fencing_token, r.heartbeat_at, (extract(epoch FROM r.stale_after) * 1000000)::bigint AS stale_after_us,
       r.next_attempt_at, r.created_at, r.updated_at, r.started_at, r.finished_at, r.error_class,
       r.error_message, r.zone, r.wall_time, r.business_date, r."trigger", r.schedule_fingerprint,
       r.nominal_dates, r.calendar_name, r.calendar_version,
       a.attempt AS a_attempt, a.owner AS a_owner, a.fencing_token AS a_token,
       a.started_at AS a_started_at, a.finished_at AS a_finished_at, a.status AS a_status,
       a.message AS a_message
FROM page r
LEFT JOIN LATERAL (
    -- The attempts of one run at a time (`OFFSET 0` keeps the planner from joining the page to
    -- every attempt at once, which a partitioned history would read whole).
    SELECT * FROM {schema}.job_run_attempts a
    WHERE a.run_id = r.id AND (a.scheduled_at = r.scheduled_at OR a.scheduled_at IS NULL)
    OFFSET 0
) a ON true
"#
    };
}

/// The runs matching a filter, newest slot first, with their attempts: `$1` job, `$2` status, `$3`
/// partition, `$4` from (inclusive), `$5` to (exclusive), each ignored when NULL; `$6` limit.
///
/// The limit applies to runs (in `page`), not to the joined attempt rows.
pub(crate) const LIST_RUNS: &str = concat!(
    r#"
WITH page AS (
    SELECT *
    FROM {schema}.job_runs
    WHERE ($1::text IS NULL OR job_name = $1)
      AND ($2::text IS NULL OR status COLLATE "C" = $2)
      AND ($3::text IS NULL OR partition_key = $3)
      AND ($4::timestamptz IS NULL OR scheduled_at >= $4)
      AND ($5::timestamptz IS NULL OR scheduled_at < $5)
    ORDER BY scheduled_at DESC, id DESC
    LIMIT $6
)
"#,
    runs_with_attempts!(),
    "ORDER BY r.scheduled_at DESC, r.id DESC, a.attempt\n"
);

/// The newest run (by slot) of each job in `$1`, with its attempts: one index probe per job.
pub(crate) const LATEST_RUNS: &str = concat!(
    r#"
WITH page AS (
    SELECT newest.*
    FROM unnest($1::text[]) AS j(job_name)
    CROSS JOIN LATERAL (
        SELECT *
        FROM {schema}.job_runs x
        WHERE x.job_name = j.job_name
        ORDER BY x.scheduled_at DESC, x.id DESC
        LIMIT 1
    ) AS newest
)
"#,
    runs_with_attempts!(),
    "ORDER BY r.id, a.attempt\n"
);

/// The distinct slot instants of job `$1` in `[$2, $3)`, ascending.
pub(crate) const SLOT_TIMES: &str = "
SELECT DISTINCT scheduled_at
FROM {schema}.job_runs
WHERE job_name = $1 AND scheduled_at >= $2 AND scheduled_at < $3
ORDER BY scheduled_at
";

/// For each job in `$1`, in order, the slot instants of its rows in `[$2, $3)` as one ascending
/// array: a range of the `(job_name, scheduled_at, partition_key)` key per job, one round trip for
/// every job. An instant with several partitions comes once per partition: the caller removes the
/// repeats, which costs less there than a `DISTINCT` here (40 against 70 ms for 288,000 rows).
pub(crate) const SLOT_TIMES_OF: &str = "
SELECT ARRAY(SELECT r.scheduled_at
             FROM {schema}.job_runs r
             WHERE r.job_name = j.job_name AND r.scheduled_at >= $2 AND r.scheduled_at < $3
             ORDER BY r.scheduled_at) AS times
FROM unnest($1::text[]) WITH ORDINALITY AS j(job_name, ord)
ORDER BY j.ord
";

/// For each job in `$1`, in order, the latest slot instant among its rows not triggered by hand
/// (NULL when it has none).
/// Per job: runs `running`, `pending`, and `failed`/`dead`/`abandoned` with a slot at or after `$1`.
/// Each branch is answered from the `(status COLLATE "C", scheduled_at DESC, id DESC)` index, which
/// only a status named in the "C" collation can use (migration 20).
pub(crate) const RUN_COUNTS: &str = r#"
SELECT job_name,
       count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status = 'pending') AS queued,
       count(*) FILTER (WHERE status IN ('failed', 'dead', 'abandoned')) AS failed
FROM {schema}.job_runs
WHERE status COLLATE "C" IN ('running', 'pending')
   OR (status COLLATE "C" IN ('failed', 'dead', 'abandoned') AND scheduled_at >= $1)
GROUP BY job_name
ORDER BY job_name
"#;

pub(crate) const LATEST_SLOTS: &str = r#"
SELECT (SELECT max(r.scheduled_at)
        FROM {schema}.job_runs r
        WHERE r.job_name = j.job_name AND r."trigger" <> 'manual') AS latest
FROM unnest($1::text[]) WITH ORDINALITY AS j(job_name, ord)
ORDER BY j.ord
"#;
