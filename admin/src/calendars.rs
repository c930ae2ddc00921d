//! Operators' holiday overrides: a date added to a business calendar as a holiday (a temporary
//! holiday, an election day announced late), or removed from it, without a deploy. Each is checked
//! (a known calendar, a date within 1970–2200, bounded texts), stored with who and why, audited,
//! and followed by every running scheduler once it takes effect; a slot already claimed stays
//! where it was.

use chrono::NaiveDate;
use slotguard::Calendar;
use slotguard::store::calendars::overrides_in_force;
use slotguard::store::{CalendarOverride, OverrideError, OverrideKind, OverrideSpec};

use crate::{Admin, AdminError, ChangeRequest, shown};

pub use crate::planned::MAX_OVERRIDES;

/// An [`OverrideError`] as the admin API's [`AdminError::Invalid`], naming the field.
fn invalid(e: OverrideError) -> AdminError {
    let field = match &e {
        OverrideError::Text { field, .. } => field,
        OverrideError::Year(_) | OverrideError::Date(_) => "date",
        OverrideError::Kind(_) => "kind",
        OverrideError::UnknownCalendar(_) => "calendar",
        _ => "override",
    };
    AdminError::Invalid {
        field,
        problem: e.to_string(),
    }
}

impl Admin {
    /// Makes `date` a holiday named `name` on `calendar` (a builtin, or the calendar of a
    /// registered job).
    ///
    /// # Errors
    /// [`AdminError::Invalid`] naming the field (`calendar`, `date`, `name`, `actor`, `reason`);
    /// [`AdminError::Store`].
    pub async fn add_holiday(
        &self,
        calendar: &str,
        date: NaiveDate,
        name: &str,
        by: &ChangeRequest,
    ) -> Result<CalendarOverride, AdminError> {
        let spec = self
            .checked_override(calendar, date, OverrideKind::Add, name, by)
            .await?;
        self.write_override(&spec, by).await
    }

    /// Makes `date` no holiday on `calendar` (a weekend day stays one).
    ///
    /// # Errors
    /// As [`Admin::add_holiday`].
    pub async fn remove_holiday(
        &self,
        calendar: &str,
        date: NaiveDate,
        by: &ChangeRequest,
    ) -> Result<CalendarOverride, AdminError> {
        let spec = self
            .checked_override(calendar, date, OverrideKind::Remove, "", by)
            .await?;
        self.write_override(&spec, by).await
    }

    /// Writes `spec`, checked, by `by`.
    async fn write_override(
        &self,
        spec: &OverrideSpec,
        by: &ChangeRequest,
    ) -> Result<CalendarOverride, AdminError> {
        Ok(self
            .store
            .write_override(spec, &by.actor, &by.reason)
            .await?)
    }

    /// The override `by` asks for, checked as [`Admin::add_holiday`] checks it before it writes;
    /// nothing is written (the dashboard's confirmation page shows it first).
    pub(crate) async fn checked_override(
        &self,
        calendar: &str,
        date: NaiveDate,
        kind: OverrideKind,
        name: &str,
        by: &ChangeRequest,
    ) -> Result<OverrideSpec, AdminError> {
        by.validate()?;
        let spec = OverrideSpec {
            calendar: calendar.to_owned(),
            date,
            kind,
            name: name.to_owned(),
        };
        spec.check(&by.actor, &by.reason).map_err(invalid)?;
        self.check_calendar(calendar).await?;
        Ok(spec)
    }

    /// Refuses a calendar that is neither a builtin one nor that of a registered job.
    async fn check_calendar(&self, calendar: &str) -> Result<(), AdminError> {
        if Calendar::builtin_shared(calendar).is_ok()
            || self.job_calendars().await?.iter().any(|c| c == calendar)
        {
            Ok(())
        } else {
            Err(invalid(OverrideError::UnknownCalendar(shown(calendar))))
        }
    }

    /// The calendars of the registered jobs.
    async fn job_calendars(&self) -> Result<Vec<String>, AdminError> {
        let jobs = self.store.jobs().await?;
        Ok(jobs
            .into_iter()
            .filter_map(|j| j.definition.calendar.map(|c| c.name))
            .collect())
    }

    /// The calendars a holiday may be added to or removed from: the builtin ones
    /// ([`slotguard_cron::BUILTIN`]) and those of the registered jobs, sorted, each once.
    ///
    /// # Errors
    /// [`AdminError::Store`].
    pub async fn holiday_calendars(&self) -> Result<Vec<String>, AdminError> {
        let mut all = self.job_calendars().await?;
        all.extend(slotguard_cron::BUILTIN.iter().map(|&b| b.to_owned()));
        all.sort();
        all.dedup();
        Ok(all)
    }

    /// The overrides in force: the latest of each calendar and date, of `calendar` if given,
    /// ordered by calendar and date (at most [`MAX_OVERRIDES`] are read).
    ///
    /// # Errors
    /// [`AdminError::Store`].
    pub async fn calendar_overrides(
        &self,
        calendar: Option<&str>,
    ) -> Result<Vec<CalendarOverride>, AdminError> {
        let all = self.all_overrides().await?;
        Ok(overrides_in_force(&all, calendar)
            .into_iter()
            .cloned()
            .collect())
    }
}

/// An operator's date of an override (`YYYY-MM-DD`, within 1970–2200), as every front end reads it.
///
/// # Errors
/// [`AdminError::Invalid`] with `field: "date"`.
pub fn parse_holiday_date(text: &str) -> Result<NaiveDate, AdminError> {
    slotguard::store::calendars::parse_override_date(text).map_err(invalid)
}

/// An override's kind (`add` or `remove`), as every front end reads it.
///
/// # Errors
/// [`AdminError::Invalid`] with `field: "kind"`.
pub fn parse_override_kind(text: &str) -> Result<OverrideKind, AdminError> {
    text.parse().map_err(invalid)
}

impl Admin {
    /// [`Admin::add_holiday`] or [`Admin::remove_holiday`], by `kind` (a removal takes no name).
    ///
    /// # Errors
    /// As [`Admin::add_holiday`].
    pub async fn override_holiday(
        &self,
        calendar: &str,
        date: NaiveDate,
        kind: OverrideKind,
        name: Option<&str>,
        by: &ChangeRequest,
    ) -> Result<CalendarOverride, AdminError> {
        match kind {
            OverrideKind::Add => {
                self.add_holiday(calendar, date, name.unwrap_or_default(), by)
                    .await
            }
            OverrideKind::Remove => self.remove_holiday(calendar, date, by).await,
        }
    }
}
