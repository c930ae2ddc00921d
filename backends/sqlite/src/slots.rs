//! Slot rows: claim, heartbeat and finish, every write conditional on the fencing token.

use async_trait::async_trait;
use slotguard::store::{Claim, ClaimRequest, Lease, SlotStore, StoreError};
use slotguard::{ErrorClass, RunOutcome};

use crate::error::SqliteError;
use crate::inspect::parse_status;
use crate::{Shared, SqliteBackend, duration_ms, json_array, now_ms};

/// A new slot: attempt 1, running, with the next fencing token. Nothing when the row exists.
const INSERT_RUN: &str = "
INSERT INTO slotguard_job_runs (
    job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
    stale_after_ms, created_at, updated_at, started_at, zone, wall_time, business_date, trigger_kind,
    schedule_fingerprint)
VALUES (
    ?1, ?2, ?3, 'running', 1, ?4, (SELECT last_token + 1 FROM slotguard_fencing WHERE id = 1), ?5,
    ?6, ?5, ?5, ?5, ?7, ?8, ?9, ?10, ?11)
ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING
RETURNING id, attempt, fencing_token";

/// An abandoned slot (running, heartbeat older than its own threshold by the store's clock): the next
/// attempt, with the next fencing token. Nothing when the row is not abandoned.
const RECLAIM_RUN: &str = "
UPDATE slotguard_job_runs
SET attempt = attempt + 1,
    owner = ?4,
    fencing_token = (SELECT last_token + 1 FROM slotguard_fencing WHERE id = 1),
    heartbeat_at = ?5,
    stale_after_ms = ?6,
    updated_at = ?5,
    started_at = ?5,
    finished_at = NULL,
    error_class = NULL,
    error_message = NULL
WHERE job_name = ?1 AND scheduled_at = ?2 AND partition_key = ?3
  AND status = 'running' AND heartbeat_at + stale_after_ms < ?5
RETURNING id, attempt, fencing_token";

const ABANDON_ATTEMPT: &str = "
UPDATE slotguard_job_run_attempts
SET status = 'abandoned', finished_at = ?3, error_message = 'heartbeat expired'
WHERE run_id = ?1 AND attempt = ?2 AND status = 'running'";

const INSERT_ATTEMPT: &str = "
INSERT INTO slotguard_job_run_attempts (run_id, attempt, owner, fencing_token, status, started_at)
VALUES (?1, ?2, ?3, ?4, 'running', ?5)";

/// Records a token as handed out. Runs in the same `BEGIN IMMEDIATE` transaction that read
/// `last_token + 1`, so no other writer can have moved the counter in between.
pub(crate) const ADVANCE_TOKEN: &str =
    "UPDATE slotguard_fencing SET last_token = max(last_token, ?1) WHERE id = 1";

const STATUS_OF: &str = "
SELECT id, status FROM slotguard_job_runs
WHERE job_name = ?1 AND scheduled_at = ?2 AND partition_key = ?3";

const HEARTBEAT: &str = concat!(
    "UPDATE slotguard_job_runs SET heartbeat_at = ",
    now_ms!(),
    ", updated_at = ",
    now_ms!(),
    " WHERE owner = ?1 AND status = 'running'",
    " AND fencing_token IN (SELECT value FROM json_each(?2))",
    " RETURNING fencing_token"
);

const FINISH_RUN: &str = concat!(
    "UPDATE slotguard_job_runs SET status = ?1, error_class = ?2, error_message = ?3, finished_at = ",
    now_ms!(),
    ", updated_at = ",
    now_ms!(),
    " WHERE id = ?4 AND fencing_token = ?5 AND owner = ?6 AND status = 'running'",
    " RETURNING attempt"
);

const FINISH_ATTEMPT: &str = concat!(
    "UPDATE slotguard_job_run_attempts SET status = ?1, error_class = ?2, error_message = ?3,",
    " finished_at = ",
    now_ms!(),
    " WHERE run_id = ?4 AND attempt = ?5 AND fencing_token = ?6"
);

impl Shared {
    async fn claim(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
    ) -> Result<Vec<Claim>, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let mut answers = Vec::with_capacity(requests.len());
        for request in requests {
            let key = &request.key;
            let scheduled_at = key.scheduled_at.timestamp_millis();
            let stale_after = duration_ms(request.stale_after);
            let inserted: Option<(i64, i64, i64)> = sqlx::query_as(INSERT_RUN)
                .bind(&key.job)
                .bind(scheduled_at)
                .bind(&key.partition)
                .bind(owner)
                .bind(now)
                .bind(stale_after)
                .bind(&request.zone)
                .bind(request.wall.format("%Y-%m-%dT%H:%M:%S%.f").to_string())
                .bind(request.business_date.format("%Y-%m-%d").to_string())
                .bind(request.trigger.as_str())
                // The fingerprint's bits, reinterpreted: SQLite integers are signed.
                .bind(request.fingerprint as i64)
                .fetch_optional(&mut *w.tx)
                .await
                .map_err(q)?;
            let won = match inserted {
                Some(row) => Some(row),
                None => sqlx::query_as(RECLAIM_RUN)
                    .bind(&key.job)
                    .bind(scheduled_at)
                    .bind(&key.partition)
                    .bind(owner)
                    .bind(now)
                    .bind(stale_after)
                    .fetch_optional(&mut *w.tx)
                    .await
                    .map_err(q)?,
            };
            let Some((run_id, attempt, token)) = won else {
                let (run_id, status): (i64, String) = sqlx::query_as(STATUS_OF)
                    .bind(&key.job)
                    .bind(scheduled_at)
                    .bind(&key.partition)
                    .fetch_one(&mut *w.tx)
                    .await
                    .map_err(q)?;
                let status = parse_status(&status).ok_or_else(|| SqliteError::Corrupt {
                    path: self.path.clone(),
                    run_id,
                    what: "status",
                    value: status,
                })?;
                answers.push(Claim::Taken { status });
                continue;
            };
            if attempt > 1 {
                sqlx::query(ABANDON_ATTEMPT)
                    .bind(run_id)
                    .bind(attempt - 1)
                    .bind(now)
                    .execute(&mut *w.tx)
                    .await
                    .map_err(q)?;
                tracing::info!(
                    event = "job_recovered",
                    job = %key.job,
                    slot = %key.scheduled_at,
                    partition = %key.partition,
                    run_id,
                    attempt,
                    owner,
                    token,
                    "claimed an abandoned slot: its heartbeat had expired"
                );
            }
            sqlx::query(ADVANCE_TOKEN)
                .bind(token)
                .execute(&mut *w.tx)
                .await
                .map_err(q)?;
            sqlx::query(INSERT_ATTEMPT)
                .bind(run_id)
                .bind(attempt)
                .bind(owner)
                .bind(token)
                .bind(now)
                .execute(&mut *w.tx)
                .await
                .map_err(q)?;
            let attempt = u32::try_from(attempt).map_err(|_| SqliteError::Corrupt {
                path: self.path.clone(),
                run_id,
                what: "attempt",
                value: attempt.to_string(),
            })?;
            answers.push(Claim::Won(Lease {
                run_id,
                attempt,
                token,
            }));
        }
        w.tx.commit().await.map_err(q)?;
        Ok(answers)
    }

    async fn heartbeat(&self, owner: &str, tokens: &[i64]) -> Result<Vec<i64>, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let refreshed: Vec<i64> = sqlx::query_scalar(HEARTBEAT)
            .bind(owner)
            .bind(json_array(tokens.iter().copied()))
            .fetch_all(&mut *w.tx)
            .await
            .map_err(q)?;
        w.tx.commit().await.map_err(q)?;
        // In the caller's order, once each.
        let mut held: Vec<i64> = Vec::with_capacity(refreshed.len());
        for token in tokens {
            if refreshed.contains(token) && !held.contains(token) {
                held.push(*token);
            }
        }
        Ok(held)
    }

    async fn finish(
        &self,
        owner: &str,
        lease: &Lease,
        outcome: &RunOutcome,
    ) -> Result<bool, SqliteError> {
        let q = |e| self.query_error(e);
        // The run's status, and the attempt's: a permanent failure makes the run `dead`, while the
        // attempt itself simply `failed`.
        let (run_status, attempt_status, class, message) = match outcome {
            RunOutcome::Succeeded => ("succeeded", "succeeded", None, None),
            RunOutcome::Failed { class, message } => {
                let (status, class) = match class {
                    ErrorClass::Permanent => ("dead", "permanent"),
                    ErrorClass::Transient => ("failed", "transient"),
                };
                (status, "failed", Some(class), Some(message.as_str()))
            }
            RunOutcome::Abandoned { reason } => {
                ("abandoned", "abandoned", None, Some(reason.as_str()))
            }
        };
        let mut w = self.write().await?;
        let attempt: Option<i64> = sqlx::query_scalar(FINISH_RUN)
            .bind(run_status)
            .bind(class)
            .bind(message)
            .bind(lease.run_id)
            .bind(lease.token)
            .bind(owner)
            .fetch_optional(&mut *w.tx)
            .await
            .map_err(q)?;
        let Some(attempt) = attempt else {
            w.tx.rollback().await.map_err(q)?;
            return Ok(false);
        };
        sqlx::query(FINISH_ATTEMPT)
            .bind(attempt_status)
            .bind(class)
            .bind(message)
            .bind(lease.run_id)
            .bind(attempt)
            .bind(lease.token)
            .execute(&mut *w.tx)
            .await
            .map_err(q)?;
        w.tx.commit().await.map_err(q)?;
        Ok(true)
    }
}

/// Claims run in one `BEGIN IMMEDIATE` transaction per batch; heartbeats are one statement for all
/// tokens; outcomes are written to the run and its attempt together, only under the current token.
///
/// # Cancel safety
///
/// Dropping a call's future before it completes rolls its transaction back: nothing is written.
#[async_trait]
impl SlotStore for SqliteBackend {
    async fn claim(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
    ) -> Result<Vec<Claim>, StoreError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.shared().claim(owner, requests).await?)
    }

    async fn heartbeat(&self, owner: &str, tokens: &[i64]) -> Result<Vec<i64>, StoreError> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.shared().heartbeat(owner, tokens).await?)
    }

    async fn finish(
        &self,
        owner: &str,
        lease: &Lease,
        outcome: &RunOutcome,
    ) -> Result<bool, StoreError> {
        Ok(self.shared().finish(owner, lease, outcome).await?)
    }
}
