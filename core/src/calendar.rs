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
            CalendarRef::Builtin(name) => Calendar::builtin_shared(name),
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

/// A job's business calendar as the store keeps it with the job's definition
/// ([`JobDefinition::calendar`](crate::store::JobDefinition::calendar)): enough for operators to
/// see it, and for another process to rebuild the rule when the calendar is a builtin one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarDefinition {
    /// The calendar's name (`KR`, or the name of one built in code).
    pub name: String,
    /// Where its data comes from (`holidays 0.109`, `CSV`, empty for one built in code).
    pub version: String,
    /// [`Calendar::digest`]: which dates it holds.
    pub digest: u64,
    /// The convention, as [`Adjust::as_str`] spells it.
    pub adjust: String,
    /// The shift, in business days.
    pub shift: i32,
}

impl CalendarDefinition {
    /// The definition of `rule`.
    pub fn of(rule: &BusinessRule) -> Self {
        let calendar = rule.calendar();
        CalendarDefinition {
            name: calendar.name().to_owned(),
            version: calendar.version().to_owned(),
            digest: calendar.digest(),
            adjust: rule.convention().as_str().to_owned(),
            shift: rule.shift(),
        }
    }

    /// The rule again, when the calendar is a builtin one whose dates this version holds (the same
    /// digest); `None` for a calendar built in code, or a builtin whose data differs here.
    pub fn rule(&self) -> Option<BusinessRule> {
        let calendar = Calendar::builtin_shared(&self.name).ok()?;
        if calendar.digest() != self.digest {
            return None;
        }
        let adjust: Adjust = self.adjust.parse().ok()?;
        BusinessRule::shared(calendar, adjust)
            .with_shift(self.shift)
            .ok()
    }

    /// The one-column text the stores keep: `adjust`, `shift`, digest, version and name, one per
    /// line (backslashes and line breaks in the last two escaped).
    pub fn to_stored(&self) -> String {
        let escape = |s: &str| s.replace('\\', "\\\\").replace('\n', "\\n");
        format!(
            "{}\n{}\n{:016x}\n{}\n{}",
            self.adjust,
            self.shift,
            self.digest,
            escape(&self.version),
            escape(&self.name)
        )
    }

    /// The definition a store read back: [`CalendarDefinition::from_stored`], or, for text this
    /// version cannot read, one whose [`rule`](CalendarDefinition::rule) is `None` (so the job's
    /// schedule is reported unreadable rather than read without its calendar).
    pub fn read(text: &str) -> Self {
        CalendarDefinition::from_stored(text).unwrap_or_else(|| CalendarDefinition {
            name: "(unreadable)".to_owned(),
            version: String::new(),
            digest: 0,
            adjust: "unreadable".to_owned(),
            shift: 0,
        })
    }

    /// The definition [`CalendarDefinition::to_stored`] wrote; `None` for other text.
    pub fn from_stored(text: &str) -> Option<Self> {
        let mut lines = text.split('\n');
        let mut next = || lines.next();
        let (adjust, shift, digest) = (next()?, next()?, next()?);
        let (version, name) = (unescape(next()?)?, unescape(next()?)?);
        Some(CalendarDefinition {
            name,
            version,
            digest: u64::from_str_radix(digest, 16).ok()?,
            adjust: adjust.to_owned(),
            shift: shift.parse().ok()?,
        })
    }
}

/// `KR preceding`, `acme skip shift +1`: the calendar, its convention and any shift.
impl std::fmt::Display for CalendarDefinition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.adjust)?;
        if self.shift != 0 {
            write!(f, " shift {:+}", self.shift)?;
        }
        Ok(())
    }
}

/// The text of an escaped field; `None` for a stray escape.
fn unescape(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        out.push(match (c, c == '\\') {
            (_, false) => c,
            (_, true) => match chars.next()? {
                'n' => '\n',
                '\\' => '\\',
                _ => return None,
            },
        });
    }
    Some(out)
}

#[cfg(test)]
mod stored {
    use super::*;

    #[test]
    fn a_definition_survives_the_store_and_rebuilds_builtin_rules_only() {
        let rule = BusinessRule::new(Calendar::builtin("KR").unwrap(), Adjust::Preceding)
            .with_shift(-1)
            .unwrap();
        let def = CalendarDefinition::of(&rule);
        let back = CalendarDefinition::from_stored(&def.to_stored()).unwrap();
        assert_eq!(back, def);
        assert_eq!(back.rule(), Some(rule));
        assert_eq!(back.to_string(), "KR preceding shift -1");
        let odd = CalendarDefinition {
            name: "a\nb\\c".into(),
            version: "x\\ny".into(),
            ..def.clone()
        };
        assert_eq!(
            CalendarDefinition::from_stored(&odd.to_stored()),
            Some(odd.clone())
        );
        assert_eq!(odd.rule(), None, "not a builtin");
        let other_dates = CalendarDefinition {
            digest: def.digest ^ 1,
            ..def
        };
        assert_eq!(
            other_dates.rule(),
            None,
            "a builtin whose dates differ here"
        );
        assert_eq!(CalendarDefinition::read("junk").rule(), None);
        for bad in [
            "",
            "preceding\n1",
            "preceding\nx\n00\nv\nKR",
            "p\n1\n0\nv\\q\nKR",
        ] {
            assert_eq!(CalendarDefinition::from_stored(bad), None, "{bad:?}");
        }
    }
}
