//! The lock-key registry: which job of which application owns a 64-bit key, registered by every
//! lock store of this backend ([`PgBackend`](crate::PgBackend)'s advisory locks and
//! [`PgLeaseLocks`](crate::PgLeaseLocks)' leases).

use sqlx::{PgPool, Row};

use crate::PgError;
use crate::sql::{Statements, sql};

/// Records that `namespace` uses each key for the job named with it, in one transaction; a key
/// registered to another job or namespace is [`PgError::LockKeyCollision`] and nothing is
/// registered. `persistent`: whether the statements may be prepared (not through a pooler).
pub(crate) async fn register(
    pool: &PgPool,
    st: &Statements,
    namespace: &str,
    keys: &[(i64, String)],
    persistent: bool,
) -> Result<(), PgError> {
    if keys.is_empty() {
        return Ok(());
    }
    let (lock_keys, jobs): (Vec<i64>, Vec<String>) = keys.iter().cloned().unzip();
    let mut tx = pool.begin().await?;
    sqlx::query(sql(&st.register_keys))
        .persistent(persistent)
        .bind(namespace)
        .bind(&lock_keys)
        .bind(&jobs)
        .execute(&mut *tx)
        .await?;
    // A new statement sees keys that concurrent registrations committed meanwhile.
    let rows = sqlx::query(sql(&st.registered_keys))
        .persistent(persistent)
        .bind(&lock_keys)
        .fetch_all(&mut *tx)
        .await?;
    let mut registered = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let key: i64 = row.try_get("lock_key")?;
        let ns: String = row.try_get("namespace")?;
        let job: String = row.try_get("job_name")?;
        registered.insert(key, (ns, job));
    }
    for (key, job) in keys {
        let Some((registered_namespace, registered_job)) = registered.remove(key) else {
            return Err(PgError::UnexpectedValue {
                column: "lock_keys.lock_key",
                value: format!("{key} missing after registration"),
            });
        };
        if registered_namespace != namespace || registered_job != *job {
            // Roll back now rather than on drop, so no transaction stays open holding locks.
            tx.rollback().await?;
            return Err(PgError::LockKeyCollision {
                key: *key,
                registered_namespace,
                registered_job,
                namespace: namespace.to_owned(),
                job: job.clone(),
            });
        }
    }
    sqlx::query(sql(&st.touch_keys))
        .persistent(persistent)
        .bind(&lock_keys)
        .bind(namespace)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}
