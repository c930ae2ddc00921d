//! [`CalendarStore`] for SQLite: operators' holiday overrides in `slotguard_calendar_overrides`,
//! one row per override.
//!
//! A write, and a read of the overrides written after a `seq`, is one `BEGIN IMMEDIATE`
//! transaction that reads the host clock inside it, as the stored schedules' are: an override a
//! read missed was written, and its clock read, after that read's `fresh_at`.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use slotguard::store::calendars::{
    CalendarOverride, CalendarStore, OverrideChanges, OverrideSpec, check_override,
    override_action, override_audit_reason, override_effective_at, override_written,
};
use slotguard::store::{AuditEntry, StoreError};
use sqlx::sqlite::SqliteRow;

use crate::error::SqliteError;
use crate::inspect::Decoder;
use crate::{Shared, SqliteBackend};

const TABLE: &str = "slotguard_calendar_overrides";

/// Appends an override; answers its `seq`.
const INSERT: &str = "
INSERT INTO slotguard_calendar_overrides (
    calendar_name, holiday_date, kind, holiday_name, reason, changed_by, changed_at, effective_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
RETURNING seq";

/// When the latest override takes effect (none: NULL).
const LAST_EFFECTIVE: &str = "SELECT max(effective_at) FROM slotguard_calendar_overrides";

/// The overrides written after `?1`, oldest first, at most `?2`.
const CHANGES: &str = "
SELECT seq, calendar_name, holiday_date, kind, holiday_name, reason, changed_by, changed_at,
       effective_at
FROM slotguard_calendar_overrides WHERE seq > ?1 ORDER BY seq LIMIT ?2";

impl Shared {
    fn override_instant(
        &self,
        seq: i64,
        what: &'static str,
        ms: i64,
    ) -> Result<DateTime<Utc>, SqliteError> {
        DateTime::from_timestamp_millis(ms).ok_or_else(|| self.corrupt_record(TABLE, seq, what, ms))
    }

    /// An override from the columns [`CHANGES`] reads.
    fn calendar_override(&self, row: &SqliteRow) -> Result<CalendarOverride, SqliteError> {
        let d = Decoder { shared: self };
        let seq: i64 = d.get(row, "seq")?;
        let date: String = d.get(row, "holiday_date")?;
        let kind: String = d.get(row, "kind")?;
        Ok(CalendarOverride {
            spec: OverrideSpec {
                calendar: d.get(row, "calendar_name")?,
                date: NaiveDate::parse_from_str(&date, "%Y-%m-%d")
                    .map_err(|_| self.corrupt_record(TABLE, seq, "holiday_date", &date))?,
                kind: kind
                    .parse()
                    .map_err(|_| self.corrupt_record(TABLE, seq, "kind", &kind))?,
                name: d.get(row, "holiday_name")?,
            },
            reason: d.get(row, "reason")?,
            changed_by: d.get(row, "changed_by")?,
            changed_at: self.override_instant(seq, "changed_at", d.get(row, "changed_at")?)?,
            effective_at: self.override_instant(
                seq,
                "effective_at",
                d.get(row, "effective_at")?,
            )?,
            seq,
        })
    }

    async fn write_override(
        &self,
        spec: &OverrideSpec,
        (by, reason): (&str, &str),
    ) -> Result<CalendarOverride, SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let changed_at = self.override_instant(0, "changed_at", now)?;
        let previous: Option<i64> = sqlx::query_scalar(LAST_EFFECTIVE)
            .fetch_one(&mut *w.tx)
            .await
            .map_err(q)?;
        let previous = previous
            .map(|ms| self.override_instant(0, "effective_at", ms))
            .transpose()?;
        let mut written = CalendarOverride {
            spec: spec.clone(),
            reason: reason.to_owned(),
            changed_by: by.to_owned(),
            changed_at,
            effective_at: override_effective_at(changed_at, previous),
            seq: 0,
        };
        written.seq = sqlx::query_scalar(INSERT)
            .bind(&spec.calendar)
            .bind(spec.date.format("%Y-%m-%d").to_string())
            .bind(spec.kind.as_str())
            .bind(&spec.name)
            .bind(reason)
            .bind(by)
            .bind(now)
            .bind(written.effective_at.timestamp_millis())
            .fetch_one(&mut *w.tx)
            .await
            .map_err(q)?;
        let audit = override_audit_reason(spec, reason);
        let entry = AuditEntry::new(override_action(spec.kind), by, &audit);
        self.audit(&mut w, "", None, &entry, now).await?;
        w.tx.commit().await.map_err(q)?;
        Ok(written)
    }

    async fn override_changes(&self, after: i64, n: usize) -> Result<OverrideChanges, SqliteError> {
        let q = |e| self.query_error(e);
        // A write transaction, though it only reads: it queues with the writes (see the module).
        let mut w = self.write().await?;
        let now = self.now(&mut w).await?;
        let rows = sqlx::query(CHANGES)
            .bind(after)
            .bind(i64::try_from(n).unwrap_or(i64::MAX))
            .fetch_all(&mut *w.tx)
            .await
            .map_err(q)?;
        w.tx.rollback().await.map_err(q)?;
        Ok(OverrideChanges {
            overrides: rows
                .iter()
                .map(|row| self.calendar_override(row))
                .collect::<Result<_, _>>()?,
            fresh_at: self.override_instant(0, "fresh_at", now)?,
        })
    }
}

/// Each call is one `BEGIN IMMEDIATE` transaction with the host clock read inside it.
///
/// # Cancel safety
///
/// Dropping a call's future before it completes rolls its transaction back: nothing is written.
#[async_trait]
impl CalendarStore for SqliteBackend {
    async fn write_override(
        &self,
        spec: &OverrideSpec,
        by: &str,
        reason: &str,
    ) -> Result<CalendarOverride, StoreError> {
        check_override(spec, by, reason)?;
        let written = self.shared().write_override(spec, (by, reason)).await?;
        Ok(override_written(written))
    }

    async fn override_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<OverrideChanges, StoreError> {
        Ok(self.shared().override_changes(after, limit).await?)
    }
}
