//! [`ReplicaStore`] for PostgreSQL: one row per scheduler process, judged alive or gone by the
//! database clock, like heartbeats of runs.

use std::time::Duration;

use async_trait::async_trait;
use slotguard::store::replicas::{jobs_from_text, jobs_to_text, roles_from_text, roles_to_text};
use slotguard::store::{ReplicaInfo, ReplicaRecord, ReplicaStore, StoreError};
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::error::PgError;
use crate::sql::sql;
use crate::{PgBackend, micros};

fn replica(row: &PgRow) -> Result<ReplicaRecord, PgError> {
    let unsigned = |column: &'static str, value: i64| {
        u64::try_from(value).map_err(|_| PgError::UnexpectedValue {
            column,
            value: value.to_string(),
        })
    };
    let pid: i64 = row.try_get("pid")?;
    let runs_held: i32 = row.try_get("runs_held")?;
    let gone_after_us: i64 = row.try_get("gone_after_us")?;
    let roles: String = row.try_get("roles")?;
    let jobs: String = row.try_get("jobs")?;
    Ok(ReplicaRecord {
        info: ReplicaInfo {
            id: row.try_get("replica_id")?,
            host: row.try_get("host")?,
            pid: u32::try_from(unsigned("replicas.pid", pid)?).unwrap_or(u32::MAX),
            version: row.try_get("version")?,
            roles: roles_from_text(&roles),
            jobs: jobs_from_text(&jobs),
            runs_held: u32::try_from(unsigned("replicas.runs_held", i64::from(runs_held))?)
                .unwrap_or(u32::MAX),
            gone_after: Duration::from_micros(unsigned("replicas.gone_after", gone_after_us)?),
        },
        started_at: row.try_get("started_at")?,
        heartbeat_at: row.try_get("heartbeat_at")?,
        alive: row.try_get("alive")?,
    })
}

#[async_trait]
impl ReplicaStore for PgBackend {
    async fn record_replica(&self, replica: &ReplicaInfo) -> Result<(), StoreError> {
        self.execute(
            sqlx::query(sql(&self.inner.statements.record_replica))
                .bind(&replica.id)
                .bind(&replica.host)
                .bind(i64::from(replica.pid))
                .bind(&replica.version)
                .bind(roles_to_text(&replica.roles))
                .bind(jobs_to_text(&replica.jobs))
                .bind(i32::try_from(replica.runs_held).unwrap_or(i32::MAX))
                .bind(micros(replica.gone_after)),
        )
        .await
        .map_err(PgError::from)?;
        Ok(())
    }

    async fn remove_replica(&self, id: &str) -> Result<bool, StoreError> {
        let done = self
            .execute(sqlx::query(sql(&self.inner.statements.remove_replica)).bind(id))
            .await
            .map_err(PgError::from)?;
        Ok(done > 0)
    }

    async fn replicas(&self) -> Result<Vec<ReplicaRecord>, StoreError> {
        let rows = self
            .fetch_all(sqlx::query(sql(&self.inner.statements.replicas)))
            .await
            .map_err(PgError::from)?;
        rows.iter()
            .map(replica)
            .collect::<Result<Vec<_>, PgError>>()
            .map_err(StoreError::from)
    }

    async fn forget_replicas(&self, gone_for: Duration) -> Result<u64, StoreError> {
        let done = self
            .execute(
                sqlx::query(sql(&self.inner.statements.forget_replicas)).bind(micros(gone_for)),
            )
            .await
            .map_err(PgError::from)?;
        Ok(done)
    }
}
