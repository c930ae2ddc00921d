//! [`ReplicaStore`] for SQLite: one row per scheduler process, judged alive or gone by the host
//! clock read in SQL, like heartbeats of runs.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use slotguard::store::replicas::{jobs_from_text, jobs_to_text, roles_from_text, roles_to_text};
use slotguard::store::{ReplicaInfo, ReplicaRecord, ReplicaStore, StoreError};
use sqlx::sqlite::SqliteRow;

use crate::error::SqliteError;
use crate::inspect::Decoder;
use crate::{Shared, SqliteBackend, duration_ms, now_ms};

/// Inserts or replaces a replica's row; an existing row keeps its start.
const RECORD: &str = concat!(
    "INSERT INTO slotguard_replicas (replica_id, host, pid, version, roles, jobs, runs_held, \
     gone_after_ms, started_at, heartbeat_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ",
    now_ms!(),
    ", ",
    now_ms!(),
    ") ON CONFLICT (replica_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, \
     version = excluded.version, roles = excluded.roles, jobs = excluded.jobs, \
     runs_held = excluded.runs_held, gone_after_ms = excluded.gone_after_ms, \
     heartbeat_at = excluded.heartbeat_at"
);

const REMOVE: &str = "DELETE FROM slotguard_replicas WHERE replica_id = ?1";

const LIST: &str = concat!(
    "SELECT replica_id, host, pid, version, roles, jobs, runs_held, gone_after_ms, started_at, \
     heartbeat_at, heartbeat_at + gone_after_ms >= ",
    now_ms!(),
    " AS alive FROM slotguard_replicas ORDER BY replica_id"
);

/// Rows gone for longer than `?1` milliseconds past their own threshold.
const FORGET: &str = concat!(
    "DELETE FROM slotguard_replicas WHERE heartbeat_at + gone_after_ms + ?1 < ",
    now_ms!()
);

impl Shared {
    /// One statement in a write transaction of its own; the rows it changed.
    async fn write_one(
        &self,
        query: sqlx::query::Query<'_, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    ) -> Result<u64, SqliteError> {
        let q = |e| self.query_error(e);
        let mut tx = self.write().await?;
        let done = query.execute(&mut *tx.tx).await.map_err(q)?;
        tx.tx.commit().await.map_err(q)?;
        Ok(done.rows_affected())
    }

    fn replica(&self, row: &SqliteRow) -> Result<ReplicaRecord, SqliteError> {
        let decode = Decoder { shared: self };
        let id: String = decode.get(row, "replica_id")?;
        let table = "slotguard_replicas";
        let instant = |what: &'static str| -> Result<DateTime<Utc>, SqliteError> {
            let ms: i64 = decode.get(row, what)?;
            DateTime::from_timestamp_millis(ms)
                .ok_or_else(|| self.corrupt_record(table, &id, what, ms))
        };
        let count = |what: &'static str| -> Result<u64, SqliteError> {
            let n: i64 = decode.get(row, what)?;
            u64::try_from(n).map_err(|_| self.corrupt_record(table, &id, what, n))
        };
        let roles: String = decode.get(row, "roles")?;
        let jobs: String = decode.get(row, "jobs")?;
        let alive: bool = decode.get(row, "alive")?;
        Ok(ReplicaRecord {
            info: ReplicaInfo {
                id: id.clone(),
                host: decode.get(row, "host")?,
                pid: u32::try_from(count("pid")?).unwrap_or(u32::MAX),
                version: decode.get(row, "version")?,
                roles: roles_from_text(&roles),
                jobs: jobs_from_text(&jobs),
                runs_held: u32::try_from(count("runs_held")?).unwrap_or(u32::MAX),
                gone_after: Duration::from_millis(count("gone_after_ms")?),
            },
            started_at: instant("started_at")?,
            heartbeat_at: instant("heartbeat_at")?,
            alive,
        })
    }
}

#[async_trait]
impl ReplicaStore for SqliteBackend {
    async fn record_replica(&self, replica: &ReplicaInfo) -> Result<(), StoreError> {
        let query = sqlx::query(RECORD)
            .bind(&replica.id)
            .bind(&replica.host)
            .bind(i64::from(replica.pid))
            .bind(&replica.version)
            .bind(roles_to_text(&replica.roles))
            .bind(jobs_to_text(&replica.jobs))
            .bind(i64::from(replica.runs_held))
            .bind(duration_ms(replica.gone_after));
        self.shared().write_one(query).await?;
        Ok(())
    }

    async fn remove_replica(&self, id: &str) -> Result<bool, StoreError> {
        let removed = self
            .shared()
            .write_one(sqlx::query(REMOVE).bind(id))
            .await?;
        Ok(removed > 0)
    }

    async fn replicas(&self) -> Result<Vec<ReplicaRecord>, StoreError> {
        let shared = self.shared();
        let rows = sqlx::query(LIST)
            .fetch_all(&shared.pool)
            .await
            .map_err(|e| shared.query_error(e))?;
        Ok(rows
            .iter()
            .map(|row| shared.replica(row))
            .collect::<Result<Vec<_>, SqliteError>>()?)
    }

    async fn forget_replicas(&self, gone_for: Duration) -> Result<u64, StoreError> {
        let query = sqlx::query(FORGET).bind(duration_ms(gone_for));
        Ok(self.shared().write_one(query).await?)
    }
}
