//! Slot rows: claim (with the overlap policy), due work, recorded skips, heartbeat and finish, every
//! write about an attempt conditional on its fencing token.
//!
//! Every call that writes is one `BEGIN IMMEDIATE` transaction that reads the store's clock once (in
//! SQL) and binds that instant to each of its statements, so they all agree on "now".

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use slotguard::ErrorClass;
use slotguard::Overlap;
use slotguard::store::{
    Claim, ClaimRequest, DueClaim, DueSpec, Finish, Lease, RunStatus, SlotKey, SlotStore,
    StoreError, not_due,
};

use crate::error::SqliteError;
use crate::inspect::{parse_status, parse_trigger};
use crate::{Shared, SqliteBackend, WriteTx, duration_ms, json_array, now_ms};

/// The reason recorded on a slot skipped because a run of its job is still going.
const SKIPPED_OVERLAP: &str = "overlap: a previous run is still running";
/// The reason recorded on a waiting slot that a newer one replaced.
const SUPERSEDED: &str = "overlap: superseded by a newer slot";
/// The reason recorded on a slot that waits for the running one.
const WAITING: &str = "overlap: waiting for the running slot";
/// The reason recorded on a run (and its attempt) stopped for a newer slot.
const REPLACED: &str = "replaced by a newer slot";

/// The row of a slot, if any.
pub(crate) const STATUS_OF: &str = "
SELECT id, status FROM slotguard_job_runs
WHERE job_name = ?1 AND scheduled_at = ?2 AND partition_key = ?3";

/// A new slot: attempt 1, running, with the next fencing token.
const INSERT_RUN: &str = "
INSERT INTO slotguard_job_runs (
    job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
    stale_after_ms, created_at, updated_at, started_at, zone, wall_time, business_date, trigger_kind,
    schedule_fingerprint)
VALUES (
    ?1, ?2, ?3, 'running', 1, ?4, (SELECT last_token + 1 FROM slotguard_fencing WHERE id = 1), ?5,
    ?6, ?5, ?5, ?5, ?7, ?8, ?9, ?10, ?11)
RETURNING id, attempt, fencing_token";

/// A slot that does not run now (`skipped`, `pending` waiting for the running one, or `pending`
/// queued for a worker, due at `?13`), with no attempt. Nothing when the row exists.
const INSERT_IDLE: &str = "
INSERT INTO slotguard_job_runs (
    job_name, scheduled_at, partition_key, status, attempt, stale_after_ms, created_at, updated_at,
    error_message, zone, wall_time, business_date, trigger_kind, schedule_fingerprint,
    next_attempt_at, finished_at)
VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,
        CASE WHEN ?4 = 'skipped' THEN ?6 END)
ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING";

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

/// How many runs of job `?1` are running with a fresh heartbeat (by `?2`).
const FRESH_RUNNING: &str = "
SELECT count(*) FROM slotguard_job_runs
WHERE job_name = ?1 AND status = 'running' AND heartbeat_at + stale_after_ms >= ?2";

/// Whether another run of the job and partition is running with a fresh heartbeat (by `?3`).
const BUSY: &str = "
SELECT EXISTS (
    SELECT 1 FROM slotguard_job_runs
    WHERE job_name = ?1 AND partition_key = ?2 AND status = 'running'
      AND heartbeat_at + stale_after_ms >= ?3)";

/// A new slot about to run: the other runs of its job and partition that are `running` with a stale
/// heartbeat (their holders are frozen or dead) are fenced, due again at once; `?3` the new slot,
/// `?4` the clock. Their attempts are closed by [`ABANDON_ATTEMPT`].
const FENCE_STALE: &str = "
UPDATE slotguard_job_runs
SET status = 'abandoned', next_attempt_at = ?4, error_message = 'heartbeat expired', updated_at = ?4
WHERE job_name = ?1 AND partition_key = ?2 AND scheduled_at <> ?3 AND status = 'running'
  AND heartbeat_at + stale_after_ms < ?4
RETURNING id, attempt";

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

/// Which jobs have due work, as `DUE_RUNS` would select it (wrapped around it).
const DUE_JOBS: &str = "SELECT DISTINCT job_name FROM (";

/// buffer_one: the slots of the job and partition that were waiting give way to the newer one.
const SUPERSEDE_WAITING: &str = "
UPDATE slotguard_job_runs
SET status = 'skipped', error_message = ?3, updated_at = ?4, finished_at = ?4
WHERE job_name = ?1 AND partition_key = ?2 AND status = 'pending' AND next_attempt_at IS NULL";

/// replace: the running attempts of the job and partition are abandoned (before their runs, which
/// name them).
const REPLACE_ATTEMPTS: &str = "
UPDATE slotguard_job_run_attempts
SET status = 'abandoned', finished_at = ?4, error_message = ?3
WHERE status = 'running' AND run_id IN (
    SELECT id FROM slotguard_job_runs
    WHERE job_name = ?1 AND partition_key = ?2 AND status = 'running')";

/// replace: the running runs of the job and partition are abandoned, with no next attempt, so nothing
/// recovers them; their holders lose their tokens' hold.
const REPLACE_RUNS: &str = "
UPDATE slotguard_job_runs
SET status = 'abandoned', next_attempt_at = NULL, error_message = ?3, finished_at = ?4,
    updated_at = ?4
WHERE job_name = ?1 AND partition_key = ?2 AND status = 'running'
RETURNING id";

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
    next_attempt_at = NULL,
    error_class = NULL,
    error_message = NULL
WHERE job_name = ?1 AND scheduled_at = ?2 AND partition_key = ?3
  AND status = 'running' AND heartbeat_at + stale_after_ms < ?5
RETURNING id, attempt, fencing_token";

/// A due run (already checked, in this transaction): its next attempt, with the next fencing token.
const CLAIM_DUE_RUN: &str = "
UPDATE slotguard_job_runs
SET status = 'running',
    attempt = attempt + 1,
    owner = ?2,
    fencing_token = (SELECT last_token + 1 FROM slotguard_fencing WHERE id = 1),
    heartbeat_at = ?3,
    updated_at = ?3,
    started_at = ?3,
    finished_at = NULL,
    next_attempt_at = NULL,
    error_class = NULL,
    error_message = NULL
WHERE id = ?1
RETURNING attempt, fencing_token";

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

/// The jobs `claim_due` serves, as a common table `specs(job, max_attempts)`: `count` rows of bound
/// parameters from `?3` on (`?1` is the clock, `?2` the limit). The SQL depends on the count only,
/// never on the data.
fn specs_cte(count: usize) -> String {
    let rows: Vec<String> = (0..count)
        .map(|i| format!("(?{}, ?{})", 3 + 2 * i, 4 + 2 * i))
        .collect();
    format!(
        "WITH specs (job, max_attempts) AS (VALUES {})",
        rows.join(", ")
    )
}

/// Stale and handed-over runs that have had all their attempts become `dead`. A `pending` run is
/// not subject to it: one an operator retried or enqueued is claimed whatever its attempt count.
const DUE_EXHAUSTED: &str = "
UPDATE slotguard_job_runs
SET status = 'dead',
    next_attempt_at = NULL,
    finished_at = ?1,
    updated_at = ?1,
    error_message = 'attempts exhausted (' || attempt || ' of '
        || (SELECT max_attempts FROM specs WHERE specs.job = slotguard_job_runs.job_name) || ')'
WHERE job_name IN (SELECT job FROM specs)
  AND ((status = 'abandoned' AND next_attempt_at <= ?1)
       OR (status = 'running' AND heartbeat_at + stale_after_ms < ?1))
  AND attempt >= (SELECT max_attempts FROM specs WHERE specs.job = slotguard_job_runs.job_name)
RETURNING id, job_name, attempt";

/// Due runs of the jobs in `specs`, oldest slot first.
const DUE_RUNS: &str = "
SELECT r.id, r.job_name, r.scheduled_at, r.partition_key, r.trigger_kind, r.zone, r.wall_time,
       r.business_date
FROM slotguard_job_runs AS r
WHERE r.job_name IN (SELECT job FROM specs)
  AND ((r.status IN ('pending', 'abandoned') AND r.next_attempt_at <= ?1)
       OR (r.status = 'pending' AND r.next_attempt_at IS NULL AND NOT EXISTS (
              SELECT 1 FROM slotguard_job_runs AS o
              WHERE o.job_name = r.job_name AND o.partition_key = r.partition_key
                AND o.status = 'running' AND o.id <> r.id
                AND o.heartbeat_at + o.stale_after_ms >= ?1))
       OR (r.status = 'running' AND r.heartbeat_at + r.stale_after_ms < ?1))
ORDER BY r.scheduled_at, r.job_name, r.partition_key
LIMIT ?2";

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
RETURNING attempt";

const FINISH_ATTEMPT: &str = "
UPDATE slotguard_job_run_attempts
SET status = ?1, error_class = ?2, error_message = ?3, finished_at = ?7
WHERE run_id = ?4 AND attempt = ?5 AND fencing_token = ?6";

/// A due run as selected: id, job, slot, partition, trigger, zone, wall time, business date.
type DueRow = (i64, String, i64, String, String, String, String, String);

/// The wall time as stored (ISO 8601 without offset).
pub(crate) fn wall_text(wall: NaiveDateTime) -> String {
    wall.format("%Y-%m-%dT%H:%M:%S%.f").to_string()
}

/// The business date as stored.
pub(crate) fn date_text(date: NaiveDate) -> String {
    date.format("%Y-%m-%d").to_string()
}

impl Shared {
    fn corrupt(&self, run_id: i64, what: &'static str, value: impl ToString) -> SqliteError {
        SqliteError::Corrupt {
            path: self.path.clone(),
            run_id,
            what,
            value: value.to_string(),
        }
    }

    /// Records a claimed attempt: the previous one (if it was still running) is abandoned, the token
    /// is recorded as handed out, and the new attempt gets its row.
    async fn start_attempt(
        &self,
        w: &mut WriteTx<'_>,
        owner: &str,
        now: i64,
        (run_id, attempt, token): (i64, i64, i64),
    ) -> Result<Lease, SqliteError> {
        let q = |e| self.query_error(e);
        if attempt > 1 {
            sqlx::query(ABANDON_ATTEMPT)
                .bind(run_id)
                .bind(attempt - 1)
                .bind(now)
                .execute(&mut *w.tx)
                .await
                .map_err(q)?;
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
        let attempt =
            u32::try_from(attempt).map_err(|_| self.corrupt(run_id, "attempt", attempt))?;
        Ok(Lease {
            run_id,
            attempt,
            token,
        })
    }

    /// Whether another run of the job and partition is `running` with a fresh heartbeat.
    async fn busy(
        &self,
        w: &mut WriteTx<'_>,
        job: &str,
        partition: &str,
        now: i64,
    ) -> Result<bool, SqliteError> {
        sqlx::query_scalar(BUSY)
            .bind(job)
            .bind(partition)
            .bind(now)
            .fetch_one(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))
    }

    /// See [`FENCE_STALE`].
    async fn fence_stale(
        &self,
        w: &mut WriteTx<'_>,
        request: &ClaimRequest,
        now: i64,
    ) -> Result<(), SqliteError> {
        let q = |e| self.query_error(e);
        let key = &request.key;
        let fenced: Vec<(i64, i64)> = sqlx::query_as(FENCE_STALE)
            .bind(&key.job)
            .bind(&key.partition)
            .bind(key.scheduled_at.timestamp_millis())
            .bind(now)
            .fetch_all(&mut *w.tx)
            .await
            .map_err(q)?;
        for (run_id, attempt) in fenced {
            sqlx::query(ABANDON_ATTEMPT)
                .bind(run_id)
                .bind(attempt)
                .bind(now)
                .execute(&mut *w.tx)
                .await
                .map_err(q)?;
            tracing::warn!(event = "job_fenced", job = %key.job, run_id, attempt, "a stale run of the job was fenced: a newer slot runs now");
        }
        Ok(())
    }

    /// See [`SlotStore::next_due`].
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

    /// See [`SlotStore::due_jobs`]: which jobs `DUE_RUNS` would select now.
    async fn due_jobs(&self, specs: &[DueSpec]) -> Result<Vec<String>, SqliteError> {
        let mut unique: Vec<&DueSpec> = Vec::with_capacity(specs.len());
        for spec in specs {
            if !unique.iter().any(|s| s.job == spec.job) {
                unique.push(spec);
            }
        }
        let sql = format!("{}{DUE_JOBS}{DUE_RUNS})", specs_cte(unique.len()));
        let now: i64 = sqlx::query_scalar(concat!("SELECT ", crate::now_ms!()))
            .fetch_one(&self.pool)
            .await
            .map_err(|e| self.query_error(e))?;
        let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(i64::MAX);
        for spec in &unique {
            query = query
                .bind(spec.job.as_str())
                .bind(i64::from(spec.max_attempts));
        }
        query
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.query_error(e))
    }

    /// Inserts a slot that does not run now; nothing when its row exists. `message` and `due` are
    /// `None` for a slot queued for a worker, which is due at its instant.
    async fn insert_idle(
        &self,
        w: &mut WriteTx<'_>,
        request: &ClaimRequest,
        status: RunStatus,
        message: Option<&str>,
        now: i64,
    ) -> Result<(), SqliteError> {
        let due = message
            .is_none()
            .then(|| request.key.scheduled_at.timestamp_millis());
        let key = &request.key;
        sqlx::query(INSERT_IDLE)
            .bind(&key.job)
            .bind(key.scheduled_at.timestamp_millis())
            .bind(&key.partition)
            .bind(status.as_str())
            .bind(duration_ms(request.stale_after))
            .bind(now)
            .bind(message)
            .bind(&request.zone)
            .bind(wall_text(request.wall))
            .bind(date_text(request.business_date))
            .bind(request.trigger.as_str())
            // The fingerprint's bits, reinterpreted: SQLite integers are signed.
            .bind(request.fingerprint as i64)
            .bind(due)
            .execute(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    /// A new slot under its overlap policy: `None` when it runs now (the caller claims it), or the
    /// status it was recorded with instead.
    async fn apply_overlap(
        &self,
        w: &mut WriteTx<'_>,
        request: &ClaimRequest,
        now: i64,
    ) -> Result<Option<RunStatus>, SqliteError> {
        if request.overlap == Overlap::Allow {
            return Ok(None);
        }
        let key = &request.key;
        if !self.busy(w, &key.job, &key.partition, now).await? {
            return Ok(None);
        }
        match request.overlap {
            Overlap::Allow => Ok(None),
            Overlap::Skip => {
                self.insert_idle(w, request, RunStatus::Skipped, Some(SKIPPED_OVERLAP), now)
                    .await?;
                tracing::info!(
                    event = "job_skipped",
                    job = %key.job,
                    slot = %key.scheduled_at,
                    partition = %key.partition,
                    reason = SKIPPED_OVERLAP,
                    "slot skipped: a previous run is still running"
                );
                Ok(Some(RunStatus::Skipped))
            }
            Overlap::BufferOne => self.buffer(w, request, now).await.map(Some),
            Overlap::Replace => self.replace(w, key, now).await.map(|()| None),
        }
    }

    /// buffer_one: the slot waits as `pending`; older waiting slots of the job give way.
    async fn buffer(
        &self,
        w: &mut WriteTx<'_>,
        request: &ClaimRequest,
        now: i64,
    ) -> Result<RunStatus, SqliteError> {
        let key = &request.key;
        let superseded = sqlx::query(SUPERSEDE_WAITING)
            .bind(&key.job)
            .bind(&key.partition)
            .bind(SUPERSEDED)
            .bind(now)
            .execute(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?
            .rows_affected();
        self.insert_idle(w, request, RunStatus::Pending, Some(WAITING), now)
            .await?;
        tracing::info!(
            event = "job_buffered",
            job = %key.job,
            slot = %key.scheduled_at,
            partition = %key.partition,
            superseded,
            "slot waits for the running one"
        );
        Ok(RunStatus::Pending)
    }

    /// replace: the running runs of the job and partition (and their attempts) are abandoned.
    async fn replace(
        &self,
        w: &mut WriteTx<'_>,
        key: &SlotKey,
        now: i64,
    ) -> Result<(), SqliteError> {
        let q = |e| self.query_error(e);
        sqlx::query(REPLACE_ATTEMPTS)
            .bind(&key.job)
            .bind(&key.partition)
            .bind(REPLACED)
            .bind(now)
            .execute(&mut *w.tx)
            .await
            .map_err(q)?;
        let replaced: Vec<i64> = sqlx::query_scalar(REPLACE_RUNS)
            .bind(&key.job)
            .bind(&key.partition)
            .bind(REPLACED)
            .bind(now)
            .fetch_all(&mut *w.tx)
            .await
            .map_err(q)?;
        tracing::info!(
            event = "job_replaced",
            job = %key.job,
            slot = %key.scheduled_at,
            partition = %key.partition,
            ?replaced,
            "running runs abandoned for a newer slot"
        );
        Ok(())
    }

    /// Claims `requests` for `owner`, or with `queue` enqueues them for workers (see
    /// [`SlotStore::enqueue_slots`]).
    pub(crate) async fn claim(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
        queue: bool,
    ) -> Result<Vec<Claim>, SqliteError> {
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let mut answers = Vec::with_capacity(requests.len());
        for request in requests {
            answers.push(self.claim_one(&mut w, (owner, queue), now, request).await?);
        }
        w.tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok(answers)
    }

    /// One request of a claim, inside its transaction.
    async fn claim_one(
        &self,
        w: &mut WriteTx<'_>,
        (owner, queue): (&str, bool),
        now: i64,
        request: &ClaimRequest,
    ) -> Result<Claim, SqliteError> {
        let q = |e| self.query_error(e);
        if not_due(
            request,
            DateTime::from_timestamp_millis(now).unwrap_or_default(),
        ) {
            return Ok(Claim::NotDue);
        }
        let key = &request.key;
        let scheduled_at = key.scheduled_at.timestamp_millis();
        let existing: Option<(i64, String)> = sqlx::query_as(STATUS_OF)
            .bind(&key.job)
            .bind(scheduled_at)
            .bind(&key.partition)
            .fetch_optional(&mut *w.tx)
            .await
            .map_err(q)?;
        let won = match existing {
            Some((run_id, status)) => {
                let status =
                    parse_status(&status).ok_or_else(|| self.corrupt(run_id, "status", &status))?;
                if queue {
                    // A worker's `claim_due` recovers a stale row, not the scheduler.
                    return Ok(Claim::Taken { status });
                }
                match self.reclaim(w, owner, now, request, status).await? {
                    Some(row) => row,
                    None => return Ok(Claim::Taken { status }),
                }
            }
            None => {
                if let Some(status) = self.apply_overlap(w, request, now).await? {
                    return Ok(Claim::Taken { status });
                }
                if queue {
                    self.insert_idle(w, request, RunStatus::Pending, None, now)
                        .await?;
                    return Ok(Claim::Queued);
                }
                if matches!(request.overlap, Overlap::Skip | Overlap::BufferOne) {
                    self.fence_stale(w, request, now).await?;
                }
                sqlx::query_as(INSERT_RUN)
                    .bind(&key.job)
                    .bind(scheduled_at)
                    .bind(&key.partition)
                    .bind(owner)
                    .bind(now)
                    .bind(duration_ms(request.stale_after))
                    .bind(&request.zone)
                    .bind(wall_text(request.wall))
                    .bind(date_text(request.business_date))
                    .bind(request.trigger.as_str())
                    // The fingerprint's bits, reinterpreted: SQLite integers are signed.
                    .bind(request.fingerprint as i64)
                    .fetch_one(&mut *w.tx)
                    .await
                    .map_err(q)?
            }
        };
        Ok(Claim::Won(self.start_attempt(w, owner, now, won).await?))
    }

    /// An existing row of a claimed slot: re-claimed when it is `running` with a stale heartbeat.
    async fn reclaim(
        &self,
        w: &mut WriteTx<'_>,
        owner: &str,
        now: i64,
        request: &ClaimRequest,
        status: RunStatus,
    ) -> Result<Option<(i64, i64, i64)>, SqliteError> {
        if status != RunStatus::Running {
            return Ok(None);
        }
        let key = &request.key;
        let row: Option<(i64, i64, i64)> = sqlx::query_as(RECLAIM_RUN)
            .bind(&key.job)
            .bind(key.scheduled_at.timestamp_millis())
            .bind(&key.partition)
            .bind(owner)
            .bind(now)
            .bind(duration_ms(request.stale_after))
            .fetch_optional(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        if let Some((run_id, attempt, token)) = row {
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
        Ok(row)
    }

    async fn claim_due(
        &self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> Result<Vec<DueClaim>, SqliteError> {
        // One row per job: the first spec of a job counts, as in the memory backend.
        let mut unique: Vec<&DueSpec> = Vec::with_capacity(specs.len());
        for spec in specs {
            if !unique.iter().any(|s| s.job == spec.job) {
                unique.push(spec);
            }
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        self.bury_exhausted(&mut w, &unique, now, limit).await?;
        // Built from the number of jobs only; names and limits are bound.
        let mut due = sqlx::query_as::<_, DueRow>(sqlx::AssertSqlSafe(format!(
            "{}{DUE_RUNS}",
            specs_cte(unique.len())
        )))
        .bind(now)
        .bind(limit);
        for spec in &unique {
            due = due
                .bind(spec.job.as_str())
                .bind(i64::from(spec.max_attempts));
        }
        let rows = due
            .fetch_all(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        let mut claimed: Vec<DueClaim> = Vec::with_capacity(rows.len());
        let mut taken: Vec<(String, String)> = Vec::new();
        for row in rows {
            let (job, partition) = (&row.1, &row.3);
            let Some(spec) = unique.iter().find(|s| s.job == *job) else {
                continue;
            };
            if self.is_full(&mut w, spec, &claimed, now).await? {
                continue;
            }
            let exclusive = spec.overlap != Overlap::Allow;
            if exclusive {
                let pair = (job.clone(), partition.clone());
                if taken.contains(&pair) || self.busy(&mut w, job, partition, now).await? {
                    continue;
                }
                taken.push(pair);
            }
            claimed.push(self.claim_due_row(&mut w, owner, now, row).await?);
        }
        w.tx.commit().await.map_err(|e| self.query_error(e))?;
        Ok(claimed)
    }

    /// Whether `spec`'s job may have no more runs handed out, after `claimed` in this call.
    async fn is_full(
        &self,
        w: &mut WriteTx<'_>,
        spec: &DueSpec,
        claimed: &[DueClaim],
        now: i64,
    ) -> Result<bool, SqliteError> {
        let handed = claimed.iter().filter(|c| c.key.job == spec.job).count();
        let running = match spec.cluster_limit {
            Some(_) => sqlx::query_scalar::<_, i64>(FRESH_RUNNING)
                .bind(&spec.job)
                .bind(now)
                .fetch_one(&mut *w.tx)
                .await
                .map_err(|e| self.query_error(e))?,
            None => 0,
        };
        Ok(spec.is_full(handed, usize::try_from(running).unwrap_or(usize::MAX)))
    }

    /// Stale or handed-over runs with no attempts left are dead, not claimed.
    async fn bury_exhausted(
        &self,
        w: &mut WriteTx<'_>,
        unique: &[&DueSpec],
        now: i64,
        limit: i64,
    ) -> Result<(), SqliteError> {
        let q = |e| self.query_error(e);
        let sql = format!("{}{DUE_EXHAUSTED}", specs_cte(unique.len()));
        let mut exhausted = sqlx::query_as::<_, (i64, String, i64)>(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(limit);
        for spec in unique {
            exhausted = exhausted
                .bind(spec.job.as_str())
                .bind(i64::from(spec.max_attempts));
        }
        let dead = exhausted.fetch_all(&mut *w.tx).await.map_err(q)?;
        for (run_id, job, attempt) in dead {
            // A stale run's attempt was still marked running.
            sqlx::query(ABANDON_ATTEMPT)
                .bind(run_id)
                .bind(attempt)
                .bind(now)
                .execute(&mut *w.tx)
                .await
                .map_err(q)?;
            tracing::warn!(
                event = "job_dead",
                job = %job,
                run_id,
                attempt,
                "attempts exhausted: the run is dead and needs a person"
            );
        }
        Ok(())
    }

    /// The next attempt of one due run.
    async fn claim_due_row(
        &self,
        w: &mut WriteTx<'_>,
        owner: &str,
        now: i64,
        (run_id, job, scheduled_at, partition, trigger, zone, wall, business_date): DueRow,
    ) -> Result<DueClaim, SqliteError> {
        let (attempt, token): (i64, i64) = sqlx::query_as(CLAIM_DUE_RUN)
            .bind(run_id)
            .bind(owner)
            .bind(now)
            .fetch_one(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        let lease = self
            .start_attempt(w, owner, now, (run_id, attempt, token))
            .await?;
        tracing::info!(event = "job_due_claimed", job = %job, run_id, attempt, owner, token, "claimed a due run");
        Ok(DueClaim {
            key: SlotKey {
                job,
                scheduled_at: DateTime::from_timestamp_millis(scheduled_at)
                    .ok_or_else(|| self.corrupt(run_id, "scheduled_at", scheduled_at))?,
                partition,
            },
            lease,
            trigger: parse_trigger(&trigger)
                .ok_or_else(|| self.corrupt(run_id, "trigger", &trigger))?,
            zone,
            wall: NaiveDateTime::parse_from_str(&wall, "%Y-%m-%dT%H:%M:%S%.f")
                .map_err(|_| self.corrupt(run_id, "wall_time", &wall))?,
            business_date: NaiveDate::parse_from_str(&business_date, "%Y-%m-%d")
                .map_err(|_| self.corrupt(run_id, "business_date", &business_date))?,
        })
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
            self.insert_idle(&mut w, request, RunStatus::Skipped, Some(reason), now)
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

/// Saves checkpoint `?1` on run `?2`, only while `?4` holds it with token `?3` and it is running.
const SAVE_CHECKPOINT: &str = "
UPDATE slotguard_job_runs SET checkpoint = ?1
WHERE id = ?2 AND fencing_token = ?3 AND owner = ?4 AND status = 'running'
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
        Ok(self.shared().claim(owner, requests, false).await?)
    }

    /// One write transaction for the batch, as [`claim`](SlotStore::claim). No signal: workers
    /// on SQLite poll.
    async fn enqueue_slots(&self, requests: &[ClaimRequest]) -> Result<Vec<Claim>, StoreError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.shared().claim("", requests, true).await?)
    }

    /// One read on the pool.
    async fn next_due(
        &self,
        specs: &[DueSpec],
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
        Ok(self.shared().next_due(specs).await?)
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

    /// The host's clock, as SQLite reads it: every process on the file shares it.
    async fn store_now(&self) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
        let shared = self.shared();
        let ms: i64 = sqlx::query_scalar(concat!("SELECT ", crate::now_ms!()))
            .fetch_one(&shared.pool)
            .await
            .map_err(|e| shared.query_error(e))?;
        Ok(chrono::DateTime::from_timestamp_millis(ms))
    }
}
