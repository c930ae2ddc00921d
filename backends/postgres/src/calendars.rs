//! [`CalendarStore`] for PostgreSQL: operators' holiday overrides in `calendar_overrides`, one row
//! per override. The statements are in the crate's `sql/calendars.rs`.
//!
//! A write is one transaction that takes the schedules' advisory lock exclusive, reads the
//! database clock and when the latest override takes effect, and appends the override with its
//! audit record; a read of the overrides after a `seq` takes it shared, then reads the clock (its
//! `fresh_at`), then the rows, as the stored schedules' do.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use slotguard::store::StoreError;
use slotguard::store::calendars::{
    CalendarOverride, CalendarStore, OverrideChanges, OverrideSpec, check_override,
    override_action, override_audit_reason, override_effective_at, override_written,
};
use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::PgBackend;
use crate::error::PgError;
use crate::sql::sql;

/// An override from the columns `OVERRIDE_CHANGES` reads.
fn calendar_override(row: &PgRow) -> Result<CalendarOverride, PgError> {
    let kind: String = row.try_get("kind")?;
    Ok(CalendarOverride {
        spec: OverrideSpec {
            calendar: row.try_get("calendar_name")?,
            date: row.try_get("holiday_date")?,
            kind: kind.parse().map_err(|_| PgError::UnexpectedValue {
                column: "calendar_overrides.kind",
                value: kind.clone(),
            })?,
            name: row.try_get("holiday_name")?,
        },
        reason: row.try_get("reason")?,
        changed_by: row.try_get("changed_by")?,
        changed_at: row.try_get("changed_at")?,
        effective_at: row.try_get("effective_at")?,
        seq: row.try_get("seq")?,
    })
}

impl PgBackend {
    async fn try_write_override(
        &self,
        spec: &OverrideSpec,
        (by, reason): (&str, &str),
    ) -> Result<CalendarOverride, PgError> {
        let mut tx = self.schedules_tx(false).await?;
        let row = sqlx::query(sql(&self.inner.statements.last_override))
            .persistent(self.prepared())
            .fetch_one(&mut *tx)
            .await?;
        let now: DateTime<Utc> = row.try_get("now")?;
        let previous: Option<DateTime<Utc>> = row.try_get("effective_at")?;
        let mut written = CalendarOverride {
            spec: spec.clone(),
            reason: reason.to_owned(),
            changed_by: by.to_owned(),
            changed_at: now,
            effective_at: override_effective_at(now, previous),
            seq: 0,
        };
        written.seq = sqlx::query_scalar(sql(&self.inner.statements.insert_override))
            .persistent(self.prepared())
            .bind(&spec.calendar)
            .bind(spec.date)
            .bind(spec.kind.as_str())
            .bind(&spec.name)
            .bind(reason)
            .bind(by)
            .bind(now)
            .bind(written.effective_at)
            .bind(override_action(spec.kind))
            .bind(override_audit_reason(spec, reason))
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(written)
    }

    async fn read_override_changes(
        &self,
        after: i64,
        n: usize,
    ) -> Result<OverrideChanges, PgError> {
        let mut tx = self.schedules_tx(true).await?;
        let fresh_at: DateTime<Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
            .persistent(self.prepared())
            .fetch_one(&mut *tx)
            .await?;
        let rows = sqlx::query(sql(&self.inner.statements.override_changes))
            .persistent(self.prepared())
            .bind(after)
            .bind(i64::try_from(n).unwrap_or(i64::MAX))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(OverrideChanges {
            overrides: rows
                .iter()
                .map(calendar_override)
                .collect::<Result<_, _>>()?,
            fresh_at,
        })
    }
}

/// Each call is one transaction under the schedules' advisory lock (exclusive for writes, shared
/// for reads).
///
/// # Cancel safety
///
/// Dropping a call's future before it completes rolls its transaction back (when the connection
/// is next used or closed): nothing is written.
#[async_trait]
impl CalendarStore for PgBackend {
    async fn write_override(
        &self,
        spec: &OverrideSpec,
        by: &str,
        reason: &str,
    ) -> Result<CalendarOverride, StoreError> {
        check_override(spec, by, reason)?;
        let written = self.try_write_override(spec, (by, reason)).await?;
        Ok(override_written(written))
    }

    async fn override_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<OverrideChanges, StoreError> {
        Ok(self.read_override_changes(after, limit).await?)
    }
}
