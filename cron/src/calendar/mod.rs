//! Business calendars: which dates are business days (a weekend plus holidays), and the rules that
//! move a schedule's nominal dates onto business days ([`Adjust`], [`BusinessRule`]).
//!
//! ```
//! use chrono::NaiveDate;
//! use slotguard_cron::{Adjust, BusinessRule, Calendar};
//!
//! // Korean payday: the 25th, or the business day before. 2026-09-25 is Chuseok (and the 24th
//! // and 26th too), so payday is Wednesday the 23rd.
//! let rule = BusinessRule::new(Calendar::builtin("KR")?, Adjust::Preceding);
//! let day = |d| NaiveDate::from_ymd_opt(2026, 9, d).unwrap();
//! assert_eq!(rule.adjust(day(25)), Some(day(23)));
//! # Ok::<(), slotguard_cron::CalendarError>(())
//! ```

mod adjust;
mod builtin;
#[cfg(feature = "import")]
mod import;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, OnceLock};

use chrono::{Datelike, NaiveDate, Weekday};

pub use adjust::{Adjust, BusinessRule, MAX_SHIFT, UnknownAdjust};
pub use builtin::BUILTIN;

/// The weekdays of a weekend, as a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Weekend(u8);

impl Weekend {
    /// Saturday and Sunday.
    pub const SAT_SUN: Weekend = Weekend(0b110_0000);
    /// No weekend: every weekday is a business day unless it is a holiday.
    pub const NONE: Weekend = Weekend(0);

    /// The weekend of `days`.
    ///
    /// # Errors
    /// [`CalendarError::NoBusinessDay`] when `days` names all seven weekdays.
    pub fn of(days: &[Weekday]) -> Result<Weekend, CalendarError> {
        let bits = days
            .iter()
            .fold(0u8, |bits, day| bits | 1 << day.num_days_from_monday());
        if bits == 0b111_1111 {
            return Err(CalendarError::NoBusinessDay);
        }
        Ok(Weekend(bits))
    }

    /// Whether `day` is in the weekend.
    pub fn contains(self, day: Weekday) -> bool {
        self.0 & 1 << day.num_days_from_monday() != 0
    }

    /// The longest run of consecutive weekend days (at most 6).
    fn longest_run(self) -> u32 {
        (0..7)
            .map(|start| {
                (0..7)
                    .take_while(|k| self.0 & 1 << ((start + k) % 7) != 0)
                    .count() as u32
            })
            .max()
            .unwrap_or(0)
    }
}

/// A business calendar: a weekend and holiday dates, with a name and the version of its data.
///
/// A date is a business day when it is neither in the weekend nor a holiday. Calendars layer:
/// [`Calendar::extend`] adds a company's own holidays on top of a country's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Calendar {
    name: String,
    version: String,
    weekend: Weekend,
    holidays: BTreeMap<NaiveDate, String>,
    /// The years the holiday data is complete for, first and last.
    years: Option<(i32, i32)>,
    /// The calendars this one was built on ([`Calendar::extend`]), nearest first: each one's name,
    /// and the dates the calendars above it name themselves (an override of that calendar leaves
    /// them alone).
    bases: Vec<(String, BTreeSet<NaiveDate>)>,
    /// [`Calendar::longest_closure`], computed on first use (every rule on the calendar asks for it,
    /// and a builtin calendar is shared by all of them); reset by every change of the holidays.
    closure: Cached,
}

/// A value derived from a calendar's data, computed once on first use. It is equal and hashed as
/// nothing: the data it comes from is compared and hashed already.
#[derive(Debug, Clone, Default)]
struct Cached(OnceLock<u32>);

impl PartialEq for Cached {
    fn eq(&self, _: &Cached) -> bool {
        true
    }
}

impl Eq for Cached {}

impl std::hash::Hash for Cached {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

/// A calendar that cannot be built or found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    /// No builtin calendar has this name.
    #[error("unknown calendar {name:?}: the builtin calendars are {}", BUILTIN.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// The weekend names all seven weekdays, so no date could be a business day.
    #[error("a weekend of all seven weekdays leaves no business day")]
    NoBusinessDay,
    /// A shift beyond ±[`MAX_SHIFT`] business days.
    #[error("a shift of {shift} business days is beyond ±{MAX_SHIFT}")]
    Shift {
        /// The shift asked for.
        shift: i32,
    },
    /// A calendar file that cannot be read ([`Calendar::from_ical`], [`Calendar::from_csv`]).
    #[error("cannot import the {format} calendar: {problem}")]
    Import {
        /// `iCalendar` or `CSV`.
        format: &'static str,
        /// What is wrong, and where.
        problem: String,
    },
    /// A line of holiday data that is not `YYYY-MM-DD name`.
    #[error("line {line} of the holiday data is not `YYYY-MM-DD name`: {text:?}")]
    Data {
        /// The line number, from 1.
        line: usize,
        /// The line.
        text: String,
    },
}

impl Calendar {
    /// A calendar with a weekend and no holidays.
    pub fn new(name: impl Into<String>, weekend: Weekend) -> Calendar {
        Calendar {
            name: name.into(),
            version: String::new(),
            weekend,
            holidays: BTreeMap::new(),
            years: None,
            bases: Vec::new(),
            closure: Cached::default(),
        }
    }

    /// A builtin calendar by its ISO 3166 country code (`KR`, `US`, …; see [`BUILTIN`]): Saturday
    /// and Sunday off, and the public holidays of 2000–2050 from the python `holidays` package,
    /// observed days included.
    ///
    /// # Errors
    /// [`CalendarError::Unknown`] for a name not in [`BUILTIN`].
    pub fn builtin(name: &str) -> Result<Calendar, CalendarError> {
        builtin::shared(name).map(Arc::unwrap_or_clone)
    }

    /// [`Calendar::builtin`], shared: each builtin's data is read once per process, so rebuilding
    /// a rule from a stored definition (once per job and page in the admin views) costs no parsing.
    ///
    /// # Errors
    /// [`CalendarError::Unknown`] for a name not in [`BUILTIN`].
    pub fn builtin_shared(name: &str) -> Result<Arc<Calendar>, CalendarError> {
        builtin::shared(name)
    }

    /// The same calendar with `date` a holiday named `name` (replacing a holiday of that date).
    #[must_use]
    pub fn with_holiday(mut self, date: NaiveDate, name: impl Into<String>) -> Calendar {
        self.holidays.insert(date, name.into());
        self.closure = Cached::default();
        self
    }

    /// The same calendar with `date` no holiday (a weekend day stays one).
    #[must_use]
    pub fn without_holiday(mut self, date: NaiveDate) -> Calendar {
        self.holidays.remove(&date);
        self.closure = Cached::default();
        self
    }

    /// `self` on top of `base`: both weekends together, `base`'s holidays plus `self`'s (`self`'s
    /// name wins on a date both have), named `self`'s name, with both versions.
    #[must_use]
    pub fn extend(self, base: &Calendar) -> Calendar {
        let mine: BTreeSet<NaiveDate> = self.holidays.keys().copied().collect();
        let mut bases = self.bases;
        bases.push((base.name.clone(), mine.clone()));
        bases.extend(
            base.bases
                .iter()
                .map(|(name, above)| (name.clone(), above.union(&mine).copied().collect())),
        );
        let mut holidays = base.holidays.clone();
        holidays.extend(self.holidays);
        let version = match (base.version.is_empty(), self.version.is_empty()) {
            (true, _) => self.version,
            (false, true) => format!("{}: {}", base.name, base.version),
            (false, false) => format!("{}; {}: {}", self.version, base.name, base.version),
        };
        Calendar {
            name: self.name,
            version,
            weekend: Weekend(base.weekend.0 | self.weekend.0),
            holidays,
            years: base.years,
            bases,
            closure: Cached::default(),
        }
    }

    /// Whether this calendar is `name`, or was built on a calendar named `name`: an operator's
    /// override of `name` applies to it ([`Calendar::with_override`]).
    pub fn follows(&self, name: &str) -> bool {
        self.name == name || self.bases.iter().any(|(base, _)| base == name)
    }

    /// The calendar with an operator's override of calendar `of` on `date`: a holiday named
    /// `holiday` added (`Some`), or the holiday removed (`None`). An override of this calendar's
    /// own name changes the date; one of a calendar it was built on changes it unless a calendar
    /// above that one names the date itself (a company's shutdown day stays when the country's
    /// holiday on it is withdrawn). Unchanged when the calendar does not follow `of`.
    #[must_use]
    pub fn with_override(self, of: &str, date: NaiveDate, holiday: Option<&str>) -> Calendar {
        let kept = if self.name == of {
            false
        } else {
            match self.bases.iter().find(|(base, _)| base == of) {
                Some((_, above)) => above.contains(&date),
                None => true,
            }
        };
        match holiday {
            _ if kept => self,
            Some(name) => self.with_holiday(date, name),
            None => self.without_holiday(date),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where its data comes from, e.g. `holidays 0.109`; empty for a calendar built in code.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Its weekend.
    pub fn weekend(&self) -> Weekend {
        self.weekend
    }

    /// A stable 64-bit digest of the weekend and the holiday dates (FNV-1a), so that a schedule's
    /// fingerprint changes when its calendar's dates do.
    pub fn digest(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let days = self.holidays.keys().map(|d| d.num_days_from_ce());
        for word in std::iter::once(i32::from(self.weekend.0)).chain(days) {
            for byte in word.to_le_bytes() {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash
    }

    /// Whether `date` is a business day: not in the weekend, not a holiday.
    pub fn is_business_day(&self, date: NaiveDate) -> bool {
        !self.weekend.contains(date.weekday()) && !self.holidays.contains_key(&date)
    }

    /// The holiday on `date`, by name.
    pub fn holiday(&self, date: NaiveDate) -> Option<&str> {
        self.holidays.get(&date).map(String::as_str)
    }

    /// The holidays, in date order.
    pub fn holidays(&self) -> impl Iterator<Item = (NaiveDate, &str)> {
        self.holidays.iter().map(|(d, n)| (*d, n.as_str()))
    }

    /// The first and last years its holiday data is complete for; `None` for a calendar built in
    /// code, which covers every year.
    pub fn years(&self) -> Option<(i32, i32)> {
        self.years
    }

    /// Whether its holiday data covers `year` (always, for a calendar built in code).
    pub fn covers(&self, year: i32) -> bool {
        self.years
            .is_none_or(|(first, last)| (first..=last).contains(&year))
    }

    /// The longest run of consecutive days that are not business days, at least the weekend's.
    pub(crate) fn longest_closure(&self) -> u32 {
        *self.closure.0.get_or_init(|| self.measure_closure())
    }

    /// [`Calendar::longest_closure`], measured: every run of closed days around a holiday.
    fn measure_closure(&self) -> u32 {
        let mut longest = self.weekend.longest_run();
        let mut run: Option<(NaiveDate, u32)> = None;
        for date in self.holidays.keys() {
            // The run of closed days through `date`, counting the weekend days around it.
            let start = match run {
                Some((last, _)) if last >= *date => continue,
                _ => self.closed_back_from(*date),
            };
            let mut end = *date;
            while let Some(next) = end.succ_opt().filter(|d| !self.is_business_day(*d)) {
                end = next;
            }
            let days = (end - start).num_days() as u32 + 1;
            longest = longest.max(days);
            run = Some((end, days));
        }
        longest
    }

    /// The first day of the run of closed days that ends at `date`.
    fn closed_back_from(&self, date: NaiveDate) -> NaiveDate {
        let mut start = date;
        while let Some(prev) = start.pred_opt().filter(|d| !self.is_business_day(*d)) {
            start = prev;
        }
        start
    }
}

impl fmt::Display for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if !self.version.is_empty() {
            write!(f, " ({})", self.version)?;
        }
        Ok(())
    }
}
