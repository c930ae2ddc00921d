//! Business-day conventions: what becomes of a nominal date that is not a business day, and the
//! shift by business days after it.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use chrono::{Datelike, NaiveDate};

use super::{Calendar, CalendarError};

/// The furthest a rule shifts, in business days: a year of them.
pub const MAX_SHIFT: i32 = 260;

/// What becomes of a nominal date that is not a business day (the conventions of QuantLib's
/// `BusinessDayConvention`, and `skip`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Adjust {
    /// No slot on that date; the runtime records it skipped (reason `calendar`).
    #[default]
    Skip,
    /// The next business day.
    Following,
    /// The previous business day.
    Preceding,
    /// The next business day, unless it is in another month: then the previous one.
    ModifiedFollowing,
    /// The previous business day, unless it is in another month: then the next one.
    ModifiedPreceding,
    /// The nearer business day; at equal distance, the next one.
    Nearest,
}

/// A convention name that is not one of [`Adjust`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown business-day convention {0:?}: use skip, following, preceding, modified-following, modified-preceding or nearest"
)]
pub struct UnknownAdjust(pub String);

impl Adjust {
    /// Every convention.
    pub const ALL: [Adjust; 6] = [
        Adjust::Skip,
        Adjust::Following,
        Adjust::Preceding,
        Adjust::ModifiedFollowing,
        Adjust::ModifiedPreceding,
        Adjust::Nearest,
    ];

    /// Its name, as [`FromStr`] reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Adjust::Skip => "skip",
            Adjust::Following => "following",
            Adjust::Preceding => "preceding",
            Adjust::ModifiedFollowing => "modified-following",
            Adjust::ModifiedPreceding => "modified-preceding",
            Adjust::Nearest => "nearest",
        }
    }
}

impl fmt::Display for Adjust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Adjust {
    type Err = UnknownAdjust;

    /// The names of [`Adjust::as_str`]; `_` may stand for `-`, and case does not matter.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase().replace('_', "-");
        Adjust::ALL
            .into_iter()
            .find(|a| a.as_str() == name)
            .ok_or_else(|| UnknownAdjust(s.to_owned()))
    }
}

/// A calendar, a convention and a shift: the rule that moves a schedule's nominal dates onto
/// business days.
///
/// A nominal date that is a business day stays; one that is not is moved by the convention (or
/// dropped, under [`Adjust::Skip`]); the date is then moved by `shift` business days (forward when
/// positive).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BusinessRule {
    calendar: Arc<Calendar>,
    adjust: Adjust,
    shift: i32,
    /// The longest run of days that are not business days.
    closure: u32,
}

impl BusinessRule {
    /// `calendar` under `adjust`, without a shift.
    pub fn new(calendar: Calendar, adjust: Adjust) -> BusinessRule {
        BusinessRule::shared(Arc::new(calendar), adjust)
    }

    /// [`BusinessRule::new`] on a calendar shared with other rules.
    pub fn shared(calendar: Arc<Calendar>, adjust: Adjust) -> BusinessRule {
        let closure = calendar.longest_closure();
        BusinessRule {
            calendar,
            adjust,
            shift: 0,
            closure,
        }
    }

    /// The same rule, moving each date by `shift` business days after the convention (back when
    /// negative).
    ///
    /// # Errors
    /// [`CalendarError::Shift`] beyond ±[`MAX_SHIFT`].
    pub fn with_shift(mut self, shift: i32) -> Result<BusinessRule, CalendarError> {
        if shift.unsigned_abs() > MAX_SHIFT.unsigned_abs() {
            return Err(CalendarError::Shift { shift });
        }
        self.shift = shift;
        Ok(self)
    }

    /// The calendar.
    pub fn calendar(&self) -> &Calendar {
        &self.calendar
    }

    /// The convention.
    pub fn convention(&self) -> Adjust {
        self.adjust
    }

    /// The shift, in business days.
    pub fn shift(&self) -> i32 {
        self.shift
    }

    /// The business date `nominal` becomes, or `None` when the rule drops it ([`Adjust::Skip`] on a
    /// day that is not a business day).
    pub fn adjust(&self, nominal: NaiveDate) -> Option<NaiveDate> {
        let date = if self.calendar.is_business_day(nominal) {
            nominal
        } else {
            self.convention_of(nominal)?
        };
        let step = if self.shift < 0 { -1 } else { 1 };
        (0..self.shift.unsigned_abs()).try_fold(date, |d, _| self.business_from(d, step))
    }

    /// The most days a nominal date can move, either way.
    pub fn reach(&self) -> i64 {
        (i64::from(self.closure) + 1) * (i64::from(self.shift.unsigned_abs()) + 1)
    }

    /// The convention applied to `nominal`, which is not a business day.
    fn convention_of(&self, nominal: NaiveDate) -> Option<NaiveDate> {
        let same_month = |d: NaiveDate| (d.year(), d.month()) == (nominal.year(), nominal.month());
        match self.adjust {
            Adjust::Skip => None,
            Adjust::Following => self.business_from(nominal, 1),
            Adjust::Preceding => self.business_from(nominal, -1),
            Adjust::ModifiedFollowing => self
                .business_from(nominal, 1)
                .filter(|d| same_month(*d))
                .or_else(|| self.business_from(nominal, -1)),
            Adjust::ModifiedPreceding => self
                .business_from(nominal, -1)
                .filter(|d| same_month(*d))
                .or_else(|| self.business_from(nominal, 1)),
            Adjust::Nearest => {
                let (next, previous) = (
                    self.business_from(nominal, 1),
                    self.business_from(nominal, -1),
                );
                match (next, previous) {
                    (Some(n), Some(p)) if nominal - p < n - nominal => Some(p),
                    (Some(n), _) => Some(n),
                    (None, p) => p,
                }
            }
        }
    }

    /// The first business day after `from` (`step` 1) or before it (`step` -1); `None` at the end
    /// of the calendar.
    fn business_from(&self, from: NaiveDate, step: i64) -> Option<NaiveDate> {
        let mut date = from;
        for _ in 0..=self.closure {
            date = date.checked_add_signed(chrono::TimeDelta::days(step))?;
            if self.calendar.is_business_day(date) {
                return Some(date);
            }
        }
        None
    }
}
