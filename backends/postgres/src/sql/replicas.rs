//! The rows of the scheduler processes, judged alive or gone by the database clock.

/// Inserts or replaces the row of replica `$1`; an existing row keeps its start. `$8` is the
/// threshold in microseconds.
pub(crate) const RECORD_REPLICA: &str = "
INSERT INTO {schema}.replicas AS r
    (replica_id, host, pid, version, roles, jobs, runs_held, gone_after)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8 * interval '1 microsecond')
ON CONFLICT (replica_id) DO UPDATE
SET host = excluded.host,
    pid = excluded.pid,
    version = excluded.version,
    roles = excluded.roles,
    jobs = excluded.jobs,
    runs_held = excluded.runs_held,
    gone_after = excluded.gone_after,
    heartbeat_at = {now}
";

/// Deletes the row of replica `$1`.
pub(crate) const REMOVE_REPLICA: &str = "DELETE FROM {schema}.replicas WHERE replica_id = $1";

/// Every replica, by id in byte order, alive or gone by the database clock.
pub(crate) const REPLICAS: &str = r#"
SELECT replica_id, host, pid, version, roles, jobs, runs_held,
       (extract(epoch FROM gone_after) * 1000000)::bigint AS gone_after_us,
       started_at, heartbeat_at, heartbeat_at + gone_after >= {now} AS alive
FROM {schema}.replicas
ORDER BY replica_id COLLATE "C"
"#;

/// Rows gone for longer than `$1` microseconds past their own threshold.
pub(crate) const FORGET_REPLICAS: &str = "
DELETE FROM {schema}.replicas
WHERE heartbeat_at + gone_after + $1 * interval '1 microsecond' < {now}
";
