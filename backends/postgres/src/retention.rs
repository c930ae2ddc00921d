//! [`RetentionStore`] for PostgreSQL: one statement per batch deletes the runs with their audit
//! records and attempts, their checkpoints with the row; on a partitioned history, whole
//! partitions first (`partitions.rs`).

use async_trait::async_trait;
use slotguard::store::{PruneSpec, Pruned, RetentionStore, StoreError};
use sqlx::Row;

use crate::error::PgError;
use crate::sql::sql;
use crate::{PgBackend, micros};

/// One statement per call.
#[async_trait]
impl RetentionStore for PgBackend {
    async fn prune_runs(
        &self,
        specs: &[PruneSpec],
        limit: usize,
    ) -> Result<Vec<Pruned>, StoreError> {
        if specs.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let jobs: Vec<&str> = specs.iter().map(|s| s.job.as_str()).collect();
        let keep: Vec<i64> = specs.iter().map(|s| micros(s.keep)).collect();
        let rows = self
            .fetch_all(
                sqlx::query(sql(&self.inner.statements.prune_runs))
                    .bind(&jobs)
                    .bind(&keep)
                    .bind(i64::try_from(limit).unwrap_or(i64::MAX)),
            )
            .await
            .map_err(PgError::from)?;
        rows.iter()
            .map(|row| {
                let runs: i64 = row.try_get("runs")?;
                Ok(Pruned {
                    job: row.try_get("job_name")?,
                    runs: u64::try_from(runs).unwrap_or(0),
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(|e| StoreError::from(PgError::from(e)))
    }

    /// On a partitioned history, the partitions ahead and the drops (`partitions.rs`).
    async fn prune_partitions(&self, specs: &[PruneSpec]) -> Result<Vec<Pruned>, StoreError> {
        self.drop_partitions(specs)
            .await
            .map_err(|e| StoreError::from(PgError::from(e)))
    }
}
