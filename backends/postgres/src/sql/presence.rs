//! Presence: how a backend says it is alive, and how the others find the runs of one that is gone.
//!
//! The keys are two-`int4` advisory locks of class `0x70726573` ("pres"): apart from the `bigint`
//! keys of the `lock` layer, the claim locks ("slot") and the token floor ("tokn"). The second half
//! is a backend's random presence key, which its claims write on every attempt they start.

/// The class of presence keys, as `pg_locks.classid` shows it.
pub(crate) const PRESENCE_CLASS: i32 = 0x7072_6573;

/// Takes presence key `$2` of class `$1` ([`PRESENCE_CLASS`]), shared (two backends that drew the
/// same key both hold it): held until the session ends.
pub(crate) const TAKE: &str = "SELECT pg_try_advisory_lock_shared($1, $2)";

/// Makes stale at once every `running` attempt whose backend is gone: its presence key is held by
/// no session of this database, and its heartbeat is older than half its stale threshold (a live
/// holder beats every third of it, so a backend whose presence session alone was cut, and which is
/// connecting it again, is not judged by it). Its heartbeat is set back by its threshold, so that
/// every rule that takes over a stale run applies from now, fenced as ever; the next attempt
/// writes a heartbeat of its own. A row already stale is left alone. Rows without a presence key
/// (claimed before migration 13) wait out their threshold.
///
/// Walks `job_runs_running_job_idx` (the `running` rows only) and reads `pg_locks` once.
pub(crate) const EXPIRE_GONE: &str = r#"
WITH present AS MATERIALIZED (
    SELECT l.objid
    FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
      AND l.classid = 1886545267::oid
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
UPDATE {schema}.job_runs j
SET heartbeat_at = j.heartbeat_at - j.stale_after, updated_at = {now}
WHERE j.status = 'running'
  AND j.presence IS NOT NULL
  AND j.heartbeat_at + j.stale_after / 2 < {now}
  AND j.heartbeat_at + j.stale_after >= {now}
  AND j.presence::oid NOT IN (SELECT p.objid FROM present p)
RETURNING j.job_name, j.scheduled_at, j.partition_key, j.owner, j.attempt, j.fencing_token
"#;

#[cfg(test)]
mod tests {
    /// `EXPIRE_GONE` spells the class as a literal: it must be the constant `TAKE` binds.
    #[test]
    fn the_class_is_pres() {
        assert_eq!(super::PRESENCE_CLASS, i32::from_be_bytes(*b"pres"));
        let literal = super::PRESENCE_CLASS.to_string();
        assert!(super::EXPIRE_GONE.contains(&format!("{literal}::oid")));
    }
}
