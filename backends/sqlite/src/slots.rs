//! Slot rows: due work's next instant, recorded skips, heartbeat and finish, every write about an
//! attempt conditional on its fencing token. Claims are in [`claims`](crate::claims).
//!
//! Every call that writes is one `BEGIN IMMEDIATE` transaction that reads the store's clock once (in
//! SQL) and binds that instant to each of its statements, so they all agree on "now".

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use slotguard::ErrorClass;
use slotguard::store::rules::{self, Mode};
use slotguard::store::{
    CheckpointStore, Claim, ClaimRequest, ClockStore, DueClaim, DueSpec, Finish, Lease, QueueStore,
    RunStatus, SlotKey, SlotStore, StoreError, not_due,
};

use crate::claims::{at, first_of_each_job};

use crate::error::SqliteError;
use crate::{Shared, SqliteBackend, duration_ms, json_array, now_ms};

/// The row of a slot, if any.
pub(crate) const STATUS_OF: &str = "
SELECT id, status FROM slotguard_job_runs
WHERE job_name = ?1 AND scheduled_at = ?2 AND partition_key = ?3";

/// The earliest `next_attempt_at` after `?1` of a `pending` run of the jobs bound from `?2` on, for
/// `count` jobs.
fn next_due_sql(count: usize) -> String {
    let jobs: Vec<String> = (2..count + 2).map(|i| format!("?{i}")).collect();
    format!(
        "SELECT min(next_attempt_at) FROM slotguard_job_runs
         WHERE status = 'pending' AND next_attempt_at > ?1 AND job_name IN ({})",
        jobs.join(", ")
    )
}

/// How many slots one `existing_slots` query asks about (3 parameters each, well under SQLite's
/// limit).
const EXISTING_CHUNK: usize = 300;

/// Whether each of `count` slots (bound as job, instant in ms, partition, from `?1` on) has a row,
/// in order. The SQL depends on the count only, never on the data.
fn existing_sql(count: usize) -> String {
    let rows: Vec<String> = (0..count)
        .map(|i| format!("({i}, ?{}, ?{}, ?{})", 3 * i + 1, 3 * i + 2, 3 * i + 3))
        .collect();
    format!(
        "WITH k (ord, job, at, part) AS (VALUES {}) \
         SELECT EXISTS (SELECT 1 FROM slotguard_job_runs AS r \
                        WHERE r.job_name = k.job AND r.scheduled_at = k.at \
                          AND r.partition_key = k.part) \
         FROM k ORDER BY k.ord",
        rows.join(", ")
    )
}

const HEARTBEAT: &str = concat!(
    "UPDATE slotguard_job_runs SET heartbeat_at = ",
    now_ms!(),
    ", updated_at = ",
    now_ms!(),
    " WHERE owner = ?1 AND status = 'running'",
    " AND fencing_token IN (SELECT value FROM json_each(?2))",
    " RETURNING fencing_token"
);

const FINISH_RUN: &str = "
UPDATE slotguard_job_runs
SET status = ?1, error_class = ?2, error_message = ?3, finished_at = ?7, updated_at = ?7,
    next_attempt_at = ?8
WHERE id = ?4 AND fencing_token = ?5 AND owner = ?6 AND status = 'running'
  AND job_name = ?9 AND scheduled_at = ?10 AND partition_key = ?11
RETURNING attempt";

const FINISH_ATTEMPT: &str = "
UPDATE slotguard_job_run_attempts
SET status = ?1, error_class = ?2, error_message = ?3, finished_at = ?7
WHERE run_id = ?4 AND attempt = ?5 AND fencing_token = ?6";

impl Shared {
    pub(crate) fn corrupt(
        &self,
        run_id: i64,
        what: &'static str,
        value: impl ToString,
    ) -> SqliteError {
        SqliteError::Corrupt {
            path: self.path.clone(),
            run_id,
            what,
            value: value.to_string(),
        }
    }

    /// See [`QueueStore::next_due`].
    async fn next_due(&self, specs: &[DueSpec]) -> Result<Option<DateTime<Utc>>, SqliteError> {
        if specs.is_empty() {
            return Ok(None);
        }
        let now: i64 = sqlx::query_scalar(concat!("SELECT ", crate::now_ms!()))
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        let sql = next_due_sql(specs.len());
        let mut query = sqlx::query_scalar::<_, Option<i64>>(sqlx::AssertSqlSafe(sql)).bind(now);
        for spec in specs {
            query = query.bind(spec.job.as_str());
        }
        let at: Option<i64> = query
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(at.and_then(DateTime::from_timestamp_millis))
    }

    /// See [`SlotStore::due_jobs`]: the rows `claim_due` would read, as the rules see them.
    async fn due_jobs(&self, specs: &[DueSpec]) -> Result<Vec<String>, SqliteError> {
        let unique = first_of_each_job(specs);
        let now: i64 = sqlx::query_scalar(concat!("SELECT ", crate::now_ms!()))
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        let rows = self.active_rows(&self.pool, &unique, now, 1).await?;
        Ok(rules::jobs_with_due_work(specs, &rows, at(now)))
    }

    async fn record_skipped(
        &self,
        requests: &[ClaimRequest],
        reason: &str,
    ) -> Result<(), SqliteError> {
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let store_now = DateTime::from_timestamp_millis(now).unwrap_or_default();
        for request in requests.iter().filter(|r| !not_due(r, store_now)) {
            self.insert_idle(
                &mut w,
                request,
                (RunStatus::Skipped, Some(reason), None),
                now,
            )
            .await?;
        }
        w.tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok(())
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
        finish: &Finish,
    ) -> Result<bool, SqliteError> {
        let q = |e| self.query_error(e);
        let class = finish.error_class.map(ErrorClass::as_str);
        let message = finish.message.as_deref();
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let next_attempt_at = finish.retry_in.map(|d| now.saturating_add(duration_ms(d)));
        let attempt: Option<i64> = sqlx::query_scalar(FINISH_RUN)
            .bind(finish.status.as_str())
            .bind(class)
            .bind(message)
            .bind(lease.run_id)
            .bind(lease.token)
            .bind(owner)
            .bind(now)
            .bind(next_attempt_at)
            .bind(&lease.key.job)
            .bind(lease.key.scheduled_at.timestamp_millis())
            .bind(&lease.key.partition)
            .fetch_optional(&mut *w.tx)
            .await
            .map_err(q)?;
        let Some(attempt) = attempt else {
            w.tx.rollback().await.map_err(q)?;
            return Ok(false);
        };
        sqlx::query(FINISH_ATTEMPT)
            .bind(finish.attempt_status.as_str())
            .bind(class)
            .bind(message)
            .bind(lease.run_id)
            .bind(attempt)
            .bind(lease.token)
            .bind(now)
            .execute(&mut *w.tx)
            .await
            .map_err(q)?;
        w.tx.commit().await.map_err(q)?;
        Ok(true)
    }

    async fn save_checkpoint(
        &self,
        owner: &str,
        lease: &Lease,
        data: &str,
    ) -> Result<bool, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let saved = sqlx::query(SAVE_CHECKPOINT)
            .bind(data)
            .bind(lease.run_id)
            .bind(lease.token)
            .bind(owner)
            .bind(&lease.key.job)
            .bind(lease.key.scheduled_at.timestamp_millis())
            .bind(&lease.key.partition)
            .execute(&mut *w.tx)
            .await
            .map_err(q)?
            .rows_affected();
        w.tx.commit().await.map_err(q)?;
        Ok(saved > 0)
    }

    async fn load_checkpoint(&self, run_id: i64) -> Result<Option<String>, SqliteError> {
        let saved: Option<Option<String>> = sqlx::query_scalar(LOAD_CHECKPOINT)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(saved.flatten())
    }
}

/// Saves checkpoint `?1` on run `?2`, only while `?4` holds it with token `?3`, it is running and it
/// is the run of slot (`?5`, `?6`, `?7`).
const SAVE_CHECKPOINT: &str = "
UPDATE slotguard_job_runs SET checkpoint = ?1
WHERE id = ?2 AND fencing_token = ?3 AND owner = ?4 AND status = 'running'
  AND job_name = ?5 AND scheduled_at = ?6 AND partition_key = ?7
";

/// The checkpoint of run `?1`.
const LOAD_CHECKPOINT: &str = "SELECT checkpoint FROM slotguard_job_runs WHERE id = ?1";

/// Claims, due claims and recorded skips run in one `BEGIN IMMEDIATE` transaction per call;
/// heartbeats are one statement for all tokens; outcomes are written to the run and its attempt
/// together, only under the current token.
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
        Ok(self
            .shared()
            .claim(owner, requests, (Mode::Claim, &[]))
            .await?)
    }

    async fn claim_due(
        &self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> Result<Vec<DueClaim>, StoreError> {
        if specs.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        Ok(self.shared().claim_due(owner, specs, limit).await?)
    }

    /// One read per 300 slots, on the pool (no write lock).
    async fn existing_slots(&self, keys: &[SlotKey]) -> Result<Vec<bool>, StoreError> {
        let shared = self.shared();
        let mut found = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(EXISTING_CHUNK) {
            let mut query =
                sqlx::query_scalar::<_, bool>(sqlx::AssertSqlSafe(existing_sql(chunk.len())));
            for key in chunk {
                query = query
                    .bind(&key.job)
                    .bind(key.scheduled_at.timestamp_millis())
                    .bind(&key.partition);
            }
            let answers = query
                .fetch_all(&shared.pool)
                .await
                .map_err(|e| shared.query_error(e))?;
            found.extend(answers);
        }
        Ok(found)
    }

    async fn due_jobs(&self, specs: &[DueSpec]) -> Result<Vec<String>, StoreError> {
        if specs.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.shared().due_jobs(specs).await?)
    }

    async fn record_skipped(
        &self,
        requests: &[ClaimRequest],
        reason: &str,
    ) -> Result<(), StoreError> {
        if requests.is_empty() {
            return Ok(());
        }
        Ok(self.shared().record_skipped(requests, reason).await?)
    }

    async fn heartbeat(&self, owner: &str, tokens: &[i64]) -> Result<Vec<i64>, StoreError> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.shared().heartbeat(owner, tokens).await?)
    }

    /// One transaction per attempt: SQLite has one writer, and each is short.
    async fn finish(
        &self,
        owner: &str,
        finishes: &[(Lease, Finish)],
    ) -> Result<Vec<bool>, StoreError> {
        let mut answers = Vec::with_capacity(finishes.len());
        for (lease, finish) in finishes {
            answers.push(self.shared().finish(owner, lease, finish).await?);
        }
        Ok(answers)
    }
}

#[async_trait]
impl QueueStore for SqliteBackend {
    /// One write transaction for the batch, as [`claim`](SlotStore::claim). No signal: workers
    /// on SQLite poll ([`due_signal`](QueueStore::due_signal)).
    async fn enqueue_slots(
        &self,
        requests: &[ClaimRequest],
        traces: &[Option<String>],
    ) -> Result<Vec<Claim>, StoreError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .shared()
            .claim("", requests, (Mode::Enqueue, traces))
            .await?)
    }

    /// One read on the pool.
    async fn next_due(
        &self,
        specs: &[DueSpec],
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
        Ok(self.shared().next_due(specs).await?)
    }

    /// `None`: SQLite cannot notify another process, so its workers poll every 100 ms.
    async fn due_signal(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

#[async_trait]
impl CheckpointStore for SqliteBackend {
    async fn save_checkpoint(
        &self,
        owner: &str,
        lease: &Lease,
        data: &str,
    ) -> Result<bool, StoreError> {
        Ok(self.shared().save_checkpoint(owner, lease, data).await?)
    }

    async fn load_checkpoint(&self, run_id: i64) -> Result<Option<String>, StoreError> {
        Ok(self.shared().load_checkpoint(run_id).await?)
    }
}

#[async_trait]
impl ClockStore for SqliteBackend {
    /// The host's clock, as SQLite reads it: every process on the file shares it.
    async fn store_now(&self) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
        let shared = self.shared();
        let ms: i64 = sqlx::query_scalar(concat!("SELECT ", crate::now_ms!()))
            .fetch_one(&shared.pool)
            .await
            .map_err(|e| shared.query_error(e))?;
        chrono::DateTime::from_timestamp_millis(ms).ok_or_else(|| {
            StoreError::rejected(format!("the store's clock read {ms} ms, out of range"))
        })
    }
}
