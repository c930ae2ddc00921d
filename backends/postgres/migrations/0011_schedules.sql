-- Schedules kept as data: one row per version of a stored schedule, appended by an operator's
-- change and never rewritten (`ScheduleStore`).
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.
--
-- `seq` orders every change in the schema: a write draws it after taking the schedules' advisory
-- lock and commits before releasing it, so the order of `seq` is the order of the commits. A version
-- that removes the schedule has `removed` and no spec (every spec column NULL); any other has all of
-- the spec's required columns. Ids compare byte by byte (`COLLATE "C"`), whatever the database's
-- collation, so that listings page the same way on every server.
CREATE TABLE {schema}.job_schedules (
    schedule_id    text COLLATE "C" NOT NULL,
    version        bigint      NOT NULL CHECK (version >= 1),
    seq            bigint      GENERATED ALWAYS AS IDENTITY,
    removed        boolean     NOT NULL,
    -- The spec: NULL when removed.
    job_name       text,
    cron           text,
    zone           text,
    -- The DST policy's name (`vixie`, `skip`, `shift`, `instant`).
    dst            text,
    partition_key  text,
    start_at       timestamptz,
    end_at         timestamptz,
    remaining_runs bigint CHECK (remaining_runs >= 0),
    paused         boolean,
    note           text,
    -- Whether a run that fails for good pauses the schedule (with a note the system writes).
    pause_on_failure boolean,
    -- When the version takes effect, who wrote it, when (the database clock) and why.
    effective_at   timestamptz NOT NULL,
    changed_by     text        NOT NULL,
    changed_at     timestamptz NOT NULL,
    reason         text        NOT NULL,
    CONSTRAINT job_schedules_pkey PRIMARY KEY (schedule_id, version),
    CONSTRAINT job_schedules_seq_key UNIQUE (seq),
    CONSTRAINT job_schedules_spec_check CHECK (CASE WHEN removed
        THEN job_name IS NULL AND cron IS NULL AND zone IS NULL AND dst IS NULL
             AND partition_key IS NULL AND start_at IS NULL AND end_at IS NULL
             AND remaining_runs IS NULL AND paused IS NULL AND note IS NULL
             AND pause_on_failure IS NULL
        ELSE job_name IS NOT NULL AND cron IS NOT NULL AND zone IS NOT NULL
             AND dst IS NOT NULL AND partition_key IS NOT NULL AND paused IS NOT NULL
             AND pause_on_failure IS NOT NULL
        END)
);

-- A job's schedules (the listing's filter); a schedule's versions use the primary key, the changes
-- after a `seq` its unique index.
CREATE INDEX job_schedules_job_idx ON {schema}.job_schedules (job_name, schedule_id);
