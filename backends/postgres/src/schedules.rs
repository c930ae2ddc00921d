//! [`ScheduleStore`] for PostgreSQL: schedules kept as data in `job_schedules`, one row per
//! version, and operators' skips of upcoming slots. The statements are in the crate's
//! `sql/schedules.rs`.
//!
//! A write is one transaction that first takes the schedules' advisory lock exclusive, then reads
//! the latest version and the database clock, checks the version it was read at, and appends the
//! next one (its `seq` drawn under the lock) with its audit record. A read of the changes is one
//! transaction that takes the lock shared, then reads the clock (its `fresh_at`), then the versions:
//! a write it missed had to wait for it, and read the clock after it. Both are `READ COMMITTED`
//! whatever the server's default, so that each statement after the lock sees every write
//! committed before it was granted.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use slotguard::store::schedules::{
    SKIPPED_BY_OPERATOR, ScheduleChanges, ScheduleSpec, ScheduleStore, ScheduleVersion,
    ScheduleWrite, audit_action, audit_reason, effective_at, operator_skip_message, written,
};
use slotguard::store::{ClaimRequest, SlotKey, StoreError};
use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row, Transaction};

use crate::PgBackend;
use crate::claims::RequestColumns;
use crate::error::PgError;
use crate::sql::schedules::{SCHEDULE_LOCK, SCHEDULE_LOCK_CLASS, SCHEDULE_LOCK_SHARED};
use crate::sql::sql;

/// Each statement sees what committed before it started; the snapshot of the lock statement, taken
/// before its wait, is not kept.
const READ_COMMITTED: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";

/// The latest version of a schedule, as `LATEST_SCHEDULE` reads it.
struct Latest {
    version: i64,
    effective_at: DateTime<Utc>,
    removed: bool,
    /// The job of its latest version with a spec.
    job: Option<String>,
}

/// The audit record of a write: job, action, reason.
type ScheduleAudit<'a> = (&'a str, &'static str, String);

/// A caller's limit as SQL's: never less than asked, so that a short page means the end.
fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A version from the columns the statements of `sql/schedules.rs` read.
fn version(row: &PgRow) -> Result<ScheduleVersion, PgError> {
    let spec = if row.try_get("removed")? {
        None
    } else {
        let remaining: Option<i64> = row.try_get("remaining_runs")?;
        Some(ScheduleSpec {
            job: row.try_get("job_name")?,
            cron: row.try_get("cron")?,
            zone: row.try_get("zone")?,
            dst: row.try_get("dst")?,
            partition: row.try_get("partition_key")?,
            start_at: row.try_get("start_at")?,
            end_at: row.try_get("end_at")?,
            remaining_runs: remaining
                .map(|n| {
                    u32::try_from(n).map_err(|_| PgError::UnexpectedValue {
                        column: "job_schedules.remaining_runs",
                        value: n.to_string(),
                    })
                })
                .transpose()?,
            paused: row.try_get("paused")?,
            note: row.try_get("note")?,
            pause_on_failure: row.try_get("pause_on_failure")?,
        })
    };
    Ok(ScheduleVersion {
        id: row.try_get("schedule_id")?,
        version: row.try_get("version")?,
        spec,
        effective_at: row.try_get("effective_at")?,
        changed_by: row.try_get("changed_by")?,
        changed_at: row.try_get("changed_at")?,
        reason: row.try_get("reason")?,
        seq: row.try_get("seq")?,
    })
}

fn versions(rows: &[PgRow]) -> Result<Vec<ScheduleVersion>, StoreError> {
    Ok(rows.iter().map(version).collect::<Result<_, _>>()?)
}

impl PgBackend {
    /// A `READ COMMITTED` transaction holding the schedules' lock, `shared` or exclusive.
    pub(crate) async fn schedules_tx(
        &self,
        shared: bool,
    ) -> Result<Transaction<'static, Postgres>, PgError> {
        let mut tx = self.inner.pool.begin_with(READ_COMMITTED).await?;
        sqlx::query(if shared {
            SCHEDULE_LOCK_SHARED
        } else {
            SCHEDULE_LOCK
        })
        .persistent(self.prepared())
        .bind(SCHEDULE_LOCK_CLASS)
        .bind(&self.inner.schema)
        .execute(&mut *tx)
        .await?;
        Ok(tx)
    }

    /// The database clock, and the latest version of schedule `id`, under the lock.
    async fn latest_schedule(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        id: &str,
    ) -> Result<(DateTime<Utc>, Option<Latest>), PgError> {
        let row = sqlx::query(sql(&self.inner.statements.latest_schedule))
            .persistent(self.prepared())
            .bind(id)
            .fetch_one(&mut **tx)
            .await?;
        let now = row.try_get("now")?;
        let latest = match row.try_get::<Option<i64>, _>("version")? {
            None => None,
            Some(version) => Some(Latest {
                version,
                effective_at: row.try_get("effective_at")?,
                removed: row.try_get("removed")?,
                job: row.try_get("job_name")?,
            }),
        };
        Ok((now, latest))
    }

    /// Appends `version` (whose `seq` is not known yet) with its audit record; answers its `seq`.
    async fn insert_schedule(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        version: &ScheduleVersion,
        (job, action, reason): ScheduleAudit<'_>,
    ) -> Result<i64, PgError> {
        let spec = version.spec.as_ref();
        Ok(
            sqlx::query_scalar(sql(&self.inner.statements.insert_schedule))
                .persistent(self.prepared())
                .bind(&version.id)
                .bind(version.version)
                .bind(spec.is_none())
                .bind(spec.map(|s| s.job.as_str()))
                .bind(spec.map(|s| s.cron.as_str()))
                .bind(spec.map(|s| s.zone.as_str()))
                .bind(spec.map(|s| s.dst.as_str()))
                .bind(spec.map(|s| s.partition.as_str()))
                .bind(spec.and_then(|s| s.start_at))
                .bind(spec.and_then(|s| s.end_at))
                .bind(spec.and_then(|s| s.remaining_runs).map(i64::from))
                .bind(spec.map(|s| s.paused))
                .bind(spec.and_then(|s| s.note.as_deref()))
                .bind(version.effective_at)
                .bind(&version.changed_by)
                .bind(version.changed_at)
                .bind(&version.reason)
                .bind(job)
                .bind(action)
                .bind(reason)
                .bind(spec.map(|s| s.pause_on_failure))
                .fetch_one(&mut **tx)
                .await?,
        )
    }

    async fn try_write_schedule(
        &self,
        id: &str,
        expected: i64,
        spec: Option<&ScheduleSpec>,
        (by, reason): (&str, &str),
    ) -> Result<ScheduleWrite, PgError> {
        let mut tx = self.schedules_tx(false).await?;
        let (now, latest) = self.latest_schedule(&mut tx, id).await?;
        let current = latest.as_ref().map_or(0, |l| l.version);
        if current != expected {
            tx.rollback().await?;
            return Ok(ScheduleWrite::Stale { current });
        }
        let mut version = ScheduleVersion {
            id: id.to_owned(),
            version: current + 1,
            spec: spec.cloned(),
            effective_at: effective_at(now, latest.as_ref().map(|l| l.effective_at)),
            changed_by: by.to_owned(),
            changed_at: now,
            reason: reason.to_owned(),
            seq: 0,
        };
        let existed = latest.as_ref().is_some_and(|l| !l.removed);
        let job = match spec {
            Some(s) => Some(s.job.as_str()),
            None => latest.as_ref().and_then(|l| l.job.as_deref()),
        };
        let action = audit_action(existed, spec);
        let audit = (
            job.unwrap_or_default(),
            action,
            audit_reason(id, version.version, reason),
        );
        version.seq = self.insert_schedule(&mut tx, &version, audit).await?;
        tx.commit().await?;
        Ok(written(version, action, by))
    }

    async fn read_schedule_changes(
        &self,
        after: i64,
        n: usize,
    ) -> Result<(DateTime<Utc>, Vec<PgRow>), PgError> {
        let mut tx = self.schedules_tx(true).await?;
        let fresh_at: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
            .persistent(self.prepared())
            .fetch_one(&mut *tx)
            .await?;
        let rows = sqlx::query(sql(&self.inner.statements.schedule_changes))
            .persistent(self.prepared())
            .bind(after)
            .bind(limit(n))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok((fresh_at, rows))
    }
}

/// Writes and reads of the changes are one transaction each under the schedules' advisory lock
/// (exclusive for writes, shared for reads); listings, histories, skips and their undoing are one
/// statement each.
///
/// # Cancel safety
///
/// Dropping a call's future before it completes rolls its transaction back (when the connection
/// is next used or closed): nothing is written.
#[async_trait]
impl ScheduleStore for PgBackend {
    async fn write_schedule(
        &self,
        id: &str,
        expected: i64,
        spec: Option<&ScheduleSpec>,
        by: &str,
        reason: &str,
    ) -> Result<ScheduleWrite, StoreError> {
        Ok(self
            .try_write_schedule(id, expected, spec, (by, reason))
            .await?)
    }

    async fn schedule_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<ScheduleChanges, StoreError> {
        let (fresh_at, rows) = self.read_schedule_changes(after, limit).await?;
        Ok(ScheduleChanges {
            versions: versions(&rows)?,
            fresh_at,
        })
    }

    async fn schedules(
        &self,
        job: Option<&str>,
        after_id: Option<&str>,
        n: usize,
    ) -> Result<Vec<ScheduleVersion>, StoreError> {
        let rows = self
            .fetch_all(
                sqlx::query(sql(&self.inner.statements.schedules))
                    .bind(job)
                    .bind(after_id)
                    .bind(limit(n)),
            )
            .await
            .map_err(PgError::from)?;
        versions(&rows)
    }

    async fn schedule_history(&self, id: &str) -> Result<Vec<ScheduleVersion>, StoreError> {
        let rows = self
            .fetch_all(sqlx::query(sql(&self.inner.statements.schedule_history)).bind(id))
            .await
            .map_err(PgError::from)?;
        versions(&rows)
    }

    /// One statement: the row (`ON CONFLICT DO NOTHING`) and its audit record.
    async fn skip_slot(
        &self,
        request: &ClaimRequest,
        by: &str,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let message = operator_skip_message(reason);
        let requests = std::slice::from_ref(request);
        let columns = RequestColumns::new(requests);
        let query = columns
            .bind(sqlx::query(sql(&self.inner.statements.skip_slot)).bind(&message))
            .bind("skip")
            .bind(by)
            .bind(reason);
        let id: Option<i64> = self
            .fetch_optional(query)
            .await
            .map_err(PgError::from)?
            .map(|row| row.try_get("id"))
            .transpose()
            .map_err(PgError::from)?;
        Ok(id.is_some())
    }

    /// One statement: the delete and its audit record.
    async fn unskip_slot(&self, key: &SlotKey, by: &str, reason: &str) -> Result<bool, StoreError> {
        let id: Option<i64> = self
            .fetch_optional(
                sqlx::query_scalar(sql(&self.inner.statements.unskip_slot))
                    .bind(&key.job)
                    .bind(key.scheduled_at)
                    .bind(&key.partition)
                    .bind(SKIPPED_BY_OPERATOR)
                    .bind("unskip")
                    .bind(by)
                    .bind(reason),
            )
            .await
            .map_err(PgError::from)?;
        Ok(id.is_some())
    }
}
