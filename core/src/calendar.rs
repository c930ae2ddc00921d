//! A job's business calendar: which calendar its dates are adjusted on ([`CalendarRef`]), and the
//! rule `build()` makes of it with the job's convention and shift.

use std::sync::Arc;

use slotguard_cron::{Adjust, BusinessRule, Calendar, CalendarError};

/// The business calendar of a job ([`Job::calendar`](crate::Job::calendar)): a builtin calendar
/// by name (`"KR"`, `"US"`, …, checked by `build()`) or one built in code.
///
/// ```
/// use slotguard::{Calendar, CalendarRef};
///
/// let korea: CalendarRef = "KR".into();
/// let company: CalendarRef = Calendar::builtin("KR")?
///     .with_holiday(chrono::NaiveDate::from_ymd_opt(2026, 12, 31).unwrap(), "closing day")
///     .into();
/// # let _ = (korea, company);
/// # Ok::<(), slotguard::CalendarError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CalendarRef {
    /// A builtin calendar, by its country code ([`slotguard_cron::BUILTIN`]).
    Builtin(String),
    /// A calendar built in code (a builtin extended with a company's days, one read from a file).
    Custom(Arc<Calendar>),
}

impl From<&str> for CalendarRef {
    fn from(name: &str) -> Self {
        CalendarRef::Builtin(name.to_owned())
    }
}

impl From<String> for CalendarRef {
    fn from(name: String) -> Self {
        CalendarRef::Builtin(name)
    }
}

impl From<Calendar> for CalendarRef {
    fn from(calendar: Calendar) -> Self {
        CalendarRef::Custom(Arc::new(calendar))
    }
}

impl From<Arc<Calendar>> for CalendarRef {
    fn from(calendar: Arc<Calendar>) -> Self {
        CalendarRef::Custom(calendar)
    }
}

impl CalendarRef {
    /// The calendar itself.
    ///
    /// # Errors
    /// [`CalendarError::Unknown`] for a builtin name that is not one.
    pub fn resolve(&self) -> Result<Arc<Calendar>, CalendarError> {
        match self {
            CalendarRef::Builtin(name) => Calendar::builtin(name).map(Arc::new),
            CalendarRef::Custom(calendar) => Ok(Arc::clone(calendar)),
        }
    }
}

/// A job's calendar settings, as [`Job`](crate::Job) collects them.
#[derive(Debug, Clone, Default)]
pub(crate) struct CalendarSettings {
    pub(crate) calendar: Option<CalendarRef>,
    pub(crate) adjust: Option<Adjust>,
    pub(crate) shift: Option<i32>,
}

/// What is wrong with a job's calendar settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarSettingError {
    /// A convention or a shift without a calendar to count business days on.
    #[error("`{0}` needs a calendar (`calendar`)")]
    NoCalendar(&'static str),
    /// The calendar cannot be found, or the shift is out of range.
    #[error(transparent)]
    Calendar(#[from] CalendarError),
}

impl CalendarSettings {
    /// The rule these settings make: `None` without a calendar. A calendar without a convention
    /// skips the dates that are not business days ([`Adjust::Skip`]).
    pub(crate) fn rule(&self) -> Result<Option<BusinessRule>, CalendarSettingError> {
        let Some(calendar) = &self.calendar else {
            return match (self.adjust, self.shift) {
                (Some(_), _) => Err(CalendarSettingError::NoCalendar("adjust")),
                (None, Some(_)) => Err(CalendarSettingError::NoCalendar("shift")),
                (None, None) => Ok(None),
            };
        };
        let rule = BusinessRule::shared(calendar.resolve()?, self.adjust.unwrap_or_default());
        Ok(Some(rule.with_shift(self.shift.unwrap_or(0))?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calendar_alone_skips_and_a_convention_alone_is_refused() {
        let only = CalendarSettings {
            calendar: Some("KR".into()),
            ..Default::default()
        };
        let rule = only.rule().unwrap().unwrap();
        assert_eq!((rule.convention(), rule.shift()), (Adjust::Skip, 0));
        let orphan = CalendarSettings {
            adjust: Some(Adjust::Preceding),
            ..Default::default()
        };
        assert_eq!(
            orphan.rule().unwrap_err(),
            CalendarSettingError::NoCalendar("adjust")
        );
        let unknown = CalendarSettings {
            calendar: Some("XX".into()),
            ..Default::default()
        };
        assert!(matches!(
            unknown.rule(),
            Err(CalendarSettingError::Calendar(
                CalendarError::Unknown { .. }
            ))
        ));
        let far = CalendarSettings {
            calendar: Some("KR".into()),
            shift: Some(10_000),
            ..Default::default()
        };
        assert!(matches!(
            far.rule(),
            Err(CalendarSettingError::Calendar(CalendarError::Shift { .. }))
        ));
    }
}
