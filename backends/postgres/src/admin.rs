//! [`AdminStore`] for PostgreSQL: job definitions and pauses, run listings, retries, manual and
//! backfill runs, cancellation and the audit trail, each one statement or one transaction, judged by
//! the database clock.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use slotguard::store::{
    AdminStore, AuditEntry, AuditRecord, Enqueue, JobDefinition, JobRecord, RunChange, RunCounts,
    RunFilter, RunRecord, RunStatus, SlotKey, StoreError,
};
use sqlx::Row;

use crate::claims::RequestColumns;
use crate::error::PgError;
use crate::sql::sql;
use crate::{PgBackend, inspect};

/// The most runs or audit records one read returns.
const MAX_LIST: usize = 10_000;

/// How many times a retry or cancel tries its change: again only when the status read after a
/// change that did not apply allows it (a concurrent writer changed the run in between).
const RACE_ROUNDS: usize = 3;

fn capped(requested: usize) -> i64 {
    i64::try_from(requested.min(MAX_LIST)).unwrap_or(0)
}

/// `rows`, when the statement answered one row per job asked for.
fn answered_for<T>(jobs: &[String], rows: Vec<T>, statement: &str) -> Result<Vec<T>, StoreError> {
    if rows.len() != jobs.len() {
        return Err(StoreError::rejected(format!(
            "{statement} answered {} rows for {} jobs",
            rows.len(),
            jobs.len()
        )));
    }
    Ok(rows)
}

/// An instant as a bound on a `timestamptz` column (whole microseconds), rounded up: for such a
/// column `c`, `c >= t` exactly when `c >= ceil_us(t)`, and `c < t` exactly when `c < ceil_us(t)`.
/// Bound as it is, the driver would cut the nanoseconds off, and `from` just after a slot would
/// include it.
fn ceil_us(t: DateTime<Utc>) -> DateTime<Utc> {
    let rest = t.timestamp_subsec_nanos() % 1_000;
    if rest == 0 {
        return t;
    }
    t.checked_add_signed(chrono::Duration::nanoseconds(i64::from(1_000 - rest)))
        .unwrap_or(t)
}

impl PgBackend {
    /// The status of the run with `key`, if one exists (a statement of its own, so that it sees
    /// what concurrent changes committed).
    async fn run_status(&self, key: &SlotKey) -> Result<Option<RunStatus>, PgError> {
        let status: Option<String> = self
            .fetch_optional(
                sqlx::query_scalar(sql(&self.inner.statements.run_status))
                    .bind(&key.job)
                    .bind(key.scheduled_at)
                    .bind(&key.partition),
            )
            .await?;
        status.as_deref().map(inspect::parse_status).transpose()
    }

    async fn try_retry(&self, key: &SlotKey, audit: &AuditEntry) -> Result<Option<i64>, PgError> {
        Ok(self
            .fetch_optional(
                sqlx::query_scalar(sql(&self.inner.statements.retry))
                    .bind(&key.job)
                    .bind(key.scheduled_at)
                    .bind(&key.partition)
                    .bind(&audit.action)
                    .bind(&audit.actor)
                    .bind(&audit.reason),
            )
            .await?)
    }

    /// One transaction: the run, then its running attempt and the audit record.
    async fn try_cancel(&self, key: &SlotKey, audit: &AuditEntry) -> Result<Option<i64>, PgError> {
        let st = &self.inner.statements;
        let message = format!("cancelled by {}: {}", audit.actor, audit.reason);
        let p = self.prepared();
        let mut tx = self.begin().await?;
        let run_id: Option<i64> = sqlx::query_scalar(sql(&st.cancel_run))
            .persistent(p)
            .bind(&key.job)
            .bind(key.scheduled_at)
            .bind(&key.partition)
            .bind(&message)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(run_id) = run_id else {
            tx.rollback().await?;
            return Ok(None);
        };
        sqlx::query(sql(&st.cancel_attempt))
            .persistent(p)
            .bind(run_id)
            .bind(&message)
            .bind(&key.job)
            .bind(key.scheduled_at)
            .bind(&audit.action)
            .bind(&audit.actor)
            .bind(&audit.reason)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(run_id))
    }
}

const RETRYABLE: &[RunStatus] = &[
    RunStatus::Failed,
    RunStatus::Dead,
    RunStatus::Abandoned,
    RunStatus::Skipped,
];

const CANCELLABLE: &[RunStatus] = &[RunStatus::Running, RunStatus::Pending];

#[async_trait]
impl AdminStore for PgBackend {
    /// One upsert for every definition.
    async fn register_jobs(&self, jobs: &[JobDefinition]) -> Result<(), StoreError> {
        if jobs.is_empty() {
            return Ok(());
        }
        let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
        let crons: Vec<&str> = jobs.iter().map(|j| j.cron.as_str()).collect();
        let zones: Vec<&str> = jobs.iter().map(|j| j.zone.as_str()).collect();
        let dsts: Vec<&str> = jobs.iter().map(|j| j.dst.as_str()).collect();
        let guards: Vec<&str> = jobs.iter().map(|j| j.guard.as_str()).collect();
        let fingerprints: Vec<i64> = jobs
            .iter()
            .map(|j| inspect::fingerprint_to_db(j.fingerprint))
            .collect();
        let calendars: Vec<Option<String>> = jobs
            .iter()
            .map(|j| {
                j.calendar
                    .as_ref()
                    .map(slotguard::CalendarDefinition::to_stored)
            })
            .collect();
        self.execute(
            sqlx::query(sql(&self.inner.statements.register_jobs))
                .bind(&names)
                .bind(&crons)
                .bind(&zones)
                .bind(&dsts)
                .bind(&guards)
                .bind(&fingerprints)
                .bind(&calendars),
        )
        .await
        .map_err(PgError::from)?;
        Ok(())
    }

    async fn jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        let rows = self
            .fetch_all(sqlx::query(sql(&self.inner.statements.jobs)))
            .await
            .map_err(PgError::from)?;
        rows.iter()
            .map(inspect::job)
            .collect::<Result<Vec<_>, PgError>>()
            .map_err(StoreError::from)
    }

    /// One statement: the job row and its audit record.
    async fn set_paused(
        &self,
        job: &str,
        paused: bool,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError> {
        let changed: i64 = self
            .fetch_one(
                sqlx::query_scalar(sql(&self.inner.statements.set_paused))
                    .bind(job)
                    .bind(paused)
                    .bind(&audit.action)
                    .bind(&audit.actor)
                    .bind(&audit.reason),
            )
            .await
            .map_err(PgError::from)?;
        Ok(changed > 0)
    }

    /// One statement (runs joined with their attempts); at most 10,000 runs.
    async fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        // The statement leaves out the filters that are NULL (`$1 IS NULL OR …`); a cached generic
        // plan can use no index for them and reads every row (300 ms at a million runs). Planned
        // with the filter's values, it uses the index of the filters given.
        let p = self.prepared();
        let mut tx = self.begin().await.map_err(PgError::from)?;
        sqlx::query("SET LOCAL plan_cache_mode = force_custom_plan")
            .persistent(p)
            .execute(&mut *tx)
            .await
            .map_err(PgError::from)?;
        let rows = sqlx::query(sql(&self.inner.statements.list_runs))
            .persistent(p)
            .bind(filter.job.as_deref())
            .bind(filter.status.map(RunStatus::as_str))
            .bind(filter.partition.as_deref())
            .bind(filter.from.map(ceil_us))
            .bind(filter.to.map(ceil_us))
            .bind(capped(filter.limit))
            .fetch_all(&mut *tx)
            .await
            .map_err(PgError::from)?;
        tx.commit().await.map_err(PgError::from)?;
        inspect::fold_runs(rows).map_err(StoreError::from)
    }

    /// One statement for every job (an index probe each).
    async fn run_counts(&self, failed_since: DateTime<Utc>) -> Result<Vec<RunCounts>, StoreError> {
        let rows: Vec<(String, i64, i64, i64)> = self
            .fetch_all(sqlx::query_as(sql(&self.inner.statements.run_counts)).bind(failed_since))
            .await
            .map_err(PgError::from)?;
        Ok(rows
            .into_iter()
            .map(|(job, running, queued, failed)| {
                RunCounts::from_counts(job, running, queued, failed)
            })
            .collect())
    }

    async fn latest_runs(&self, jobs: &[String]) -> Result<Vec<Option<RunRecord>>, StoreError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self
            .fetch_all(sqlx::query(sql(&self.inner.statements.latest_runs)).bind(jobs))
            .await
            .map_err(PgError::from)?;
        let mut newest: std::collections::HashMap<String, RunRecord> = inspect::fold_runs(rows)?
            .into_iter()
            .map(|run| (run.key.job.clone(), run))
            .collect();
        Ok(jobs.iter().map(|job| newest.remove(job)).collect())
    }

    async fn slot_times(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>, StoreError> {
        let times: Vec<DateTime<Utc>> = self
            .fetch_all(
                sqlx::query_scalar(sql(&self.inner.statements.slot_times))
                    .bind(job)
                    .bind(ceil_us(from))
                    .bind(ceil_us(to)),
            )
            .await
            .map_err(PgError::from)?;
        Ok(times)
    }

    /// One statement for every job.
    async fn slot_times_of(
        &self,
        jobs: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Vec<DateTime<Utc>>>, StoreError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let mut times: Vec<Vec<DateTime<Utc>>> = self
            .fetch_all(
                sqlx::query_scalar(sql(&self.inner.statements.slot_times_of))
                    .bind(jobs)
                    .bind(ceil_us(from))
                    .bind(ceil_us(to)),
            )
            .await
            .map_err(PgError::from)?;
        for job in &mut times {
            job.dedup();
        }
        answered_for(jobs, times, "slot_times_of")
    }

    /// One statement for every job.
    async fn latest_slots(
        &self,
        jobs: &[String],
    ) -> Result<Vec<Option<DateTime<Utc>>>, StoreError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let latest: Vec<Option<DateTime<Utc>>> = self
            .fetch_all(sqlx::query_scalar(sql(&self.inner.statements.latest_slots)).bind(jobs))
            .await
            .map_err(PgError::from)?;
        answered_for(jobs, latest, "latest_slots")
    }

    /// One statement (the run and its audit record); when it changes nothing, a second one reads
    /// the status that refused it.
    async fn retry(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError> {
        let mut seen = RunStatus::Failed;
        for _ in 0..RACE_ROUNDS {
            if let Some(run_id) = self.try_retry(key, audit).await? {
                return Ok(RunChange::Done { run_id });
            }
            match self.run_status(key).await? {
                None => return Ok(RunChange::NotFound),
                Some(status) if !RETRYABLE.contains(&status) => {
                    return Ok(RunChange::Refused { status });
                }
                // Retryable again: it changed between the two statements. Try again.
                Some(status) => seen = status,
            }
        }
        Ok(RunChange::Refused { status: seen })
    }

    /// One statement for the batch (runs and audit records).
    async fn enqueue(
        &self,
        runs: &[Enqueue],
        audit: &AuditEntry,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let requests: Vec<_> = runs.iter().map(|r| r.request.clone()).collect();
        let not_before: Vec<DateTime<Utc>> = runs.iter().map(|r| r.not_before).collect();
        let cols = RequestColumns::new(&requests);
        let query = cols
            .bind(sqlx::query(sql(&self.inner.statements.enqueue)).bind(&not_before))
            .bind(&audit.action)
            .bind(&audit.actor)
            .bind(&audit.reason);
        let rows = self
            .fetch_all(cols.bind_calendars(query))
            .await
            .map_err(PgError::from)?;
        if rows.len() != runs.len() {
            return Err(StoreError::rejected(format!(
                "enqueue answered {} rows for {} requests",
                rows.len(),
                runs.len()
            )));
        }
        let ids = rows
            .iter()
            .map(|row| row.try_get::<Option<i64>, _>("id"))
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(|e| StoreError::from(PgError::from(e)))?;
        if ids.iter().any(Option::is_some) {
            // Workers wake for manual, backfill and catch-up runs as for queued slots.
            self.notify_due().await?;
        }
        Ok(ids)
    }

    /// One transaction (the run, its running attempt, the audit record); when it changes nothing,
    /// a second statement reads the status that refused it.
    async fn cancel(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError> {
        let mut seen = RunStatus::Running;
        for _ in 0..RACE_ROUNDS {
            if let Some(run_id) = self.try_cancel(key, audit).await? {
                return Ok(RunChange::Done { run_id });
            }
            match self.run_status(key).await? {
                None => return Ok(RunChange::NotFound),
                Some(status) if !CANCELLABLE.contains(&status) => {
                    return Ok(RunChange::Refused { status });
                }
                // Cancellable again: it changed between the two statements. Try again.
                Some(status) => seen = status,
            }
        }
        Ok(RunChange::Refused { status: seen })
    }

    async fn audit_page(
        &self,
        job: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let rows = self
            .fetch_all(
                sqlx::query(sql(&self.inner.statements.audit_log))
                    .bind(job)
                    .bind(capped(limit))
                    .bind(before),
            )
            .await
            .map_err(PgError::from)?;
        rows.iter()
            .map(inspect::audit)
            .collect::<Result<Vec<_>, PgError>>()
            .map_err(StoreError::from)
    }
}
