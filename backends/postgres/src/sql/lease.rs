//! Lock leases ([`PgLeaseLocks`](crate::PgLeaseLocks)): rows with an expiry, for processes that
//! reach the database through a transaction-mode pooler. Each runs in a transaction of its own,
//! unprepared, so that a pooler keeps it on one server connection.

/// Takes keys `$1` for owner `$2` for `$3` microseconds: a key that is free, or whose lease expired
/// by the database clock, gets a new fencing token from the backend's sequence (so a lease token
/// never repeats a slot token, nor its own). A live lease, this owner's included, is left alone.
/// Answers the keys taken, with their tokens.
pub(crate) const TAKE: &str = "
INSERT INTO {schema}.lease_locks AS l (lock_key, owner, token, acquired_at, renewed_at, expires_at)
SELECT k, $2, nextval('{schema}.fencing_tokens'), {now}, {now},
       {now} + $3 * interval '1 microsecond'
FROM unnest($1::bigint[]) AS u(k)
ORDER BY k
ON CONFLICT (lock_key) DO UPDATE SET
    owner = excluded.owner,
    token = excluded.token,
    acquired_at = excluded.acquired_at,
    renewed_at = excluded.renewed_at,
    expires_at = excluded.expires_at
WHERE l.expires_at <= excluded.acquired_at
RETURNING lock_key, token
";

/// Renews the leases with tokens `$1` for `$2` microseconds from now. A lease is named by its
/// token, which changes whenever another owner takes the key: a lapsed-and-taken lease is not
/// renewed, and is missing from the answer.
pub(crate) const RENEW: &str = "
UPDATE {schema}.lease_locks
SET renewed_at = {now}, expires_at = {now} + $2 * interval '1 microsecond'
WHERE token = ANY($1) AND expires_at > {now}
RETURNING token
";

/// Releases the leases with tokens `$1` (only the very grants this process holds).
pub(crate) const RELEASE: &str = "
DELETE FROM {schema}.lease_locks WHERE token = ANY($1)
RETURNING token
";
