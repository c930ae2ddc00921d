-- Schedules kept as data: one row per version of a stored schedule, appended by an operator's
-- change and never rewritten (`ScheduleStore`).
--
-- `seq` orders every change in the file: writes are `BEGIN IMMEDIATE` transactions, so the order of
-- their rowids is the order of their commits, and AUTOINCREMENT never hands one out again. A
-- version that removes the schedule has `removed = 1` and no spec (every spec column NULL); any
-- other has all of the spec's required columns. Instants are INTEGER Unix milliseconds, UTC, by
-- the host clock read in SQL, as in 0001.
CREATE TABLE slotguard_job_schedules (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    schedule_id    TEXT    NOT NULL,
    version        INTEGER NOT NULL CHECK (version >= 1),
    removed        INTEGER NOT NULL CHECK (removed IN (0, 1)),
    -- The spec: NULL when removed.
    job_name       TEXT,
    cron           TEXT,
    zone           TEXT,
    -- The DST policy's name (`vixie`, `skip`, `shift`, `instant`).
    dst            TEXT,
    partition_key  TEXT,
    start_at       INTEGER,
    end_at         INTEGER,
    remaining_runs INTEGER CHECK (remaining_runs >= 0),
    paused         INTEGER CHECK (paused IN (0, 1)),
    note           TEXT,
    -- Whether a run that fails for good pauses the schedule (with a note the system writes).
    pause_on_failure INTEGER CHECK (pause_on_failure IN (0, 1)),
    -- When the version takes effect, who wrote it, when (host clock) and why.
    effective_at   INTEGER NOT NULL,
    changed_by     TEXT    NOT NULL,
    changed_at     INTEGER NOT NULL,
    reason         TEXT    NOT NULL,
    UNIQUE (schedule_id, version),
    CHECK (CASE WHEN removed
                THEN job_name IS NULL AND cron IS NULL AND zone IS NULL AND dst IS NULL
                     AND partition_key IS NULL AND start_at IS NULL AND end_at IS NULL
                     AND remaining_runs IS NULL AND paused IS NULL AND note IS NULL
                     AND pause_on_failure IS NULL
                ELSE job_name IS NOT NULL AND cron IS NOT NULL AND zone IS NOT NULL
                     AND dst IS NOT NULL AND partition_key IS NOT NULL AND paused IS NOT NULL
                     AND pause_on_failure IS NOT NULL
           END)
) STRICT;

-- A job's schedules (the listing's filter); a schedule's versions use the UNIQUE index above.
CREATE INDEX slotguard_job_schedules_job ON slotguard_job_schedules (job_name, schedule_id);
