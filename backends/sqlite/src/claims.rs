//! Claims and due claims: the rows that matter are read inside the `BEGIN IMMEDIATE` transaction,
//! [`rules`] decides, and the plan is written in the same transaction. The events the plan implies
//! are logged once it committed.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use slotguard::store::rules::{
    self, Change, ClaimPlan, Event, Mode, NewRow, RowFacts, SlotPlan, reason,
};
use slotguard::store::{Claim, ClaimRequest, DueClaim, DueSpec, Lease, SlotKey};

use crate::error::SqliteError;
use crate::inspect::{parse_status, parse_trigger};
use crate::values::{ADVANCE_TOKEN, date_text, stamp_columns, wall_text};
use crate::{Shared, WriteTx, duration_ms};

/// The columns the rules read, in [`FactsRow`]'s order.
macro_rules! facts {
    () => {
        "id, job_name, scheduled_at, partition_key, status, attempt, heartbeat_at, \
         stale_after_ms, next_attempt_at, trigger_kind"
    };
}

/// A row as read for the rules.
type FactsRow = (
    i64,
    String,
    i64,
    String,
    String,
    i64,
    Option<i64>,
    i64,
    Option<i64>,
    String,
);

/// The slot's row (`?3`) and the `running` and `pending` rows of its job and partition, through
/// `slotguard_job_runs_job_status`.
const PAIR_ROWS: &str = concat!(
    "SELECT ",
    facts!(),
    " FROM slotguard_job_runs WHERE job_name = ?1 AND partition_key = ?2 \
     AND (scheduled_at = ?3 OR status IN ('running', 'pending'))"
);

/// For each of `count` jobs (bound from `?3` on; `?1` the clock, `?2` the window): its `running`
/// rows, and its oldest `?2` rows that may be due (`pending` or `abandoned` due again, `pending`
/// waiting). The SQL depends on the count only, never on the data.
fn active_rows_sql(count: usize) -> String {
    let per_job: Vec<String> = (0..count)
        .map(|i| {
            let (job, facts) = (i + 3, facts!());
            format!(
                "SELECT * FROM (SELECT {facts} FROM slotguard_job_runs
                   WHERE job_name = ?{job} AND status = 'running')
                 UNION ALL
                 SELECT * FROM (SELECT {facts} FROM slotguard_job_runs
                   WHERE job_name = ?{job} AND status IN ('pending', 'abandoned')
                     AND (next_attempt_at <= ?1
                          OR (status = 'pending' AND next_attempt_at IS NULL))
                   ORDER BY scheduled_at LIMIT ?2)"
            )
        })
        .collect();
    per_job.join(" UNION ALL ")
}

/// A change the rules made to an existing row; answers its attempt.
const CHANGE_RUN: &str = "
UPDATE slotguard_job_runs
SET status = ?2, error_message = ?3, next_attempt_at = ?4, updated_at = ?5,
    finished_at = CASE WHEN ?6 THEN ?5 ELSE finished_at END
WHERE id = ?1
RETURNING attempt";

/// Closes attempt `?2` of run `?1` as `abandoned` with message `?4`, if it was still running.
const CLOSE_ATTEMPT: &str = "
UPDATE slotguard_job_run_attempts
SET status = 'abandoned', finished_at = ?3, error_message = ?4
WHERE run_id = ?1 AND attempt = ?2 AND status = 'running'";

/// A new attempt of run `?1` for owner `?2` at `?3`, with the next fencing token; `?4`, when not
/// NULL, its new staleness threshold.
const TAKE_OVER: &str = "
UPDATE slotguard_job_runs
SET status = 'running',
    attempt = attempt + 1,
    owner = ?2,
    fencing_token = (SELECT last_token + 1 FROM slotguard_fencing WHERE id = 1),
    heartbeat_at = ?3,
    stale_after_ms = coalesce(?4, stale_after_ms),
    updated_at = ?3,
    started_at = ?3,
    finished_at = NULL,
    next_attempt_at = NULL
WHERE id = ?1
RETURNING attempt, fencing_token, trigger_kind, zone, wall_time, business_date, trace_parent";

/// A new slot: attempt 1, running, with the next fencing token.
const INSERT_RUN: &str = "
INSERT INTO slotguard_job_runs (
    job_name, scheduled_at, partition_key, status, attempt, owner, fencing_token, heartbeat_at,
    stale_after_ms, created_at, updated_at, started_at, zone, wall_time, business_date, trigger_kind,
    schedule_fingerprint, nominal_dates, calendar_name, calendar_version)
VALUES (
    ?1, ?2, ?3, 'running', 1, ?4, (SELECT last_token + 1 FROM slotguard_fencing WHERE id = 1), ?5,
    ?6, ?5, ?5, ?5, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
RETURNING id, fencing_token";

/// A slot that does not run now (`skipped`, `pending` waiting, or `pending` queued for a worker,
/// due at `?13`), with no attempt. Nothing when the row exists.
pub(crate) const INSERT_IDLE: &str = "
INSERT INTO slotguard_job_runs (
    job_name, scheduled_at, partition_key, status, attempt, stale_after_ms, created_at, updated_at,
    error_message, zone, wall_time, business_date, trigger_kind, schedule_fingerprint,
    next_attempt_at, finished_at, nominal_dates, calendar_name, calendar_version)
VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,
        CASE WHEN ?4 = 'skipped' THEN ?6 END, ?14, ?15, ?16)
ON CONFLICT (job_name, scheduled_at, partition_key) DO NOTHING";

const INSERT_ATTEMPT: &str = "
INSERT INTO slotguard_job_run_attempts (run_id, attempt, owner, fencing_token, status, started_at)
VALUES (?1, ?2, ?3, ?4, 'running', ?5)";

/// What [`TAKE_OVER`] answers: attempt, token, trigger, zone, wall time, business date, trace
/// context.
type TakenRow = (i64, i64, String, String, String, String, Option<String>);

impl Shared {
    /// Decodes a row read for the rules.
    fn facts(&self, row: FactsRow) -> Result<RowFacts, SqliteError> {
        let (id, job, at, partition, status, attempt, beat, stale_ms, next, trigger) = row;
        let instant = |ms: i64, what| {
            DateTime::from_timestamp_millis(ms).ok_or_else(|| self.corrupt(id, what, ms))
        };
        Ok(RowFacts {
            id,
            key: SlotKey {
                job,
                scheduled_at: instant(at, "scheduled_at")?,
                partition,
            },
            status: parse_status(&status).ok_or_else(|| self.corrupt(id, "status", &status))?,
            attempt: u32::try_from(attempt).map_err(|_| self.corrupt(id, "attempt", attempt))?,
            heartbeat_at: beat.map(|ms| instant(ms, "heartbeat_at")).transpose()?,
            stale_after: std::time::Duration::from_millis(u64::try_from(stale_ms).unwrap_or(0)),
            next_attempt_at: next.map(|ms| instant(ms, "next_attempt_at")).transpose()?,
            trigger: parse_trigger(&trigger)
                .ok_or_else(|| self.corrupt(id, "trigger", &trigger))?,
        })
    }

    /// Claims `requests` for `owner`, or enqueues them for workers with their trace contexts
    /// (see [`QueueStore::enqueue_slots`](slotguard::store::QueueStore::enqueue_slots)).
    pub(crate) async fn claim(
        &self,
        owner: &str,
        requests: &[ClaimRequest],
        (mode, traces): (Mode, &[Option<String>]),
    ) -> Result<Vec<Claim>, SqliteError> {
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let mut decided: Vec<(ClaimPlan, Claim)> = Vec::with_capacity(requests.len());
        for request in requests {
            decided.push(self.claim_one(&mut w, (owner, mode), now, request).await?);
        }
        if !traces.is_empty() {
            let answers: Vec<&Claim> = decided.iter().map(|(_, answer)| answer).collect();
            self.keep_traces(&mut w, requests, traces, &answers).await?;
        }
        w.tx.commit().await.map_err(|e| self.query_error(e))?;
        for ((plan, _), request) in decided.iter().zip(requests) {
            Event::emit_all(&plan.events(request));
        }
        Ok(decided.into_iter().map(|(_, answer)| answer).collect())
    }

    /// One request of a claim, inside its transaction.
    async fn claim_one(
        &self,
        w: &mut WriteTx<'_>,
        (owner, mode): (&str, Mode),
        now: i64,
        request: &ClaimRequest,
    ) -> Result<(ClaimPlan, Claim), SqliteError> {
        let key = &request.key;
        let rows: Vec<FactsRow> = sqlx::query_as(PAIR_ROWS)
            .bind(&key.job)
            .bind(&key.partition)
            .bind(key.scheduled_at.timestamp_millis())
            .fetch_all(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        let rows = rows
            .into_iter()
            .map(|row| self.facts(row))
            .collect::<Result<Vec<_>, _>>()?;
        let existing = rows.iter().find(|r| r.key == *key);
        let plan = rules::plan_claim(request, mode, existing, &rows, at(now));
        for (id, change) in &plan.changes {
            self.change(w, *id, *change, now).await?;
        }
        let lease = match plan.slot {
            SlotPlan::TakeOver(id) => {
                let stale = Some(duration_ms(request.stale_after));
                Some(self.take_over(w, (owner, key), now, id, stale).await?.0)
            }
            SlotPlan::Insert(NewRow::Running) => {
                Some(self.insert_run(w, owner, now, request).await?)
            }
            SlotPlan::Insert(row) => {
                let due = (row == NewRow::Queued).then(|| key.scheduled_at.timestamp_millis());
                self.insert_idle(w, request, (row.status(), row.message(), due), now)
                    .await?;
                None
            }
            SlotPlan::NotDue | SlotPlan::Busy | SlotPlan::Taken(_) => None,
        };
        let answer = plan.answer(lease);
        Ok((plan, answer))
    }

    /// Writes a change the rules made to row `id`, and closes its running attempt.
    async fn change(
        &self,
        w: &mut WriteTx<'_>,
        id: i64,
        change: Change,
        now: i64,
    ) -> Result<(), SqliteError> {
        let q = |e| self.query_error(e);
        let next = change
            .next_attempt_at(at(now))
            .map(|t| t.timestamp_millis());
        let attempt: Option<i64> = sqlx::query_scalar(CHANGE_RUN)
            .bind(id)
            .bind(change.status().as_str())
            .bind(change.message())
            .bind(next)
            .bind(now)
            .bind(change.finishes())
            .fetch_optional(&mut *w.tx)
            .await
            .map_err(q)?;
        if let Some(attempt) = attempt {
            self.close_attempt(w, (id, attempt), change.attempt_message(), now)
                .await?;
        }
        Ok(())
    }

    /// Closes an attempt as `abandoned` if it was still running.
    async fn close_attempt(
        &self,
        w: &mut WriteTx<'_>,
        (run_id, attempt): (i64, i64),
        why: &str,
        now: i64,
    ) -> Result<(), SqliteError> {
        sqlx::query(CLOSE_ATTEMPT)
            .bind(run_id)
            .bind(attempt)
            .bind(now)
            .bind(why)
            .execute(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    /// A new attempt of run `id` for `owner`: the previous one (if still running) is abandoned, the
    /// token is recorded as handed out, and the new attempt gets its row.
    async fn take_over(
        &self,
        w: &mut WriteTx<'_>,
        (owner, key): (&str, &SlotKey),
        now: i64,
        id: i64,
        stale_after_ms: Option<i64>,
    ) -> Result<(Lease, TakenRow), SqliteError> {
        let row: TakenRow = sqlx::query_as(TAKE_OVER)
            .bind(id)
            .bind(owner)
            .bind(now)
            .bind(stale_after_ms)
            .fetch_one(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        if row.0 > 1 {
            // The previous attempt, if its holder never ended it (a queued slot had none).
            self.close_attempt(w, (id, row.0 - 1), reason::HEARTBEAT_EXPIRED, now)
                .await?;
        }
        let lease = self
            .start_attempt(w, (owner, key), now, (id, row.0, row.1))
            .await?;
        Ok((lease, row))
    }

    /// A new `running` row for `request`, attempt 1.
    async fn insert_run(
        &self,
        w: &mut WriteTx<'_>,
        owner: &str,
        now: i64,
        request: &ClaimRequest,
    ) -> Result<Lease, SqliteError> {
        let key = &request.key;
        let (nominal, calendar, version) = stamp_columns(request.calendar.as_ref());
        let (id, token): (i64, i64) = sqlx::query_as(INSERT_RUN)
            .bind(&key.job)
            .bind(key.scheduled_at.timestamp_millis())
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
            .bind(nominal)
            .bind(calendar)
            .bind(version)
            .fetch_one(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        self.start_attempt(w, (owner, key), now, (id, 1, token))
            .await
    }

    /// Inserts a slot that does not run now, as `(status, message, due)`; nothing when its row
    /// exists.
    pub(crate) async fn insert_idle(
        &self,
        w: &mut WriteTx<'_>,
        request: &ClaimRequest,
        (status, message, due): (slotguard::store::RunStatus, Option<&str>, Option<i64>),
        now: i64,
    ) -> Result<(), SqliteError> {
        let key = &request.key;
        let (nominal, calendar, version) = stamp_columns(request.calendar.as_ref());
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
            .bind(nominal)
            .bind(calendar)
            .bind(version)
            .execute(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    /// Records a claimed attempt: the token as handed out and the attempt's row.
    async fn start_attempt(
        &self,
        w: &mut WriteTx<'_>,
        (owner, key): (&str, &SlotKey),
        now: i64,
        (run_id, attempt, token): (i64, i64, i64),
    ) -> Result<Lease, SqliteError> {
        let q = |e| self.query_error(e);
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
            key: key.clone(),
        })
    }

    /// The rows [`rules::plan_due`] reads for `specs`' jobs (the first spec of a job counts).
    pub(crate) async fn active_rows(
        &self,
        executor: impl sqlx::SqliteExecutor<'_>,
        specs: &[&DueSpec],
        now: i64,
        limit: usize,
    ) -> Result<Vec<RowFacts>, SqliteError> {
        let window = i64::try_from(limit.saturating_mul(4).saturating_add(64)).unwrap_or(i64::MAX);
        // Queued slots that fall due within a spec's lead are read too; the rules pick.
        let lead = specs.iter().map(|s| s.lead()).max();
        let lead = lead.map_or(0, |l| i64::try_from(l.as_millis()).unwrap_or(0));
        let mut query =
            sqlx::query_as::<_, FactsRow>(sqlx::AssertSqlSafe(active_rows_sql(specs.len())))
                .bind(now.saturating_add(lead))
                .bind(window);
        for spec in specs {
            query = query.bind(spec.job.as_str());
        }
        let rows = query
            .fetch_all(executor)
            .await
            .map_err(|e| self.query_error(e))?;
        rows.into_iter().map(|row| self.facts(row)).collect()
    }

    /// See [`SlotStore::claim_due`](slotguard::store::SlotStore::claim_due).
    pub(crate) async fn claim_due(
        &self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> Result<Vec<DueClaim>, SqliteError> {
        let unique = first_of_each_job(specs);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let rows = self.active_rows(&mut *w.tx, &unique, now, limit).await?;
        let plan = rules::plan_due(specs, &rows, at(now), limit);
        for (id, change) in plan.decide.iter().chain(&plan.bury).chain(&plan.fence) {
            self.change(&mut w, *id, *change, now).await?;
        }
        let mut claimed = Vec::with_capacity(plan.claim.len());
        for id in &plan.claim {
            let Some(row) = rows.iter().find(|r| r.id == *id) else {
                continue;
            };
            let (lease, taken) = self
                .take_over(&mut w, (owner, &row.key), now, *id, None)
                .await?;
            claimed.push(self.due_claim(row.key.clone(), lease, taken)?);
        }
        w.tx.commit().await.map_err(|e| self.query_error(e))?;
        Event::emit_all(&plan.events(&rows));
        Ok(claimed)
    }

    /// A due claim's answer, from the row [`TAKE_OVER`] returned.
    fn due_claim(
        &self,
        key: SlotKey,
        lease: Lease,
        (_, _, trigger, zone, wall, business_date, trace_parent): TakenRow,
    ) -> Result<DueClaim, SqliteError> {
        let run_id = lease.run_id;
        Ok(DueClaim {
            key,
            lease,
            trigger: parse_trigger(&trigger)
                .ok_or_else(|| self.corrupt(run_id, "trigger", &trigger))?,
            zone,
            wall: NaiveDateTime::parse_from_str(&wall, "%Y-%m-%dT%H:%M:%S%.f")
                .map_err(|_| self.corrupt(run_id, "wall_time", &wall))?,
            business_date: NaiveDate::parse_from_str(&business_date, "%Y-%m-%d")
                .map_err(|_| self.corrupt(run_id, "business_date", &business_date))?,
            trace_parent,
        })
    }
}

/// One spec per job: the first counts, as in the rules.
pub(crate) fn first_of_each_job(specs: &[DueSpec]) -> Vec<&DueSpec> {
    let mut unique: Vec<&DueSpec> = Vec::with_capacity(specs.len());
    for spec in specs {
        if !unique.iter().any(|s| s.job == spec.job) {
            unique.push(spec);
        }
    }
    unique
}

/// The store's clock as an instant.
pub(crate) fn at(now_ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(now_ms).unwrap_or_default()
}
