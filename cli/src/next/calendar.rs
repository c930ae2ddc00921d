//! The business calendar of a `next` request: a builtin name or an inline weekend and holidays, the
//! convention and the shift, read the same way from the arguments and from a JSON line.

use super::shown::shown;
use std::path::Path;

use chrono::{NaiveDate, Weekday};
use serde::Deserialize;
use slotguard_cron::{BusinessRule, Calendar, CalendarError, UnknownAdjust, Weekend};

/// The most holidays an inline calendar may list: decades of them, and one JSON line stays small.
pub(crate) const MAX_HOLIDAYS: usize = 10_000;

/// A calendar as given: a builtin name (`"KR"`) or an inline object.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    untagged,
    expecting = "a builtin calendar name such as \"KR\", or an object such as \
                 {\"weekend\": [\"sat\", \"sun\"], \"holidays\": [\"2026-09-25\"]}"
)]
pub(crate) enum CalendarSpec {
    /// A builtin calendar.
    Builtin(String),
    /// A weekend and holidays.
    Inline(Inline),
    /// A calendar read from a file (`--holidays`), on its own or on top of a builtin one.
    #[serde(skip)]
    File(Calendar),
}

/// An inline calendar: lower-case three-letter weekday names and `YYYY-MM-DD` dates.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Inline {
    /// The weekend; none when absent.
    #[serde(default)]
    weekend: Vec<String>,
    /// The holidays; none when absent.
    #[serde(default)]
    holidays: Vec<String>,
}

/// Why the calendar part of a request cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CalendarProblem {
    /// Unknown builtin, a weekend of seven days, a shift too far.
    #[error(transparent)]
    Calendar(#[from] CalendarError),
    /// The convention's name.
    #[error(transparent)]
    Adjust(#[from] UnknownAdjust),
    /// A weekday name that is not `mon` … `sun`.
    #[error("weekend day `{0}` is not one of mon, tue, wed, thu, fri, sat, sun")]
    Weekday(String),
    /// A holiday that is not a `YYYY-MM-DD` date.
    #[error("holiday `{0}` is not a date such as 2026-09-25")]
    Holiday(String),
    /// Too many holidays.
    #[error("{0} holidays is more than the {MAX_HOLIDAYS} an inline calendar may list")]
    TooMany(usize),
    /// A shift that does not fit.
    #[error("shift {0} is out of range: expected -260 to 260 business days")]
    Shift(i64),
    /// A convention or a shift without a calendar.
    #[error("`{0}` needs a calendar: give one with `calendar` (--calendar)")]
    Alone(&'static str),
}

/// The rule of a request, if it names a calendar: `adjust` defaults to `skip`, `shift` to 0.
///
/// # Errors
/// The first part that is wrong, in the order calendar, convention, shift.
pub(crate) fn rule(
    calendar: Option<&CalendarSpec>,
    adjust: Option<&str>,
    shift: Option<i64>,
) -> Result<Option<BusinessRule>, CalendarProblem> {
    let Some(calendar) = calendar else {
        return match (adjust, shift) {
            (Some(_), _) => Err(CalendarProblem::Alone("adjust")),
            (None, Some(_)) => Err(CalendarProblem::Alone("shift")),
            (None, None) => Ok(None),
        };
    };
    let calendar = match calendar {
        CalendarSpec::Builtin(name) => Calendar::builtin(name).map_err(|e| match e {
            CalendarError::Unknown { .. } => CalendarError::Unknown { name: shown(name) },
            other => other,
        })?,
        CalendarSpec::Inline(inline) => inline.calendar()?,
        CalendarSpec::File(calendar) => calendar.clone(),
    };
    let adjust = adjust.map(str::parse).transpose()?.unwrap_or_default();
    let shift = shift.unwrap_or(0);
    let shift = i32::try_from(shift).map_err(|_| CalendarProblem::Shift(shift))?;
    let rule = BusinessRule::new(calendar, adjust)
        .with_shift(shift)
        .map_err(|_| CalendarProblem::Shift(i64::from(shift)))?;
    Ok(Some(rule))
}

impl Inline {
    fn calendar(&self) -> Result<Calendar, CalendarProblem> {
        if self.holidays.len() > MAX_HOLIDAYS {
            return Err(CalendarProblem::TooMany(self.holidays.len()));
        }
        let days = self
            .weekend
            .iter()
            .map(|name| weekday(name).ok_or_else(|| CalendarProblem::Weekday(shown(name))))
            .collect::<Result<Vec<_>, _>>()?;
        let weekend = Weekend::of(&days)?;
        self.holidays
            .iter()
            .try_fold(Calendar::new("inline", weekend), |calendar, text| {
                let date = NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
                    .map_err(|_| CalendarProblem::Holiday(shown(text)))?;
                Ok(calendar.with_holiday(date, "holiday"))
            })
    }
}

/// The calendar of `--holidays FILE`: the file's holidays (iCalendar for `.ics`/`.ical`, else
/// `date,name` rows) with Saturday and Sunday off, on top of the builtin calendar `base` if given.
///
/// # Errors
/// The file cannot be read, its content is not a calendar, or `base` is not a builtin one.
pub(crate) fn from_file(path: &Path, base: Option<&str>) -> Result<Calendar, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the holidays file {}: {e}", path.display()))?;
    let name = path.file_stem().map_or_else(
        || "holidays".to_owned(),
        |s| s.to_string_lossy().into_owned(),
    );
    let ical = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ics") || e.eq_ignore_ascii_case("ical"));
    let read = if ical {
        Calendar::from_ical(name, Weekend::SAT_SUN, &text)
    } else {
        Calendar::from_csv(name, Weekend::SAT_SUN, &text)
    };
    let calendar = read.map_err(|e| format!("{}: {e}", path.display()))?;
    match base {
        None => Ok(calendar),
        Some(base) => {
            let base = Calendar::builtin(base).map_err(|e| match e {
                CalendarError::Unknown { .. } => CalendarError::Unknown { name: shown(base) },
                other => other,
            });
            Ok(calendar.extend(&base.map_err(|e| e.to_string())?))
        }
    }
}

/// `mon` … `sun`, lower case only, as the request format says.
fn weekday(name: &str) -> Option<Weekday> {
    const NAMES: [(&str, Weekday); 7] = [
        ("mon", Weekday::Mon),
        ("tue", Weekday::Tue),
        ("wed", Weekday::Wed),
        ("thu", Weekday::Thu),
        ("fri", Weekday::Fri),
        ("sat", Weekday::Sat),
        ("sun", Weekday::Sun),
    ];
    NAMES.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}
