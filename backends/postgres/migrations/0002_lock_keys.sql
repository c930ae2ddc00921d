-- The advisory-lock key registry: which job of which application owns a 64-bit key, so that two
-- binaries sharing a database cannot silently take each other's locks.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

CREATE TABLE {schema}.lock_keys (
    lock_key      bigint      PRIMARY KEY,
    namespace     text        NOT NULL,
    job_name      text        NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    -- Refreshed on every registration, so that keys no binary claims any more can be found and removed.
    seen_at       timestamptz NOT NULL DEFAULT now()
);
