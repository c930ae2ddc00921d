//! [`ScheduleStore`] for SQLite: schedules kept as data in `slotguard_job_schedules`, one row per
//! version, and operators' skips of upcoming slots.
//!
//! Every write, and every read of the changes ([`ScheduleStore::schedule_changes`]), is one
//! `BEGIN IMMEDIATE` transaction that reads the host clock inside it: they queue on SQLite's write
//! lock, so a change a read missed was written, and its clock read, after that read's `fresh_at`.
//! A write checks the version it was read at, appends the next one with its audit record, and
//! commits them together.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use slotguard::store::schedules::{
    SKIPPED_BY_OPERATOR, ScheduleChanges, ScheduleSpec, ScheduleStore, ScheduleVersion,
    ScheduleWrite, audit_action, audit_reason, effective_at, operator_skip_message, written,
};
use slotguard::store::{AuditEntry, ClaimRequest, RunStatus, SlotKey, StoreError};
use sqlx::sqlite::SqliteRow;

use crate::error::SqliteError;
use crate::inspect::Decoder;
use crate::slots::STATUS_OF;
use crate::{Shared, SqliteBackend, WriteTx};

/// The columns of a version that [`Shared::version`] reads.
macro_rules! columns {
    () => {
        "seq, schedule_id, version, removed, job_name, cron, zone, dst, partition_key, start_at, \
         end_at, remaining_runs, paused, note, effective_at, changed_by, changed_at, reason, \
         pause_on_failure"
    };
}

/// The latest version of schedule `?1`: its number, when it takes effect, whether it removed the
/// schedule, and the job of its latest version with a spec (the removed schedule's job).
const LATEST: &str = "
SELECT s.version, s.effective_at, s.removed,
       (SELECT j.job_name FROM slotguard_job_schedules AS j
        WHERE j.schedule_id = ?1 AND j.removed = 0
        ORDER BY j.version DESC LIMIT 1) AS job_name
FROM slotguard_job_schedules AS s
WHERE s.schedule_id = ?1
ORDER BY s.version DESC
LIMIT 1";

/// Appends a version; answers its `seq`.
const INSERT_VERSION: &str = "
INSERT INTO slotguard_job_schedules (
    schedule_id, version, removed, job_name, cron, zone, dst, partition_key, start_at, end_at,
    remaining_runs, paused, note, effective_at, changed_by, changed_at, reason, pause_on_failure)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
RETURNING seq";

/// The versions written after `?1`, in the order they were written, at most `?2`.
const CHANGES: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM slotguard_job_schedules WHERE seq > ?1 ORDER BY seq LIMIT ?2"
);

/// The latest version of each schedule that is not removed, of job `?1` (any when NULL), with an
/// id after `?2` (any when NULL), by id, at most `?3`.
const LIST: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM slotguard_job_schedules AS s
WHERE s.removed = 0 AND (?1 IS NULL OR s.job_name = ?1) AND (?2 IS NULL OR s.schedule_id > ?2)
  AND s.version = (SELECT max(m.version) FROM slotguard_job_schedules AS m
                   WHERE m.schedule_id = s.schedule_id)
ORDER BY s.schedule_id
LIMIT ?3"
);

/// Every version of schedule `?1`, oldest first.
const HISTORY: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM slotguard_job_schedules WHERE schedule_id = ?1 ORDER BY version"
);

/// Deletes the row of slot (`?1` job, `?2` instant, `?3` partition) if an operator's skip wrote it
/// (`skipped`, its message starting with `?4`) and nothing ever claimed it (no attempt); answers
/// its id. Attempts would go with it (`ON DELETE CASCADE`), but there are none.
const UNSKIP: &str = "
DELETE FROM slotguard_job_runs
WHERE job_name = ?1 AND scheduled_at = ?2 AND partition_key = ?3 AND status = 'skipped'
  AND substr(error_message, 1, length(?4)) = ?4
  AND NOT EXISTS (SELECT 1 FROM slotguard_job_run_attempts AS a
                  WHERE a.run_id = slotguard_job_runs.id)
RETURNING id";

/// What [`LATEST`] answers.
struct Latest {
    version: i64,
    effective_at: DateTime<Utc>,
    removed: bool,
    job: Option<String>,
}

/// A caller's limit as SQL's: never less than asked, so that a short page means the end.
fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Shared {
    fn schedule_instant(
        &self,
        id: &str,
        what: &'static str,
        ms: i64,
    ) -> Result<DateTime<Utc>, SqliteError> {
        DateTime::from_timestamp_millis(ms)
            .ok_or_else(|| self.corrupt_record("slotguard_job_schedules", id, what, ms))
    }

    fn optional_schedule_instant(
        &self,
        id: &str,
        what: &'static str,
        ms: Option<i64>,
    ) -> Result<Option<DateTime<Utc>>, SqliteError> {
        ms.map(|ms| self.schedule_instant(id, what, ms)).transpose()
    }

    /// A version from the [`columns!`].
    fn version(&self, row: &SqliteRow) -> Result<ScheduleVersion, SqliteError> {
        let d = Decoder { shared: self };
        let id: String = d.get(row, "schedule_id")?;
        let removed: i64 = d.get(row, "removed")?;
        let spec = if removed != 0 {
            None
        } else {
            let remaining: Option<i64> = d.get(row, "remaining_runs")?;
            let paused: i64 = d.get(row, "paused")?;
            let pause_on_failure: i64 = d.get(row, "pause_on_failure")?;
            Some(ScheduleSpec {
                job: d.get(row, "job_name")?,
                cron: d.get(row, "cron")?,
                zone: d.get(row, "zone")?,
                dst: d.get(row, "dst")?,
                partition: d.get(row, "partition_key")?,
                start_at: self.optional_schedule_instant(
                    &id,
                    "start_at",
                    d.get(row, "start_at")?,
                )?,
                end_at: self.optional_schedule_instant(&id, "end_at", d.get(row, "end_at")?)?,
                remaining_runs: remaining
                    .map(|n| {
                        u32::try_from(n).map_err(|_| {
                            self.corrupt_record("slotguard_job_schedules", &id, "remaining_runs", n)
                        })
                    })
                    .transpose()?,
                paused: paused != 0,
                note: d.get(row, "note")?,
                pause_on_failure: pause_on_failure != 0,
            })
        };
        Ok(ScheduleVersion {
            version: d.get(row, "version")?,
            spec,
            effective_at: self.schedule_instant(
                &id,
                "effective_at",
                d.get(row, "effective_at")?,
            )?,
            changed_by: d.get(row, "changed_by")?,
            changed_at: self.schedule_instant(&id, "changed_at", d.get(row, "changed_at")?)?,
            reason: d.get(row, "reason")?,
            seq: d.get(row, "seq")?,
            id,
        })
    }

    fn versions(&self, rows: &[SqliteRow]) -> Result<Vec<ScheduleVersion>, SqliteError> {
        rows.iter().map(|row| self.version(row)).collect()
    }

    /// The latest version of schedule `id`, in the write's transaction.
    async fn latest(&self, w: &mut WriteTx<'_>, id: &str) -> Result<Option<Latest>, SqliteError> {
        let row: Option<(i64, i64, i64, Option<String>)> = sqlx::query_as(LATEST)
            .bind(id)
            .fetch_optional(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        row.map(|(version, effective_ms, removed, job)| {
            Ok(Latest {
                version,
                effective_at: self.schedule_instant(id, "effective_at", effective_ms)?,
                removed: removed != 0,
                job,
            })
        })
        .transpose()
    }

    /// Appends `version` (whose `seq` is not known yet); answers its `seq`.
    async fn insert_version(
        &self,
        w: &mut WriteTx<'_>,
        version: &ScheduleVersion,
    ) -> Result<i64, SqliteError> {
        let spec = version.spec.as_ref();
        let ms = |t: Option<DateTime<Utc>>| t.map(|t| t.timestamp_millis());
        sqlx::query_scalar(INSERT_VERSION)
            .bind(&version.id)
            .bind(version.version)
            .bind(i64::from(spec.is_none()))
            .bind(spec.map(|s| s.job.as_str()))
            .bind(spec.map(|s| s.cron.as_str()))
            .bind(spec.map(|s| s.zone.as_str()))
            .bind(spec.map(|s| s.dst.as_str()))
            .bind(spec.map(|s| s.partition.as_str()))
            .bind(ms(spec.and_then(|s| s.start_at)))
            .bind(ms(spec.and_then(|s| s.end_at)))
            .bind(spec.and_then(|s| s.remaining_runs).map(i64::from))
            .bind(spec.map(|s| i64::from(s.paused)))
            .bind(spec.and_then(|s| s.note.as_deref()))
            .bind(version.effective_at.timestamp_millis())
            .bind(&version.changed_by)
            .bind(version.changed_at.timestamp_millis())
            .bind(&version.reason)
            .bind(spec.map(|s| i64::from(s.pause_on_failure)))
            .fetch_one(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))
    }

    async fn write_schedule(
        &self,
        id: &str,
        expected: i64,
        spec: Option<&ScheduleSpec>,
        (by, reason): (&str, &str),
    ) -> Result<ScheduleWrite, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let changed_at = self.schedule_instant(id, "changed_at", now)?;
        let latest = self.latest(&mut w, id).await?;
        let current = latest.as_ref().map_or(0, |l| l.version);
        if current != expected {
            w.tx.rollback().await.map_err(q)?;
            return Ok(ScheduleWrite::Stale { current });
        }
        let mut version = ScheduleVersion {
            id: id.to_owned(),
            version: current + 1,
            spec: spec.cloned(),
            effective_at: effective_at(changed_at, latest.as_ref().map(|l| l.effective_at)),
            changed_by: by.to_owned(),
            changed_at,
            reason: reason.to_owned(),
            seq: 0,
        };
        version.seq = self.insert_version(&mut w, &version).await?;
        let existed = latest.as_ref().is_some_and(|l| !l.removed);
        let job = match spec {
            Some(s) => Some(s.job.as_str()),
            None => latest.as_ref().and_then(|l| l.job.as_deref()),
        };
        let action = audit_action(existed, spec);
        let audit = audit_reason(id, version.version, reason);
        let entry = AuditEntry::new(action, by, &audit);
        self.audit(&mut w, job.unwrap_or_default(), None, &entry, now)
            .await?;
        w.tx.commit().await.map_err(q)?;
        Ok(written(version, action, by))
    }

    async fn schedule_changes(&self, after: i64, n: usize) -> Result<ScheduleChanges, SqliteError> {
        let q = |e| self.query_error(e);
        // A write transaction, though it only reads: it queues with the writes, so every change
        // not read here is written after the clock read here.
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let rows = sqlx::query(CHANGES)
            .bind(after)
            .bind(limit(n))
            .fetch_all(&mut *w.tx)
            .await
            .map_err(q)?;
        w.tx.rollback().await.map_err(q)?;
        Ok(ScheduleChanges {
            versions: self.versions(&rows)?,
            fresh_at: self.schedule_instant("", "fresh_at", now)?,
        })
    }

    async fn skip_slot(
        &self,
        request: &ClaimRequest,
        by: &str,
        reason: &str,
    ) -> Result<bool, SqliteError> {
        let q = |e| self.query_error(e);
        let key = &request.key;
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        if self.slot_row(&mut w, key).await?.is_some() {
            w.tx.rollback().await.map_err(q)?;
            return Ok(false);
        }
        let message = operator_skip_message(reason);
        let skipped = (RunStatus::Skipped, Some(message.as_str()), None);
        self.insert_idle(&mut w, request, skipped, now).await?;
        let Some(run_id) = self.slot_row(&mut w, key).await? else {
            return Err(q(sqlx::Error::RowNotFound));
        };
        let run = Some((run_id, key.scheduled_at));
        self.audit(
            &mut w,
            &key.job,
            run,
            &AuditEntry::new("skip", by, reason),
            now,
        )
        .await?;
        w.tx.commit().await.map_err(q)?;
        tracing::info!(
            event = "slot_skipped_by_operator",
            job = ?key.job,
            slot = %key.scheduled_at,
            partition = ?key.partition,
            run_id,
            actor = ?by,
            "upcoming slot skipped"
        );
        Ok(true)
    }

    /// The id of the row of slot `key`, in the write's transaction.
    async fn slot_row(
        &self,
        w: &mut WriteTx<'_>,
        key: &SlotKey,
    ) -> Result<Option<i64>, SqliteError> {
        let row: Option<(i64, String)> = sqlx::query_as(STATUS_OF)
            .bind(&key.job)
            .bind(key.scheduled_at.timestamp_millis())
            .bind(&key.partition)
            .fetch_optional(&mut *w.tx)
            .await
            .map_err(|e| self.query_error(e))?;
        Ok(row.map(|(id, _)| id))
    }

    async fn unskip_slot(
        &self,
        key: &SlotKey,
        by: &str,
        reason: &str,
    ) -> Result<bool, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let deleted: Option<i64> = sqlx::query_scalar(UNSKIP)
            .bind(&key.job)
            .bind(key.scheduled_at.timestamp_millis())
            .bind(&key.partition)
            .bind(SKIPPED_BY_OPERATOR)
            .fetch_optional(&mut *w.tx)
            .await
            .map_err(q)?;
        let Some(run_id) = deleted else {
            w.tx.rollback().await.map_err(q)?;
            return Ok(false);
        };
        let run = Some((run_id, key.scheduled_at));
        self.audit(
            &mut w,
            &key.job,
            run,
            &AuditEntry::new("unskip", by, reason),
            now,
        )
        .await?;
        w.tx.commit().await.map_err(q)?;
        tracing::info!(
            event = "slot_unskipped_by_operator",
            job = ?key.job,
            slot = %key.scheduled_at,
            partition = ?key.partition,
            run_id,
            actor = ?by,
            "operator's skip undone"
        );
        Ok(true)
    }
}

/// Writes, skips and reads of the changes are one `BEGIN IMMEDIATE` transaction each, with the
/// host clock read inside it; listings and histories read one snapshot on the pool.
///
/// # Cancel safety
///
/// Dropping a call's future before it completes rolls its transaction back: nothing is written.
#[async_trait]
impl ScheduleStore for SqliteBackend {
    async fn write_schedule(
        &self,
        id: &str,
        expected: i64,
        spec: Option<&ScheduleSpec>,
        by: &str,
        reason: &str,
    ) -> Result<ScheduleWrite, StoreError> {
        Ok(self
            .shared()
            .write_schedule(id, expected, spec, (by, reason))
            .await?)
    }

    async fn schedule_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<ScheduleChanges, StoreError> {
        Ok(self.shared().schedule_changes(after, limit).await?)
    }

    async fn schedules(
        &self,
        job: Option<&str>,
        after_id: Option<&str>,
        n: usize,
    ) -> Result<Vec<ScheduleVersion>, StoreError> {
        let shared = self.shared();
        let rows = sqlx::query(LIST)
            .bind(job)
            .bind(after_id)
            .bind(limit(n))
            .fetch_all(&shared.pool)
            .await
            .map_err(|e| shared.query_error(e))?;
        Ok(shared.versions(&rows)?)
    }

    async fn schedule_history(&self, id: &str) -> Result<Vec<ScheduleVersion>, StoreError> {
        let shared = self.shared();
        let rows = sqlx::query(HISTORY)
            .bind(id)
            .fetch_all(&shared.pool)
            .await
            .map_err(|e| shared.query_error(e))?;
        Ok(shared.versions(&rows)?)
    }

    async fn skip_slot(
        &self,
        request: &ClaimRequest,
        by: &str,
        reason: &str,
    ) -> Result<bool, StoreError> {
        Ok(self.shared().skip_slot(request, by, reason).await?)
    }

    async fn unskip_slot(&self, key: &SlotKey, by: &str, reason: &str) -> Result<bool, StoreError> {
        Ok(self.shared().unskip_slot(key, by, reason).await?)
    }
}
