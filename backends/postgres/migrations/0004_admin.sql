-- What operators read and change: the jobs schedulers registered (with their pause state), the audit
-- trail of every change, and the index that lists runs across jobs newest first.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

-- One row per job a scheduler registered; refreshed (`seen_at`) on every registration. The pause
-- state belongs to operators: registration never changes it.
CREATE TABLE {schema}.jobs (
    job_name             text        PRIMARY KEY,
    cron                 text        NOT NULL,
    zone                 text        NOT NULL,
    -- The DST policy's name (`vixie`, `skip`, `shift`, `instant`).
    dst                  text        NOT NULL,
    -- The guard level's name (`none`, `local`, `lock`, `slot`).
    guard                text        NOT NULL,
    -- The schedule's u64 fingerprint, bit for bit like job_runs (values above i64::MAX read as negative).
    schedule_fingerprint bigint      NOT NULL,
    paused               boolean     NOT NULL DEFAULT false,
    paused_by            text,
    paused_reason        text,
    paused_at            timestamptz,
    registered_at        timestamptz NOT NULL DEFAULT now(),
    seen_at              timestamptz NOT NULL DEFAULT now()
);

-- Who changed what, and why; written in the same statement or transaction as the change. No foreign
-- key to job_runs: the trail outlives the rows it names.
CREATE TABLE {schema}.job_run_audit (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_name     text        NOT NULL,
    run_id       bigint,
    scheduled_at timestamptz,
    action       text        NOT NULL,
    actor        text        NOT NULL,
    reason       text        NOT NULL,
    at           timestamptz NOT NULL DEFAULT now()
);
-- The trail of one job, newest first.
CREATE INDEX job_run_audit_job_idx ON {schema}.job_run_audit (job_name, id);

-- Listing runs of every job newest first (`ORDER BY scheduled_at DESC, id DESC LIMIT n`). Listings
-- of one job, its slot instants and its latest slot use the UNIQUE (job_name, scheduled_at,
-- partition_key) key.
CREATE INDEX job_runs_scheduled_idx ON {schema}.job_runs (scheduled_at, id);
