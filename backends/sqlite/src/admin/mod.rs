//! What operators read and change: registered jobs and their pauses, runs with their attempts,
//! retries, manual and backfill runs, cancellation, and the audit trail.
//!
//! Every change is one `BEGIN IMMEDIATE` transaction that reads the store's clock once (in SQL) and
//! writes its audit record with it, so a change and its record commit together or not at all. Every
//! read is one deferred transaction: one WAL snapshot, so a run's attempts match the run.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use slotguard::store::{
    AdminStore, AuditEntry, AuditRecord, Enqueue, JobDefinition, JobRecord, RunChange, RunCounts,
    RunFilter, RunRecord, RunStatus, SlotKey, StoreError,
};
use sqlx::sqlite::SqliteRow;

use crate::error::SqliteError;
use crate::inspect::{ATTEMPT_COLUMNS, Decoder, parse_status};
use crate::slots::STATUS_OF;
use crate::values::{ADVANCE_TOKEN, date_text, stamp_columns, wall_text};
use crate::{Shared, SqliteBackend, WriteTx, duration_ms, json_array};

use sql::*;

mod sql;

impl Shared {
    pub(crate) fn corrupt_record(
        &self,
        table: &'static str,
        row: impl ToString,
        what: &'static str,
        value: impl ToString,
    ) -> SqliteError {
        SqliteError::CorruptRecord {
            path: self.path.clone(),
            table,
            row: row.to_string(),
            what,
            value: value.to_string(),
        }
    }

    /// Writes one audit record in the change's transaction.
    pub(crate) async fn audit(
        &self,
        w: &mut WriteTx<'_>,
        job: &str,
        run: Option<(i64, DateTime<Utc>)>,
        entry: &AuditEntry,
        now: i64,
    ) -> Result<(), SqliteError> {
        sqlx::query(INSERT_AUDIT)
            .bind(job)
            .bind(run.map(|(id, _)| id))
            .bind(run.map(|(_, at)| at.timestamp_millis()))
            .bind(&entry.action)
            .bind(&entry.actor)
            .bind(&entry.reason)
            .bind(now)
            .execute(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(())
    }

    /// The id and status of the run with `key`, in the change's transaction.
    async fn run_status(
        &self,
        w: &mut WriteTx<'_>,
        key: &SlotKey,
    ) -> Result<Option<(i64, RunStatus)>, SqliteError> {
        let row: Option<(i64, String)> = sqlx::query_as(STATUS_OF)
            .bind(&key.job)
            .bind(key.scheduled_at.timestamp_millis())
            .bind(&key.partition)
            .fetch_optional(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        match row {
            None => Ok(None),
            Some((id, status)) => match parse_status(&status) {
                Some(status) => Ok(Some((id, status))),
                None => Err(SqliteError::Corrupt {
                    path: self.path.clone(),
                    run_id: id,
                    what: "status",
                    value: status,
                }),
            },
        }
    }

    async fn register_jobs(&self, jobs: &[JobDefinition]) -> Result<(), SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        for job in jobs {
            sqlx::query(REGISTER_JOB)
                .bind(&job.name)
                .bind(&job.cron)
                .bind(&job.zone)
                .bind(&job.dst)
                .bind(&job.guard)
                // The fingerprint's bits, reinterpreted: SQLite integers are signed.
                .bind(job.fingerprint as i64)
                .bind(now)
                .bind(
                    job.calendar
                        .as_ref()
                        .map(slotguard::CalendarDefinition::to_stored),
                )
                .execute(&mut *w.tx)
                .await
                .map_err(q)?;
        }
        w.tx.commit().await.map_err(q)?;
        Ok(())
    }

    async fn jobs(&self) -> Result<Vec<JobRecord>, SqliteError> {
        let q = |e| self.query_error(e);
        let rows = sqlx::query(JOBS).fetch_all(&self.pool).await.map_err(q)?;
        let decode = Decoder { shared: self };
        rows.iter()
            .map(|row| {
                let name: String = decode.get(row, "job_name")?;
                let instant = |what: &'static str, ms: i64| {
                    DateTime::from_timestamp_millis(ms)
                        .ok_or_else(|| self.corrupt_record("slotguard_jobs", &name, what, ms))
                };
                let paused: i64 = decode.get(row, "paused")?;
                let fingerprint: i64 = decode.get(row, "schedule_fingerprint")?;
                Ok(JobRecord {
                    definition: JobDefinition {
                        name: name.clone(),
                        cron: decode.get(row, "cron")?,
                        zone: decode.get(row, "zone")?,
                        dst: decode.get(row, "dst")?,
                        guard: decode.get(row, "guard")?,
                        // The bits of the u64 the registration stored.
                        fingerprint: fingerprint as u64,
                        calendar: decode
                            .get::<Option<String>>(row, "calendar")?
                            .as_deref()
                            .map(slotguard::CalendarDefinition::read),
                    },
                    paused: paused != 0,
                    paused_by: decode.get(row, "paused_by")?,
                    paused_reason: decode.get(row, "paused_reason")?,
                    paused_at: match decode.get::<Option<i64>>(row, "paused_at")? {
                        Some(ms) => Some(instant("paused_at", ms)?),
                        None => None,
                    },
                    registered_at: instant("registered_at", decode.get(row, "registered_at")?)?,
                    seen_at: instant("seen_at", decode.get(row, "seen_at")?)?,
                })
            })
            .collect()
    }

    async fn set_paused(
        &self,
        job: &str,
        paused: bool,
        audit: &AuditEntry,
    ) -> Result<bool, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let changed = sqlx::query(SET_PAUSED)
            .bind(job)
            .bind(i64::from(paused))
            .bind(&audit.actor)
            .bind(&audit.reason)
            .bind(now)
            .execute(&mut *w.tx)
            .await
            .map_err(q)?
            .rows_affected();
        if changed == 0 {
            w.tx.rollback().await.map_err(q)?;
            return Ok(false);
        }
        self.audit(&mut w, job, None, audit, now).await?;
        w.tx.commit().await.map_err(q)?;
        tracing::info!(
            event = if paused { "job_paused" } else { "job_resumed" },
            job,
            actor = ?audit.actor,
            reason = ?audit.reason,
            "job pause state changed"
        );
        Ok(true)
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, SqliteError> {
        let q = |e| self.query_error(e);
        let sql = runs_sql(filter);
        // A deferred transaction is one WAL snapshot: the attempts match the runs.
        let mut tx = self.pool.begin().await.map_err(q)?;
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        if let Some(job) = &filter.job {
            query = query.bind(job.as_str());
        }
        if let Some(status) = filter.status {
            query = query.bind(status.as_str());
        }
        if let Some(partition) = &filter.partition {
            query = query.bind(partition.as_str());
        }
        if let Some(from) = filter.from {
            query = query.bind(ceil_ms(from));
        }
        if let Some(to) = filter.to {
            query = query.bind(ceil_ms(to));
        }
        let runs: Vec<SqliteRow> = query
            .bind(capped(filter.limit))
            .fetch_all(&mut *tx)
            .await
            .map_err(q)?;
        let ids = runs
            .iter()
            .map(|row| Decoder { shared: self }.get::<i64>(row, "id"))
            .collect::<Result<Vec<i64>, _>>()?;
        let attempts = if ids.is_empty() {
            Vec::new()
        } else {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {ATTEMPT_COLUMNS}{ATTEMPTS_OF}"
            )))
            .bind(json_array(ids))
            .fetch_all(&mut *tx)
            .await
            .map_err(q)?
        };
        tx.rollback().await.map_err(q)?;
        Decoder { shared: self }.assemble(&runs, &attempts)
    }

    /// The slot times of each job in `jobs`, read in one snapshot.
    async fn slot_times_of(
        &self,
        jobs: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Vec<DateTime<Utc>>>, SqliteError> {
        let q = |e| self.query_error(e);
        let mut tx = self.pool.begin().await.map_err(q)?;
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            let times: Vec<i64> = sqlx::query_scalar(SLOT_TIMES)
                .bind(job.as_str())
                .bind(ceil_ms(from))
                .bind(ceil_ms(to))
                .fetch_all(&mut *tx)
                .await
                .map_err(q)?;
            out.push(
                times
                    .into_iter()
                    .map(|ms| {
                        DateTime::from_timestamp_millis(ms).ok_or_else(|| {
                            self.corrupt_record("slotguard_job_runs", job, "scheduled_at", ms)
                        })
                    })
                    .collect::<Result<_, _>>()?,
            );
        }
        tx.rollback().await.map_err(q)?;
        Ok(out)
    }

    async fn latest_slots(
        &self,
        jobs: &[String],
    ) -> Result<Vec<Option<DateTime<Utc>>>, SqliteError> {
        let q = |e| self.query_error(e);
        // One snapshot for every job.
        let mut tx = self.pool.begin().await.map_err(q)?;
        let mut latest = Vec::with_capacity(jobs.len());
        for job in jobs {
            let ms: Option<i64> = sqlx::query_scalar(LATEST_SLOT)
                .bind(job.as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(q)?;
            latest.push(match ms {
                Some(ms) => Some(DateTime::from_timestamp_millis(ms).ok_or_else(|| {
                    self.corrupt_record("slotguard_job_runs", job, "scheduled_at", ms)
                })?),
                None => None,
            });
        }
        tx.rollback().await.map_err(q)?;
        Ok(latest)
    }

    async fn retry(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        // Under SQLite's write lock from here to the commit: concurrent retries of the run queue, and
        // every one after the first finds it `pending`.
        let run_id = match self.run_status(&mut w, key).await? {
            None => return Ok(RunChange::NotFound),
            Some((
                id,
                RunStatus::Failed | RunStatus::Dead | RunStatus::Abandoned | RunStatus::Skipped,
            )) => id,
            Some((_, status)) => return Ok(RunChange::Refused { status }),
        };
        sqlx::query(RETRY_RUN)
            .bind(run_id)
            .bind(now)
            .execute(&mut *w.tx)
            .await
            .map_err(q)?;
        self.audit(
            &mut w,
            &key.job,
            Some((run_id, key.scheduled_at)),
            audit,
            now,
        )
        .await?;
        w.tx.commit().await.map_err(q)?;
        tracing::info!(
            event = "job_retry_requested",
            job = ?key.job,
            slot = %key.scheduled_at,
            partition = ?key.partition,
            run_id,
            actor = ?audit.actor,
            "run made due for another attempt"
        );
        Ok(RunChange::Done { run_id })
    }

    async fn enqueue(
        &self,
        runs: &[Enqueue],
        audit: &AuditEntry,
    ) -> Result<Vec<Option<i64>>, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let mut answers = Vec::with_capacity(runs.len());
        for run in runs {
            let request = &run.request;
            let key = &request.key;
            let (nominal, calendar, version) = stamp_columns(request.calendar.as_ref());
            let created: Option<(i64, i64)> = sqlx::query_as(ENQUEUE_RUN)
                .bind(&key.job)
                .bind(key.scheduled_at.timestamp_millis())
                .bind(&key.partition)
                .bind(duration_ms(request.stale_after))
                .bind(ceil_ms(run.not_before))
                .bind(now)
                .bind(&request.zone)
                .bind(wall_text(request.wall))
                .bind(date_text(request.business_date))
                .bind(request.trigger.as_str())
                // The fingerprint's bits, reinterpreted: SQLite integers are signed.
                .bind(request.fingerprint as i64)
                .bind(nominal)
                .bind(calendar)
                .bind(version)
                .fetch_optional(&mut *w.tx)
                .await
                .map_err(q)?;
            let Some((run_id, token)) = created else {
                answers.push(None);
                continue;
            };
            sqlx::query(ADVANCE_TOKEN)
                .bind(token)
                .execute(&mut *w.tx)
                .await
                .map_err(q)?;
            self.audit(
                &mut w,
                &key.job,
                Some((run_id, key.scheduled_at)),
                audit,
                now,
            )
            .await?;
            answers.push(Some(run_id));
        }
        w.tx.commit().await.map_err(q)?;
        let created = answers.iter().flatten().count();
        if created > 0 {
            tracing::info!(
                event = "job_enqueued",
                created,
                asked = runs.len(),
                action = ?audit.action,
                actor = ?audit.actor,
                "operator runs enqueued"
            );
        }
        Ok(answers)
    }

    async fn cancel(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let run_id = match self.run_status(&mut w, key).await? {
            None => return Ok(RunChange::NotFound),
            Some((id, RunStatus::Running | RunStatus::Pending)) => id,
            Some((_, status)) => return Ok(RunChange::Refused { status }),
        };
        let message = format!("cancelled by {}: {}", audit.actor, audit.reason);
        sqlx::query(CANCEL_ATTEMPT)
            .bind(run_id)
            .bind(now)
            .bind(&message)
            .execute(&mut *w.tx)
            .await
            .map_err(q)?;
        sqlx::query(CANCEL_RUN)
            .bind(run_id)
            .bind(now)
            .bind(&message)
            .execute(&mut *w.tx)
            .await
            .map_err(q)?;
        self.audit(
            &mut w,
            &key.job,
            Some((run_id, key.scheduled_at)),
            audit,
            now,
        )
        .await?;
        w.tx.commit().await.map_err(q)?;
        tracing::info!(
            event = "job_cancelled",
            job = ?key.job,
            slot = %key.scheduled_at,
            partition = ?key.partition,
            run_id,
            actor = ?audit.actor,
            "run cancelled"
        );
        Ok(RunChange::Done { run_id })
    }

    async fn audit_log(
        &self,
        job: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, SqliteError> {
        let q = |e| self.query_error(e);
        let before = before.unwrap_or(i64::MAX);
        // Two statements rather than `?1 IS NULL OR ...`, so the per-job one uses its index.
        let rows: Vec<SqliteRow> = match job {
            Some(job) => sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {AUDIT_COLUMNS} FROM slotguard_job_run_audit WHERE job_name = ?1 \
                 AND id < ?3 ORDER BY id DESC LIMIT ?2"
            )))
            .bind(job)
            .bind(capped(limit))
            .bind(before),
            None => sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {AUDIT_COLUMNS} FROM slotguard_job_run_audit WHERE id < ?2 \
                 ORDER BY id DESC LIMIT ?1"
            )))
            .bind(capped(limit))
            .bind(before),
        }
        .fetch_all(&self.pool)
        .await
        .map_err(q)?;
        let decode = Decoder { shared: self };
        rows.iter()
            .map(|row| {
                let id: i64 = decode.get(row, "id")?;
                let instant = |what: &'static str, ms: i64| {
                    DateTime::from_timestamp_millis(ms)
                        .ok_or_else(|| self.corrupt_record("slotguard_job_run_audit", id, what, ms))
                };
                Ok(AuditRecord {
                    id,
                    job: decode.get(row, "job_name")?,
                    run_id: decode.get(row, "run_id")?,
                    scheduled_at: match decode.get::<Option<i64>>(row, "scheduled_at")? {
                        Some(ms) => Some(instant("scheduled_at", ms)?),
                        None => None,
                    },
                    entry: AuditEntry {
                        action: decode.get(row, "action")?,
                        actor: decode.get(row, "actor")?,
                        reason: decode.get(row, "reason")?,
                    },
                    at: instant("at", decode.get(row, "at")?)?,
                })
            })
            .collect()
    }
}

/// Every change is one `BEGIN IMMEDIATE` transaction with its audit record; every read one snapshot.
///
/// [`AdminStore::runs`] shares its name with the inherent [`SqliteBackend::runs`], which method-call
/// syntax picks first: call this one as `AdminStore::runs(&backend, &filter)`.
///
/// # Cancel safety
///
/// Dropping a call's future before it completes rolls its transaction back: nothing is written.
#[async_trait]
impl AdminStore for SqliteBackend {
    async fn register_jobs(&self, jobs: &[JobDefinition]) -> Result<(), StoreError> {
        if jobs.is_empty() {
            return Ok(());
        }
        Ok(self.shared().register_jobs(jobs).await?)
    }

    async fn jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        Ok(self.shared().jobs().await?)
    }

    async fn set_paused(
        &self,
        job: &str,
        paused: bool,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError> {
        Ok(self.shared().set_paused(job, paused, audit).await?)
    }

    async fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        Ok(self.shared().list_runs(filter).await?)
    }

    async fn slot_times(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>, StoreError> {
        let jobs = [job.to_owned()];
        let mut times = self.shared().slot_times_of(&jobs, from, to).await?;
        Ok(times.pop().unwrap_or_default())
    }

    async fn slot_times_of(
        &self,
        jobs: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Vec<DateTime<Utc>>>, StoreError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.shared().slot_times_of(jobs, from, to).await?)
    }

    async fn run_counts(&self, failed_since: DateTime<Utc>) -> Result<Vec<RunCounts>, StoreError> {
        let rows: Vec<(String, i64, i64, i64)> = sqlx::query_as(RUN_COUNTS)
            .bind(ceil_ms(failed_since))
            .fetch_all(&self.shared().pool)
            .await
            .map_err(|e| self.shared().query_error(e))?;
        Ok(rows
            .into_iter()
            .map(|(job, running, queued, failed)| {
                RunCounts::from_counts(job, running, queued, failed)
            })
            .collect())
    }

    /// One listing of a single run per job, on the pool.
    async fn latest_runs(&self, jobs: &[String]) -> Result<Vec<Option<RunRecord>>, StoreError> {
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            let job = Some(job.clone());
            let newest = RunFilter {
                job,
                limit: 1,
                ..RunFilter::default()
            };
            out.push(self.shared().list_runs(&newest).await?.pop());
        }
        Ok(out)
    }

    async fn latest_slots(
        &self,
        jobs: &[String],
    ) -> Result<Vec<Option<DateTime<Utc>>>, StoreError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.shared().latest_slots(jobs).await?)
    }

    async fn retry(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError> {
        Ok(self.shared().retry(key, audit).await?)
    }

    async fn enqueue(
        &self,
        runs: &[Enqueue],
        audit: &AuditEntry,
    ) -> Result<Vec<Option<i64>>, StoreError> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.shared().enqueue(runs, audit).await?)
    }

    async fn cancel(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError> {
        Ok(self.shared().cancel(key, audit).await?)
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
        Ok(self.shared().audit_log(job, before, limit).await?)
    }
}
