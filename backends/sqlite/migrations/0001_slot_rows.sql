-- Slot rows: one row per (job, slot, partition), one row per attempt, and the fencing-token counter.
--
-- Every instant is an INTEGER of Unix milliseconds, UTC: integers compare exactly, staleness needs
-- sub-second precision (thresholds can be a second), and the store's clock is read in SQL as
-- CAST(ROUND(unixepoch('now', 'subsec') * 1000) AS INTEGER). Durations are INTEGER milliseconds
-- (columns ending in _ms). STRICT tables refuse values of the wrong type, so a text instant can never
-- be compared with an integer one.

CREATE TABLE slotguard_job_runs (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    job_name             TEXT    NOT NULL,
    scheduled_at         INTEGER NOT NULL,
    partition_key        TEXT    NOT NULL DEFAULT '',
    status               TEXT    NOT NULL CHECK (status IN
                             ('pending', 'running', 'succeeded', 'failed', 'abandoned', 'skipped', 'dead')),
    attempt              INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    owner                TEXT,
    fencing_token        INTEGER,
    heartbeat_at         INTEGER,
    stale_after_ms       INTEGER NOT NULL CHECK (stale_after_ms >= 0),
    next_attempt_at      INTEGER,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
    started_at           INTEGER,
    finished_at          INTEGER,
    error_class          TEXT    CHECK (error_class IN ('transient', 'permanent')),
    error_message        TEXT,
    -- The schedule's IANA zone, the wall-clock time it names (ISO 8601 without offset) and the slot's
    -- business date (YYYY-MM-DD, which sorts as dates do).
    zone                 TEXT    NOT NULL,
    wall_time            TEXT    NOT NULL,
    business_date        TEXT    NOT NULL,
    -- `trigger` is an SQLite keyword, hence the suffix.
    trigger_kind         TEXT    NOT NULL CHECK (trigger_kind IN ('schedule', 'catch_up', 'manual', 'backfill')),
    -- The u64 fingerprint's bits, stored as a signed 64-bit integer.
    schedule_fingerprint INTEGER NOT NULL,
    UNIQUE (job_name, scheduled_at, partition_key),
    CHECK (status <> 'running'
           OR (owner IS NOT NULL AND fencing_token IS NOT NULL AND heartbeat_at IS NOT NULL))
) STRICT;

-- Heartbeats and fenced writes find a run by its token; tokens are never reused.
CREATE UNIQUE INDEX slotguard_job_runs_token ON slotguard_job_runs (fencing_token);
CREATE INDEX slotguard_job_runs_status ON slotguard_job_runs (status, next_attempt_at);

CREATE TABLE slotguard_job_run_attempts (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        INTEGER NOT NULL REFERENCES slotguard_job_runs (id) ON DELETE CASCADE,
    attempt       INTEGER NOT NULL CHECK (attempt >= 1),
    owner         TEXT    NOT NULL,
    fencing_token INTEGER NOT NULL,
    status        TEXT    NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'abandoned')),
    started_at    INTEGER NOT NULL,
    finished_at   INTEGER,
    error_class   TEXT    CHECK (error_class IN ('transient', 'permanent')),
    error_message TEXT,
    UNIQUE (run_id, attempt)
) STRICT;

-- One row: the last fencing token handed out, for slot claims and lease locks alike, so tokens rise
-- across the whole file.
CREATE TABLE slotguard_fencing (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    last_token INTEGER NOT NULL CHECK (last_token >= 0)
) STRICT;

INSERT INTO slotguard_fencing (id, last_token) VALUES (1, 0);
