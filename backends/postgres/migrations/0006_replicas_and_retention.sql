-- The replica registry, and what history retention reads.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

-- One row per scheduler process, refreshed on its recovery cadence and deleted on a graceful
-- shutdown; a row whose heartbeat_at + gone_after is before now() (the database clock) is a process
-- gone. `roles` is comma-separated, `jobs` newline-separated (names never hold a control character).
CREATE TABLE {schema}.replicas (
    replica_id   text        PRIMARY KEY,
    host         text        NOT NULL,
    pid          bigint      NOT NULL CHECK (pid >= 0),
    version      text        NOT NULL,
    roles        text        NOT NULL,
    jobs         text        NOT NULL,
    runs_held    integer     NOT NULL CHECK (runs_held >= 0),
    gone_after   interval    NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- Pruning finds a job's finished runs oldest finished first.
CREATE INDEX job_runs_finished_idx ON {schema}.job_runs (job_name, finished_at)
    WHERE status IN ('succeeded', 'failed', 'dead', 'skipped', 'abandoned');

-- And deletes the audit records of the runs it prunes.
CREATE INDEX job_run_audit_run_idx ON {schema}.job_run_audit (run_id) WHERE run_id IS NOT NULL;

-- A finished row written without finished_at ages from its last change.
UPDATE {schema}.job_runs SET finished_at = updated_at
WHERE finished_at IS NULL AND status IN ('succeeded', 'failed', 'dead', 'skipped', 'abandoned');
