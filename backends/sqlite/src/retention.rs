//! [`RetentionStore`] for SQLite: one `BEGIN IMMEDIATE` transaction per batch finds the runs, then
//! deletes their attempts, audit records and rows (the checkpoint is a column of the row).

use async_trait::async_trait;
use slotguard::store::{PruneSpec, Pruned, RetentionStore, StoreError};

use crate::error::SqliteError;
use crate::{Shared, SqliteBackend, duration_ms, json_array};

/// Up to `?3` finished runs of job `?1` that finished before `?2`, oldest finished first; never one
/// that may run again, nor the job's newest scheduled slot (catch-up's watermark).
const DOOMED: &str = "
SELECT id FROM slotguard_job_runs
WHERE job_name = ?1
  AND status IN ('succeeded', 'failed', 'dead', 'skipped', 'abandoned')
  AND (status <> 'abandoned' OR next_attempt_at IS NULL)
  AND finished_at < ?2
  AND (trigger_kind = 'manual' OR scheduled_at < (
      SELECT max(m.scheduled_at) FROM slotguard_job_runs m
      WHERE m.job_name = ?1 AND m.trigger_kind IN ('schedule', 'catch_up', 'backfill')))
ORDER BY finished_at
LIMIT ?3";

const DELETE_ATTEMPTS: &str =
    "DELETE FROM slotguard_job_run_attempts WHERE run_id IN (SELECT value FROM json_each(?1))";
const DELETE_AUDIT: &str =
    "DELETE FROM slotguard_job_run_audit WHERE run_id IN (SELECT value FROM json_each(?1))";
const DELETE_RUNS: &str =
    "DELETE FROM slotguard_job_runs WHERE id IN (SELECT value FROM json_each(?1))";

impl Shared {
    async fn prune(&self, specs: &[PruneSpec], limit: usize) -> Result<Vec<Pruned>, SqliteError> {
        let q = |e| self.query_error(e);
        let mut tx = self.write().await?;
        let now = self.now(&mut tx).await?;
        let mut left = limit;
        let mut pruned = Vec::new();
        for spec in specs {
            if left == 0 {
                break;
            }
            let cutoff = now.saturating_sub(duration_ms(spec.keep));
            let ids: Vec<i64> = sqlx::query_scalar(DOOMED)
                .bind(&spec.job)
                .bind(cutoff)
                .bind(i64::try_from(left).unwrap_or(i64::MAX))
                .fetch_all(&mut *tx.tx)
                .await
                .map_err(q)?;
            if ids.is_empty() {
                continue;
            }
            let ids_json = json_array(ids.iter().copied());
            for statement in [DELETE_ATTEMPTS, DELETE_AUDIT, DELETE_RUNS] {
                sqlx::query(statement)
                    .bind(&ids_json)
                    .execute(&mut *tx.tx)
                    .await
                    .map_err(q)?;
            }
            left -= ids.len();
            pruned.push(Pruned {
                job: spec.job.clone(),
                runs: ids.len() as u64,
            });
        }
        tx.tx.commit().await.map_err(q)?;
        Ok(pruned)
    }
}

/// One transaction per call, so a batch is deleted whole or not at all.
#[async_trait]
impl RetentionStore for SqliteBackend {
    async fn prune_runs(
        &self,
        specs: &[PruneSpec],
        limit: usize,
    ) -> Result<Vec<Pruned>, StoreError> {
        if specs.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        Ok(self.shared().prune(specs, limit).await?)
    }
}
