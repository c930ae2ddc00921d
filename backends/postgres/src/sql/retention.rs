//! Retention: the deletion of old finished runs with their audit records.

/// Deletes up to `$3` finished runs of the jobs in `$1`, each kept `$2` microseconds after it
/// finished (database clock), oldest finished first per job; answers runs deleted per job.
///
/// - `marks` is each job's newest `schedule`, `catch_up` or `backfill` slot, catch-up's watermark:
///   its rows are kept.
/// - `doomed` takes up to `$3` candidates per job from the partial `(job_name, finished_at)` index
///   (a backlog is never sorted whole), then the oldest `$3` of them.
/// - `gone` deletes them, repeating the status test: a run an operator retried after `doomed`
///   read it is re-checked on its new version (READ COMMITTED) and kept. `attempts` and `audit`
///   delete the attempts and audit records of the runs `gone` deleted, and of no other (the
///   attempts' foreign key would delete them too on a plain table; a partitioned one has none).
///   The slot time beside each id lets a partitioned table look in one partition only.
pub(crate) const PRUNE_RUNS: &str = r#"
WITH spec AS (
    SELECT s.job_name, s.keep_us
    FROM unnest($1::text[], $2::bigint[]) AS s(job_name, keep_us)
),
marks AS (
    SELECT s.job_name, s.keep_us,
           (SELECT max(m.scheduled_at) FROM {schema}.job_runs m
            WHERE m.job_name = s.job_name
              AND m."trigger" IN ('schedule', 'catch_up', 'backfill')) AS mark
    FROM spec s
),
doomed AS (
    SELECT c.id, c.scheduled_at, c.finished_at
    FROM marks k
    CROSS JOIN LATERAL (
        SELECT r.id, r.scheduled_at, r.finished_at
        FROM {schema}.job_runs r
        WHERE r.job_name = k.job_name
          AND r.status IN ('succeeded', 'failed', 'dead', 'skipped', 'abandoned')
          AND (r.status <> 'abandoned' OR r.next_attempt_at IS NULL)
          AND r.finished_at < {now} - k.keep_us * interval '1 microsecond'
          AND (r."trigger" = 'manual' OR r.scheduled_at < k.mark)
        ORDER BY r.finished_at
        LIMIT $3
    ) c
    ORDER BY c.finished_at
    LIMIT $3
),
gone AS (
    DELETE FROM {schema}.job_runs r
    USING doomed d
    WHERE r.id = d.id AND r.scheduled_at = d.scheduled_at
      AND r.status IN ('succeeded', 'failed', 'dead', 'skipped', 'abandoned')
      AND (r.status <> 'abandoned' OR r.next_attempt_at IS NULL)
    RETURNING r.id, r.job_name, r.scheduled_at
),
attempts AS (
    DELETE FROM {schema}.job_run_attempts a
    USING gone g
    WHERE a.run_id = g.id AND (a.scheduled_at = g.scheduled_at OR a.scheduled_at IS NULL)
),
audit AS (
    DELETE FROM {schema}.job_run_audit a
    USING gone g
    WHERE a.run_id = g.id
)
SELECT job_name, count(*)::bigint AS runs FROM gone GROUP BY job_name
"#;
