//! The cron dialect: parsing into bit sets, and matching dates and times of day.

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, NaiveDate, Weekday};

use crate::error::{Field, ParseError, shown};

mod fields;

use fields::{parse_plain, starts_with_star};

/// A parsed cron expression: standard Unix cron (5 fields) or with seconds first (6 fields).
///
/// The dialect:
/// - `*`, `?` (same as `*` in the day fields), numbers, `a-b`, lists `a,b`, steps `*/15`, `1-30/5`, `5/10`;
/// - month names `JAN`–`DEC` and weekday names `SUN`–`SAT`, case-insensitive; weekday 0 and 7 are Sunday,
///   1 is Monday;
/// - day of month: `L` (last day), `L-3` (three days before the last), `15W` (weekday nearest the 15th,
///   within the month), `LW` (last weekday of the month);
/// - day of week: `5L` (last Friday of the month), `5#3` (third Friday);
/// - `@yearly` `@annually` `@monthly` `@weekly` `@daily` `@midnight` `@hourly`;
/// - day of month and day of week: when either field starts with `*` (or `?`) both must match,
///   otherwise either may match (Vixie's rule, so `0 0 13 * 5` fires on every 13th and every Friday).
///
/// An expression that can never fire (`0 0 30 2 *`) is rejected when parsed.
///
/// ```
/// use slotguard_cron::CronExpr;
/// let expr: CronExpr = "0 2 * * MON-FRI".parse()?;
/// assert!(!expr.has_seconds());
/// assert!(expr.is_fixed_time());
/// # Ok::<(), slotguard_cron::ParseError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CronExpr {
    seconds: u64,
    minutes: u64,
    hours: u32,
    /// Bit `d` for day `d` of the month, 1..=31.
    days: u32,
    /// `L`, `L-n`: bit `n` for "n days before the last day" (bit 0 is `L`).
    days_before_last: u32,
    /// `nW`: bit `n` for "the weekday nearest day n".
    nearest_weekday: u32,
    last_weekday: bool,
    /// Bit `m` for month `m`, 1..=12.
    months: u16,
    /// Bit `w` for weekday `w`, 0 = Sunday.
    weekdays: u8,
    /// `w#n`: bit `w * 5 + (n - 1)`.
    nth_weekdays: u64,
    /// `wL`: bit `w`.
    last_weekdays: u8,
    dom_star: bool,
    dow_star: bool,
    has_seconds: bool,
    fixed_time: bool,
    source: Box<str>,
}

impl fmt::Debug for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CronExpr").field(&self.source).finish()
    }
}

impl fmt::Display for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl FromStr for CronExpr {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CronExpr::parse(s)
    }
}

/// The 400-year Gregorian cycle: weekdays and leap years repeat after it, so a date pattern that
/// matches nothing in one cycle matches nothing ever.
const CYCLE_DAYS: u64 = 146_097;

impl CronExpr {
    /// Parses an expression. See the type's documentation for the dialect.
    ///
    /// # Errors
    /// A [`ParseError`] that names the field and the reason, or [`ParseError::NeverFires`].
    pub fn parse(input: &str) -> Result<Self, ParseError> {
        let trimmed = input.trim();
        if trimmed.is_empty() {
            return Err(ParseError::Empty);
        }
        let expanded = if let Some(word) = trimmed.strip_prefix('@') {
            match word.to_ascii_lowercase().as_str() {
                "yearly" | "annually" => "0 0 1 1 *",
                "monthly" => "0 0 1 * *",
                "weekly" => "0 0 * * 0",
                "daily" | "midnight" => "0 0 * * *",
                "hourly" => "0 * * * *",
                _ => return Err(ParseError::UnknownShorthand(shown(trimmed))),
            }
        } else {
            trimmed
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (sec, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            found => return Err(ParseError::FieldCount { found }),
        };
        let has_seconds = fields.len() == 6;
        let [min, hour, dom, month, dow] = [rest[0], rest[1], rest[2], rest[3], rest[4]];
        // Fixed-time: no time field starts with `*` (5-field expressions have no seconds field).
        let starred_time = starts_with_star(min)
            || starts_with_star(hour)
            || (has_seconds && starts_with_star(sec));

        let mut expr = CronExpr {
            seconds: parse_plain(Field::Second, sec)?,
            minutes: parse_plain(Field::Minute, min)?,
            hours: parse_plain(Field::Hour, hour)? as u32,
            days: 0,
            days_before_last: 0,
            nearest_weekday: 0,
            last_weekday: false,
            months: parse_plain(Field::Month, month)? as u16,
            weekdays: 0,
            nth_weekdays: 0,
            last_weekdays: 0,
            dom_star: starts_with_star(dom),
            dow_star: starts_with_star(dow),
            has_seconds,
            fixed_time: !starred_time,
            source: trimmed.into(),
        };
        expr.parse_dom(dom)?;
        expr.parse_dow(dow)?;
        if !expr.fires_in_cycle() {
            return Err(ParseError::NeverFires(shown(trimmed)));
        }
        Ok(expr)
    }

    /// The expression as written (shorthands are kept as written).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the expression has a seconds field.
    pub fn has_seconds(&self) -> bool {
        self.has_seconds
    }

    /// A *fixed-time* expression names its wall-clock time: neither the minute nor the hour field (nor the
    /// seconds field, when present) starts with `*`. `@daily` is fixed; `@hourly` and `*/15 * * * *` are
    /// not. DST policies treat the two kinds differently.
    pub fn is_fixed_time(&self) -> bool {
        self.fixed_time
    }

    /// Whether `date` matches the day-of-month, month and day-of-week fields.
    pub fn matches_date(&self, date: NaiveDate) -> bool {
        self.months & (1 << date.month()) != 0 && self.matches_day(date, last_day_of_month(date))
    }

    fn matches_day(&self, date: NaiveDate, last: u32) -> bool {
        let day = date.day();
        let wd = date.weekday().num_days_from_sunday();
        let dom = self.days & (1 << day) != 0
            || (last >= day && self.days_before_last & (1 << (last - day)) != 0)
            || (self.nearest_weekday != 0 && self.matches_nearest_weekday(date, last))
            || (self.last_weekday && day == last_weekday_of_month(date, last));
        let dow = self.weekdays & (1 << wd) != 0
            || self.nth_weekdays & (1 << (wd * 5 + (day - 1) / 7)) != 0
            || (self.last_weekdays & (1 << wd) != 0 && day + 7 > last);
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// `nW`: the weekday nearest day `n`, never leaving the month.
    fn matches_nearest_weekday(&self, date: NaiveDate, last: u32) -> bool {
        let day = date.day();
        let wd = date.weekday();
        if matches!(wd, Weekday::Sat | Weekday::Sun) {
            return false;
        }
        // Which target days could land on `day`: the day itself, the Saturday after a Friday,
        // the Sunday before a Monday, and the month's edge cases (1st on a Saturday → Monday the 3rd,
        // last day on a Sunday → Friday two days before).
        let hit = |n: u32| n >= 1 && n <= last && self.nearest_weekday & (1 << n) != 0;
        hit(day)
            || (wd == Weekday::Fri && day < last && hit(day + 1))
            || (wd == Weekday::Mon && day > 1 && hit(day - 1))
            || (wd == Weekday::Mon && day == 3 && hit(1))
            || (wd == Weekday::Fri && day + 2 == last && hit(last))
    }

    /// The first date on or after `from`, and not after `until`, that matches the date fields.
    pub(crate) fn next_date(&self, from: NaiveDate, until: NaiveDate) -> Option<NaiveDate> {
        if self.nearest_weekday != 0 || self.last_weekday {
            return self.next_date_by_day(from, until);
        }
        let mut date = from;
        while date <= until {
            let (month, day) = (date.month(), date.day());
            if self.months & (1 << month) != 0 {
                let last = last_day_of_month(date);
                // Weekday of the 1st, 0 = Sunday; `day - 1` is at most 30.
                let first_wd = (date.weekday().num_days_from_sunday() + 35 - (day - 1)) % 7;
                let rest = self.day_mask(last, first_wd) & (u32::MAX << day);
                if rest != 0 {
                    let found = date.with_day(rest.trailing_zeros())?;
                    return (found <= until).then_some(found);
                }
            }
            date = first_of_next_month(date)?;
        }
        None
    }

    /// The days (bit `d` for day `d`) of a month with `last` days whose 1st falls on weekday
    /// `first_wd` (0 = Sunday) that match the day fields, without `W` and `LW`.
    fn day_mask(&self, last: u32, first_wd: u32) -> u32 {
        let month_days = ((1u64 << (last + 1)) - 2) as u32;
        let mut dom = self.days;
        let mut before_last = self.days_before_last;
        while before_last != 0 {
            let n = before_last.trailing_zeros();
            if n < last {
                dom |= 1 << (last - n);
            }
            before_last &= before_last - 1;
        }
        // Bit k of `week`: the weekday of day k + 1 matches.
        let wd = u64::from(self.weekdays & 0x7f);
        let week = ((wd >> first_wd) | (wd << (7 - first_wd))) & 0x7f;
        let repeated = week | week << 7 | week << 14 | week << 21 | week << 28;
        let mut dow = (repeated << 1) as u32;
        let mut nth = self.nth_weekdays;
        while nth != 0 {
            let bit = nth.trailing_zeros();
            let (w, n) = (bit / 5, bit % 5);
            let day = 1 + (w + 7 - first_wd) % 7 + 7 * n;
            if day <= 31 {
                dow |= 1 << day;
            }
            nth &= nth - 1;
        }
        let mut last_wds = self.last_weekdays;
        if last_wds != 0 {
            let last_wd = (first_wd + last - 1) % 7;
            while last_wds != 0 {
                let w = last_wds.trailing_zeros();
                dow |= 1 << (last - (last_wd + 7 - w) % 7);
                last_wds &= last_wds - 1;
            }
        }
        let days = if self.dom_star || self.dow_star {
            dom & dow
        } else {
            dom | dow
        };
        days & month_days
    }

    /// The first date on or after `year-month-day` (whose weekday is `weekday`, 0 = Sunday) that
    /// matches the date fields, looking at no more than `months` months starting with that one:
    /// `(year, month, day)`. `None` when there is none in that window, or when the expression uses
    /// `W` or `LW` (the general path handles those). The date must be valid.
    pub(crate) fn next_date_within(
        &self,
        (mut year, mut month, mut day): (i64, u32, u32),
        weekday: u32,
        months: u32,
    ) -> Option<(i64, u32, u32)> {
        if self.nearest_weekday != 0 || self.last_weekday {
            return None;
        }
        // Weekday of the 1st, 0 = Sunday; `day - 1` is at most 30.
        let mut first_wd = (weekday + 35 - (day - 1)) % 7;
        for _ in 0..months {
            let last = month_length(year, month);
            if self.months & (1 << month) != 0 {
                let rest = self.day_mask(last, first_wd) & (u32::MAX << day);
                if rest != 0 {
                    return Some((year, month, rest.trailing_zeros()));
                }
            }
            first_wd = (first_wd + last) % 7;
            day = 1;
            (year, month) = if month == 12 {
                (year + 1, 1)
            } else {
                (year, month + 1)
            };
        }
        None
    }

    /// [`CronExpr::next_date`], one day at a time (for `W` and `LW`).
    fn next_date_by_day(&self, from: NaiveDate, until: NaiveDate) -> Option<NaiveDate> {
        let mut date = from;
        while date <= until {
            if self.months & (1 << date.month()) == 0 {
                date = first_of_next_month(date)?;
                continue;
            }
            let last = last_day_of_month(date);
            let mut day = date;
            loop {
                if self.matches_day(day, last) {
                    return (day <= until).then_some(day);
                }
                if day.day() >= last {
                    break;
                }
                day = day.succ_opt()?;
            }
            date = first_of_next_month(date)?;
        }
        None
    }

    fn fires_in_cycle(&self) -> bool {
        let start = NaiveDate::from_ymd_opt(2000, 1, 1).expect("valid date");
        let until = start + chrono::Days::new(CYCLE_DAYS);
        self.next_date(start, until).is_some()
    }

    /// The first time of day, in seconds after midnight, at or after `from` that matches the second,
    /// minute and hour fields.
    pub(crate) fn next_time_of_day(&self, from: u32) -> Option<u32> {
        let (mut h, mut m, mut s) = (from / 3600, from / 60 % 60, from % 60);
        loop {
            let nh = next_bit(self.hours as u64, h)?;
            if nh != h {
                (h, m, s) = (nh, 0, 0);
            }
            match next_bit(self.minutes, m) {
                None => {
                    (h, m, s) = (h + 1, 0, 0);
                    continue;
                }
                Some(nm) if nm != m => (m, s) = (nm, 0),
                Some(_) => {}
            }
            match next_bit(self.seconds, s) {
                Some(ns) => return Some(h * 3600 + m * 60 + ns),
                None => (m, s) = (m + 1, 0),
            }
            if m > 59 {
                (h, m) = (h + 1, 0);
            }
        }
    }
}

fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = mask & (u64::MAX << from);
    (rest != 0).then(|| rest.trailing_zeros())
}

fn first_of_next_month(date: NaiveDate) -> Option<NaiveDate> {
    let (year, month) = match date.month() {
        12 => (date.year().checked_add(1)?, 1),
        m => (date.year(), m + 1),
    };
    NaiveDate::from_ymd_opt(year, month, 1)
}

fn is_leap_year(year: i64) -> bool {
    year.rem_euclid(4) == 0 && (year.rem_euclid(100) != 0 || year.rem_euclid(400) == 0)
}

pub(crate) fn last_day_of_month(date: NaiveDate) -> u32 {
    month_length(i64::from(date.year()), date.month())
}

/// The number of days of `month` (1..=12) of the proleptic Gregorian `year`.
fn month_length(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn last_weekday_of_month(date: NaiveDate, last: u32) -> u32 {
    let last_date = date.with_day(last).unwrap_or(date);
    match last_date.weekday() {
        Weekday::Sat => last - 1,
        Weekday::Sun => last - 2,
        _ => last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FieldError;

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    #[test]
    fn vixie_or_rule_for_restricted_day_fields() {
        let e = CronExpr::parse("0 0 13 * 5").unwrap();
        assert!(e.matches_date(date(2026, 11, 13))); // the 13th (a Friday too)
        assert!(e.matches_date(date(2026, 10, 13))); // a Tuesday 13th
        assert!(e.matches_date(date(2026, 11, 6))); // a Friday
        assert!(!e.matches_date(date(2026, 11, 5)));
    }

    #[test]
    fn star_day_field_means_and() {
        let e = CronExpr::parse("0 0 */2 * 1").unwrap();
        // Vixie: a field starting with `*` sets the star flag, so both must match.
        assert!(e.matches_date(date(2026, 11, 9))); // Monday, odd day
        assert!(!e.matches_date(date(2026, 11, 16))); // Monday, even day
        assert!(!e.matches_date(date(2026, 11, 11))); // odd, Wednesday
    }

    #[test]
    fn weekday_numbering_is_unix() {
        let e = CronExpr::parse("0 9 * * 1-5").unwrap();
        assert!(e.matches_date(date(2026, 11, 30))); // Monday
        assert!(!e.matches_date(date(2026, 11, 29))); // Sunday
        let sun7 = CronExpr::parse("0 9 * * 7").unwrap();
        assert!(sun7.matches_date(date(2026, 11, 29)));
        let names = CronExpr::parse("0 9 * * mon-FRI").unwrap();
        assert_eq!(names.weekdays, e.weekdays);
    }

    #[test]
    fn last_and_nth_modifiers() {
        let last = CronExpr::parse("0 0 L * *").unwrap();
        assert!(last.matches_date(date(2028, 2, 29)));
        assert!(!last.matches_date(date(2028, 2, 28)));
        let third_friday = CronExpr::parse("0 0 * * 5#3").unwrap();
        assert!(third_friday.matches_date(date(2026, 11, 20)));
        assert!(!third_friday.matches_date(date(2026, 11, 13)));
        let last_friday = CronExpr::parse("0 0 * * FRIL").unwrap();
        assert!(last_friday.matches_date(date(2026, 11, 27)));
        assert!(!last_friday.matches_date(date(2026, 11, 20)));
        let before_last = CronExpr::parse("0 0 L-2 * *").unwrap();
        assert!(before_last.matches_date(date(2026, 11, 28)));
        let lw = CronExpr::parse("0 0 LW * *").unwrap();
        assert!(lw.matches_date(date(2026, 5, 29))); // May 31 2026 is a Sunday
        let w = CronExpr::parse("0 0 1W * *").unwrap();
        assert!(w.matches_date(date(2026, 8, 3))); // Aug 1 2026 is a Saturday → Monday 3rd
        let w15 = CronExpr::parse("0 0 15W * *").unwrap();
        assert!(w15.matches_date(date(2026, 11, 16))); // Nov 15 2026 is a Sunday → Monday 16th
        assert!(!w15.matches_date(date(2026, 11, 15)));
    }

    #[test]
    fn shorthands() {
        assert_eq!(
            CronExpr::parse("@daily").unwrap().hours,
            CronExpr::parse("0 0 * * *").unwrap().hours
        );
        assert!(CronExpr::parse("@daily").unwrap().is_fixed_time());
        assert!(!CronExpr::parse("@hourly").unwrap().is_fixed_time());
        assert!(matches!(
            CronExpr::parse("@reboot"),
            Err(ParseError::UnknownShorthand(_))
        ));
    }

    #[test]
    fn time_of_day_search() {
        let e = CronExpr::parse("*/20 15 9-10 * * *").unwrap();
        assert_eq!(e.next_time_of_day(0), Some(9 * 3600 + 15 * 60));
        assert_eq!(
            e.next_time_of_day(9 * 3600 + 15 * 60 + 41),
            Some(10 * 3600 + 15 * 60)
        );
        assert_eq!(e.next_time_of_day(10 * 3600 + 15 * 60 + 41), None);
    }

    #[test]
    fn errors_name_field_and_reason() {
        let err = CronExpr::parse("61 * * * *").unwrap_err();
        assert_eq!(
            err.to_string(),
            "minute field `61`: 61 is out of range 0-59"
        );
        assert!(matches!(
            CronExpr::parse("* * * *"),
            Err(ParseError::FieldCount { found: 4 })
        ));
        assert!(matches!(CronExpr::parse("   "), Err(ParseError::Empty)));
        assert!(matches!(
            CronExpr::parse("0 0 30 2 *"),
            Err(ParseError::NeverFires(_))
        ));
        assert!(matches!(
            CronExpr::parse("*/0 * * * *"),
            Err(ParseError::Field {
                reason: FieldError::ZeroStep,
                ..
            })
        ));
        assert!(matches!(
            CronExpr::parse("0 0 * * 5#6"),
            Err(ParseError::Field {
                reason: FieldError::NthOutOfRange(6),
                ..
            })
        ));
        assert!(matches!(
            CronExpr::parse("0 5-1 * * *"),
            Err(ParseError::Field {
                field: Field::Hour,
                reason: FieldError::RangeReversed { .. },
                ..
            })
        ));
        let many = vec!["*"; 200].join(" ");
        assert!(matches!(
            CronExpr::parse(&many),
            Err(ParseError::FieldCount { found: 200 })
        ));
        let nul = CronExpr::parse("0\0 * * * *").unwrap_err().to_string();
        assert!(nul.contains("\\0"), "{nul}");
        let long = format!("{} * * * *", "1".repeat(10_000));
        let msg = CronExpr::parse(&long).unwrap_err().to_string();
        assert!(msg.len() < 200, "{msg}");
    }

    #[test]
    fn month_lengths_match_chrono() {
        for year in (-1200..2800).step_by(1) {
            for month in 1..=12 {
                let d = date(year, month, 1);
                let next = d.checked_add_months(chrono::Months::new(1)).unwrap();
                assert_eq!(first_of_next_month(d), Some(next));
                assert_eq!(last_day_of_month(d), next.pred_opt().unwrap().day());
            }
        }
    }

    #[test]
    fn day_masks_match_day_by_day() {
        let exprs = [
            "0 0 * * *",
            "0 0 L * *",
            "0 0 L-3,L-30,5 * *",
            "0 0 13 * 5",
            "0 0 */2 * 1",
            "0 0 * * 5#3,1#5,0#1",
            "0 0 * * FRIL,SUNL",
            "0 0 1-7 * 1L",
            "0 0 L * 2#5",
            "0 0 ? * MON-FRI",
            "0 0 31 * 6L",
        ];
        for text in exprs {
            let e = CronExpr::parse(text).unwrap();
            let mut d = date(2023, 12, 20);
            while d < date(2030, 3, 1) {
                let expected = e.next_date_by_day(d, date(2040, 1, 1));
                assert_eq!(e.next_date(d, date(2040, 1, 1)), expected, "{text} {d}");
                d = d.succ_opt().unwrap();
            }
        }
    }

    #[test]
    fn rare_but_possible_dates_are_accepted() {
        // Feb 29 every four years; the fifth Monday of February only in some leap years.
        assert!(CronExpr::parse("0 0 29 2 *").is_ok());
        assert!(CronExpr::parse("0 0 * 2 1#5").is_ok());
        assert!(CronExpr::parse("0 0 31 4,6,9,11 *").is_err());
    }
}
