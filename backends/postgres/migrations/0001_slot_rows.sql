-- Slot rows: one row per (job, slot, partition), one row per attempt, and the fencing-token sequence.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

-- Rises on every claim and re-claim of any run; never reused.
CREATE SEQUENCE {schema}.fencing_tokens AS bigint START WITH 1;

CREATE TABLE {schema}.job_runs (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_name             text        NOT NULL,
    scheduled_at         timestamptz NOT NULL,
    -- Empty when the job is not partitioned, so that the UNIQUE constraint below also holds for it.
    partition_key        text        NOT NULL DEFAULT '',
    status               text        NOT NULL
        CONSTRAINT job_runs_status_check CHECK (status IN
            ('pending', 'running', 'succeeded', 'failed', 'abandoned', 'skipped', 'dead')),
    -- The number of the latest attempt (1 for the first).
    attempt              integer     NOT NULL DEFAULT 1 CHECK (attempt >= 0),
    owner                text,
    fencing_token        bigint      NOT NULL,
    heartbeat_at         timestamptz,
    -- A `running` row whose heartbeat_at + stale_after is before now() (the database clock) is abandoned.
    stale_after          interval    NOT NULL,
    next_attempt_at      timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    started_at           timestamptz,
    finished_at          timestamptz,
    error_class          text,
    error_message        text,
    zone                 text        NOT NULL,
    wall_time            timestamp   NOT NULL,
    business_date        date        NOT NULL,
    "trigger"            text        NOT NULL
        CONSTRAINT job_runs_trigger_check CHECK ("trigger" IN ('schedule', 'catch_up', 'manual', 'backfill')),
    -- The schedule's u64 fingerprint, bit for bit (values above i64::MAX read as negative).
    schedule_fingerprint bigint      NOT NULL,
    CONSTRAINT job_runs_slot_key UNIQUE (job_name, scheduled_at, partition_key)
);

-- Heartbeats and fenced writes find their row by token.
CREATE UNIQUE INDEX job_runs_fencing_token_key ON {schema}.job_runs (fencing_token);
-- Operators and recovery look for running rows by heartbeat age.
CREATE INDEX job_runs_running_heartbeat_idx ON {schema}.job_runs (heartbeat_at) WHERE status = 'running';

CREATE TABLE {schema}.job_run_attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id        bigint      NOT NULL REFERENCES {schema}.job_runs (id) ON DELETE CASCADE,
    attempt       integer     NOT NULL CHECK (attempt >= 1),
    owner         text        NOT NULL,
    fencing_token bigint      NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    status        text        NOT NULL
        CONSTRAINT job_run_attempts_status_check CHECK (status IN
            ('pending', 'running', 'succeeded', 'failed', 'abandoned', 'skipped', 'dead')),
    message       text,
    CONSTRAINT job_run_attempts_run_attempt_key UNIQUE (run_id, attempt)
);
