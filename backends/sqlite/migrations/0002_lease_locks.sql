-- Lease locks: one row per held key. A row whose expires_at (Unix milliseconds, by the host clock
-- read in SQL) has passed is free for the next owner, who takes it with a new fencing token; the
-- holder renews its rows well before that.

CREATE TABLE slotguard_locks (
    lock_key    INTEGER PRIMARY KEY,
    owner       TEXT    NOT NULL,
    token       INTEGER NOT NULL UNIQUE,
    acquired_at INTEGER NOT NULL,
    renewed_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;
