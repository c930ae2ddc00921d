-- Running runs are found by job (or by key), not by a walk over every running run per slot.
-- Two indexes let the planner walk them all instead: `job_runs_running_heartbeat_idx`
-- (heartbeat_at, running rows only) and `job_runs_status_scheduled_idx` (led by the status). With
-- statistics that expect no running run, as they are when a storm starts (taken before it, with
-- plans cached by pooled connections), either looks free, and a claim's overlap check ("is a run
-- of this job going?") walked every running run once per slot: 1.5 s for one claim of a
-- 10,000-job storm, quadratic in the storm (docs/PERFORMANCE.md, `sql::by_key`).
--
-- - The heartbeat index goes: no statement orders or ranges running runs by their heartbeat
--   (staleness is `heartbeat_at + stale_after`, which it cannot serve), the one walk over every
--   running run (`EXPIRE_GONE`) takes `job_runs_running_job_idx`, and every heartbeat rewrote it.
-- - The status index names the status in the "C" collation: the dashboard's reads by status say
--   so and keep it; a test of `status = 'running'` in the database's collation cannot use it.
-- Building it reads the table once, under a lock that holds off writes meanwhile.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

DROP INDEX IF EXISTS {schema}.job_runs_running_heartbeat_idx;
DROP INDEX {schema}.job_runs_status_scheduled_idx;
CREATE INDEX job_runs_status_scheduled_idx
    ON {schema}.job_runs (status COLLATE "C", scheduled_at DESC, id DESC);
