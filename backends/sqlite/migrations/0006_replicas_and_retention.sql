-- The replica registry, and what history retention reads.
--
-- One row per scheduler process, refreshed on its recovery cadence and deleted on a graceful
-- shutdown; a row whose heartbeat_at + gone_after_ms is before the host clock is a process gone.
-- Instants are INTEGER Unix milliseconds, UTC, as in 0001. `roles` is comma-separated, `jobs`
-- newline-separated (names never hold a control character).
CREATE TABLE slotguard_replicas (
    replica_id    TEXT    PRIMARY KEY,
    host          TEXT    NOT NULL,
    pid           INTEGER NOT NULL CHECK (pid >= 0),
    version       TEXT    NOT NULL,
    roles         TEXT    NOT NULL,
    jobs          TEXT    NOT NULL,
    runs_held     INTEGER NOT NULL CHECK (runs_held >= 0),
    gone_after_ms INTEGER NOT NULL CHECK (gone_after_ms >= 0),
    started_at    INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL
) STRICT;

-- Pruning finds a job's finished runs oldest finished first.
CREATE INDEX slotguard_job_runs_finished
    ON slotguard_job_runs (job_name, finished_at)
    WHERE status IN ('succeeded', 'failed', 'dead', 'skipped', 'abandoned');

-- And deletes the audit records of the runs it prunes.
CREATE INDEX slotguard_job_run_audit_run
    ON slotguard_job_run_audit (run_id)
    WHERE run_id IS NOT NULL;

-- Rows skipped before this version were written without finished_at: their last change is when
-- they were skipped, so that they age like the others.
UPDATE slotguard_job_runs SET finished_at = updated_at
WHERE finished_at IS NULL AND status IN ('succeeded', 'failed', 'dead', 'skipped', 'abandoned');
