-- Lock leases for processes that reach the database through a transaction-mode pooler
-- (`PgLeaseLocks`): a row per held key, with the fencing token it was granted with and an expiry
-- by the database clock. Session advisory locks cannot be held through such a pooler; a row can.
-- Nothing releases a lease when its holder dies but its expiry; nothing keeps it but renewal.
-- `{schema}` is replaced by the library's schema (a validated, quoted identifier) before this runs.

CREATE TABLE {schema}.lease_locks (
    lock_key    bigint      PRIMARY KEY,
    owner       text        NOT NULL,
    token       bigint      NOT NULL UNIQUE,
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
