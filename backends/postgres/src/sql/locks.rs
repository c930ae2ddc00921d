//! The registry of advisory-lock keys, and the ending of frozen holders' lock sessions.

/// Ends the sessions that hold the `bigint` advisory locks `$1` for jobs `$2` (same length) when the
/// session is another process's lock connection (its `application_name` ends with
/// ` (slotguard locks) <owner>`, the owner perhaps cut short; see `locks::session_name`) whose
/// runs of the job are `running` with an expired heartbeat, and no run of the job is fresh: a
/// frozen or cut-off holder. Answers the keys whose holder was ended.
pub(crate) const BREAK_STALE_LOCKS: &str = r#"
WITH holders AS MATERIALIZED (
    SELECT s.k, l.pid
    FROM unnest($1::bigint[], $2::text[]) AS s(k, job_name)
    JOIN pg_locks l
      ON l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
     AND ((l.classid::bigint << 32) | l.objid::bigint) = s.k
    JOIN pg_stat_activity a ON a.pid = l.pid
    CROSS JOIN LATERAL (
        SELECT substr(a.application_name,
                      strpos(a.application_name, ' (slotguard locks) ') + 19) AS owner
    ) named
    WHERE a.pid <> pg_backend_pid()
      AND strpos(a.application_name, ' (slotguard locks) ') > 0
      AND named.owner <> ''
      AND EXISTS (
          SELECT 1 FROM {schema}.job_runs r
          WHERE r.job_name = s.job_name AND r.status = 'running'
            AND r.heartbeat_at + r.stale_after < {now}
            -- The whole owner, unless PostgreSQL cut the name at its 63 bytes.
            AND (r.owner = named.owner
                 OR (octet_length(a.application_name) >= 63
                     AND starts_with(r.owner, named.owner))))
      AND NOT EXISTS (
          SELECT 1 FROM {schema}.job_runs r
          WHERE r.job_name = s.job_name AND r.status = 'running'
            AND r.heartbeat_at + r.stale_after >= {now})
)
SELECT k FROM holders WHERE pg_terminate_backend(pid)
"#;

/// Registers keys `$2` for jobs `$3` of namespace `$1`; a key already registered is left as it is.
pub(crate) const REGISTER_KEYS: &str = "
INSERT INTO {schema}.lock_keys (lock_key, namespace, job_name)
SELECT k, $1, j FROM unnest($2::bigint[], $3::text[]) AS r(k, j)
ORDER BY k
ON CONFLICT (lock_key) DO NOTHING
";

/// Who holds keys `$1` now (a separate statement, so that keys registered concurrently are seen).
pub(crate) const REGISTERED_KEYS: &str = "
SELECT lock_key, namespace, job_name FROM {schema}.lock_keys WHERE lock_key = ANY($1)
";

/// Marks keys `$1` of namespace `$2` as still in use.
pub(crate) const TOUCH_KEYS: &str = "
UPDATE {schema}.lock_keys SET seen_at = {now} WHERE lock_key = ANY($1) AND namespace = $2
";
