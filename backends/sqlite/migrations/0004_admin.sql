-- What operators read and change: the jobs schedulers registered (with their pause state), and the
-- audit trail of every change an operator made.
--
-- Instants are INTEGER Unix milliseconds, UTC, by the host clock read in SQL, as in 0001. The job_runs
-- columns the admin reads need (next_attempt_at, created_at, updated_at, started_at, finished_at,
-- owner, heartbeat_at, stale_after_ms, schedule_fingerprint, attempt) exist since 0001.

CREATE TABLE slotguard_jobs (
    job_name             TEXT    PRIMARY KEY,
    -- The cron expression as written, the IANA zone, the DST policy's name and the guard level's name.
    cron                 TEXT    NOT NULL,
    zone                 TEXT    NOT NULL,
    dst                  TEXT    NOT NULL,
    guard                TEXT    NOT NULL,
    -- The u64 fingerprint's bits, stored as a signed 64-bit integer.
    schedule_fingerprint INTEGER NOT NULL,
    paused               INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    -- Who paused or resumed the job last, why, and when.
    paused_by            TEXT,
    paused_reason        TEXT,
    paused_at            INTEGER,
    -- When a scheduler first registered the job, and when one last did.
    registered_at        INTEGER NOT NULL,
    seen_at              INTEGER NOT NULL
) STRICT;

-- One row per change, never updated. Run-level changes name the run and its slot; job-level ones
-- (pause, resume) leave both NULL. No foreign key: the trail outlives pruned runs.
CREATE TABLE slotguard_job_run_audit (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    job_name     TEXT    NOT NULL,
    run_id       INTEGER,
    scheduled_at INTEGER,
    action       TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    at           INTEGER NOT NULL
) STRICT;

-- The trail of one job, newest first.
CREATE INDEX slotguard_job_run_audit_job ON slotguard_job_run_audit (job_name, id);

-- Run listings across jobs, newest slot first (ORDER BY scheduled_at DESC, id DESC: the index holds
-- the rowid). Listings of one job use the UNIQUE (job_name, scheduled_at, partition_key) index.
CREATE INDEX slotguard_job_runs_slot ON slotguard_job_runs (scheduled_at);
