//! Calendar arithmetic on integer days (counted from 1970-01-01) and wall-clock seconds (a naive
//! date-time counted as if it were UTC), for the slot engine's cache-only path and its searches.

use chrono::{DateTime, NaiveDate, Utc};

pub(super) const DAY: i64 = 86_400;
/// The first and last instants chrono represents, in seconds.
pub(super) const MIN_INSTANT: i64 = DateTime::<Utc>::MIN_UTC.timestamp();
pub(super) const MAX_INSTANT: i64 = DateTime::<Utc>::MAX_UTC.timestamp();

/// The proleptic Gregorian `(year, month, day)` of day `days` counted from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
pub(super) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// The inverse of [`civil_from_days`] (Howard Hinnant's `days_from_civil`).
pub(super) fn days_from_civil((year, month, day): (i64, u32, u32)) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let mp = i64::from(if month > 2 { month - 3 } else { month + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The weekday of day `days` counted from 1970-01-01 (a Thursday), 0 = Sunday.
pub(super) fn weekday_of(days: i64) -> u32 {
    (days + 4).rem_euclid(7) as u32
}

/// Wall-clock seconds (a naive date-time counted as if it were UTC) of the start of `date`.
pub(super) fn day_start(date: NaiveDate) -> i64 {
    date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp()
}

/// The date of wall second `wall`, clamped to the calendar.
pub(super) fn date_of(wall: i64) -> NaiveDate {
    DateTime::from_timestamp(wall.clamp(MIN_INSTANT, MAX_INSTANT), 0)
        .map_or(NaiveDate::MIN, |t| t.date_naive())
}

#[cfg(test)]
mod tests {
    use chrono::{Datelike, TimeDelta};

    use super::*;
    use crate::schedule::{FAST_FIRST, FAST_LAST};

    #[test]
    fn civil_arithmetic_matches_chrono() {
        let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        let mut days = -1_000_000i64;
        while days <= 3_000_000 {
            let date = epoch + TimeDelta::days(days);
            let civil = (i64::from(date.year()), date.month(), date.day());
            assert_eq!(civil_from_days(days), civil, "{date}");
            assert_eq!(days_from_civil(civil), days, "{date}");
            assert_eq!(day_start(date), days * DAY, "{date}");
            assert_eq!(
                weekday_of(days),
                date.weekday().num_days_from_sunday(),
                "{date}"
            );
            days += if (-800_000..800_000).contains(&days) {
                1
            } else {
                97
            };
        }
        assert_eq!(
            days_from_civil((1, 1, 1)) * DAY,
            FAST_FIRST,
            "FAST_FIRST is 0001-01-01"
        );
        assert_eq!(
            days_from_civil((9997, 1, 1)) * DAY - 1,
            FAST_LAST,
            "FAST_LAST is the end of 9996"
        );
    }
}
