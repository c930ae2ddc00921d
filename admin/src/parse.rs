//! The one reading of every operator input that is not a job name: instants, durations, run
//! statuses, page sizes, rates and audit ids. The HTTP router's query strings and bodies, the
//! dashboard's forms and the CLI's arguments all read them here, so a value accepted by one front
//! end is accepted, and means the same, in every other.
//!
//! The leniency is one rule, the same everywhere:
//!
//! - blanks around a value are ignored, and an empty value of an optional field is an absent one;
//! - an **instant** is RFC 3339 with its offset (`2026-03-08T02:00:00+09:00`, `2026-03-07T17:00:00Z`,
//!   fractions of a second allowed, `T` or a blank between date and time), where a blank in place of
//!   the `+` of the offset is read as `+` (a query string decodes `+` to a blank); or, **in UTC**, a
//!   wall time without offset (`2026-03-07T17:00`, `2026-03-07T17:00:00`, `2026-03-07 17:00:00`, as a
//!   browser's `datetime-local` field sends it) or a date (`2026-03-07`, midnight UTC). An instant
//!   without an offset is never read in the server's, the browser's or the job's zone;
//! - a **duration** is a number of seconds, whole or not, from 0 to [`MAX_WAIT`];
//! - a **run status** is one of its names in any case (`failed`, `FAILED`);
//! - a **page size** is a whole number from 1 to [`MAX_PAGE`](crate::MAX_PAGE), [`DEFAULT_PAGE`] when
//!   absent;
//! - a **rate** is a number of runs per second from [`MIN_PER_SECOND`] to [`MAX_PER_SECOND`].
//!
//! Every refusal is [`AdminError::Invalid`] naming the field as the caller names it, with the input
//! escaped and shortened; no input, however long or strange, makes a parser panic.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use slotguard::store::{RunStatus, UnknownRunStatus};

use crate::{
    AdminError, DEFAULT_PAGE, MAX_PER_SECOND, MAX_WAIT, MIN_PER_SECOND, parse_page, shown,
};

/// The example an instant field shows: RFC 3339 in UTC.
pub const INSTANT_EXAMPLE: &str = "2026-03-07T17:00:00Z";

/// Wall-time forms read in UTC, tried in order after RFC 3339.
const WALL_FORMS: [&str; 6] = [
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%dT%H:%M",
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%dt%H:%M:%S%.f",
    "%Y-%m-%dt%H:%M",
];

/// A value that is there: an absent field, and one that is empty or blank, are both `None`.
pub fn present(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// Reads an instant by the [module's rule](self).
///
/// # Errors
/// [`AdminError::Invalid`] for `field` when `text` is none of the accepted forms, or names a date
/// that does not exist (`2026-02-30`).
pub fn instant(field: &'static str, text: &str) -> Result<DateTime<Utc>, AdminError> {
    let trimmed = text.trim();
    if let Some(at) = rfc3339(trimmed) {
        return Ok(at);
    }
    for form in WALL_FORMS {
        if let Ok(wall) = NaiveDateTime::parse_from_str(trimmed, form) {
            return Ok(wall.and_utc());
        }
    }
    if let Ok(date) = NaiveDate::parse_from_str(trimmed, "%Y-%m-%d") {
        return Ok(date.and_time(NaiveTime::MIN).and_utc());
    }
    Err(AdminError::Invalid {
        field,
        problem: format!(
            "`{}` is not an RFC 3339 instant (2026-03-08T02:00:00+09:00) or a UTC wall time \
             or date (2026-03-07T17:00)",
            shown(text)
        ),
    })
}

/// RFC 3339, with a blank before the offset read as the `+` a query string decoded to it.
fn rfc3339(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    // Past the date, so that the blank between a date and a time is left alone.
    let blank = text.rfind(' ').filter(|&i| i > "2026-03-08".len())?;
    let repaired = format!("{}+{}", &text[..blank], &text[blank + 1..]);
    DateTime::parse_from_rfc3339(&repaired)
        .ok()
        .map(|at| at.with_timezone(&Utc))
}

/// An optional instant: absent or empty is `None`.
///
/// # Errors
/// As [`instant`].
pub fn maybe_instant(
    field: &'static str,
    text: Option<&str>,
) -> Result<Option<DateTime<Utc>>, AdminError> {
    present(text).map(|t| instant(field, t)).transpose()
}

/// Reads a wait by the [module's rule](self): seconds, whole or not, from 0 to [`MAX_WAIT`].
///
/// # Errors
/// [`AdminError::Invalid`] for `field`: not a number, or out of range.
pub fn seconds(field: &'static str, text: &str) -> Result<Duration, AdminError> {
    let max = MAX_WAIT.as_secs_f64();
    let value = number(field, text, "a number of seconds")?;
    if !(0.0..=max).contains(&value) {
        return Err(AdminError::Invalid {
            field,
            problem: format!(
                "{} is out of range: expected 0 to {max} seconds",
                shown(text.trim())
            ),
        });
    }
    Ok(Duration::from_secs_f64(value))
}

/// Reads a run status by the [module's rule](self): a status name in any case.
///
/// # Errors
/// [`AdminError::Invalid`] for `field`, listing the statuses.
pub fn status(field: &'static str, text: &str) -> Result<RunStatus, AdminError> {
    text.trim()
        .to_ascii_lowercase()
        .parse()
        .map_err(|_: UnknownRunStatus| {
            // The message of the store's own parser, on the input as given.
            let problem = text
                .parse::<RunStatus>()
                .err()
                .map_or_else(|| "is not a run status".to_owned(), |e| e.to_string());
            AdminError::Invalid { field, problem }
        })
}

/// Reads an optional page size: [`DEFAULT_PAGE`] when absent or empty, else as [`parse_page`].
///
/// # Errors
/// As [`parse_page`].
pub fn page(text: Option<&str>) -> Result<usize, AdminError> {
    present(text).map_or(Ok(DEFAULT_PAGE), parse_page)
}

/// Reads a rate by the [module's rule](self): runs per second from [`MIN_PER_SECOND`] to
/// [`MAX_PER_SECOND`].
///
/// # Errors
/// [`AdminError::Invalid`] for `field`: not a number, or out of range.
pub fn rate(field: &'static str, text: &str) -> Result<f64, AdminError> {
    let value = number(field, text, "a number of runs per second")?;
    check_rate(field, value)
}

/// Checks a rate: a number from [`MIN_PER_SECOND`] to [`MAX_PER_SECOND`] runs per second.
///
/// # Errors
/// [`AdminError::Invalid`] for `field`.
pub fn check_rate(field: &'static str, per_second: f64) -> Result<f64, AdminError> {
    if (MIN_PER_SECOND..=MAX_PER_SECOND).contains(&per_second) {
        return Ok(per_second);
    }
    Err(AdminError::Invalid {
        field,
        problem: format!(
            "{per_second} is out of range: expected {MIN_PER_SECOND} to {MAX_PER_SECOND} runs per \
             second"
        ),
    })
}

/// Reads the id of an audit record (the `before` of a page of the audit trail).
///
/// # Errors
/// [`AdminError::Invalid`] for `field` when `text` is not a whole number.
pub fn record_id(field: &'static str, text: &str) -> Result<i64, AdminError> {
    text.trim().parse().map_err(|_| AdminError::Invalid {
        field,
        problem: format!("`{}` is not the id of an audit record", shown(text)),
    })
}

/// A finite decimal number; `what` names what it counts, for the message.
fn number(field: &'static str, text: &str, what: &str) -> Result<f64, AdminError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| AdminError::Invalid {
            field,
            problem: format!("`{}` is not {what}", shown(text)),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn utc(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn instants_are_read_in_every_accepted_form() {
        let want = utc("2026-03-07T17:00:00Z");
        for text in [
            "2026-03-07T17:00:00Z",
            "2026-03-08T02:00:00+09:00",
            "2026-03-08T02:00:00 09:00",
            "2026-03-07 17:00:00Z",
            "2026-03-07T17:00:00.000Z",
            "2026-03-07T17:00",
            "2026-03-07T17:00:00",
            "2026-03-07 17:00:00",
            "2026-03-07 17:00",
            " 2026-03-07T17:00:00Z ",
        ] {
            assert_eq!(instant("from", text), Ok(want), "{text}");
        }
        assert_eq!(
            instant("from", "2026-03-07"),
            Ok(utc("2026-03-07T00:00:00Z"))
        );
        assert_eq!(
            instant("from", "2026-03-07T17:00:00.250Z"),
            Ok(want + chrono::Duration::milliseconds(250))
        );
        assert_eq!(maybe_instant("to", Some("  ")), Ok(None));
        assert_eq!(maybe_instant("to", None), Ok(None));
    }

    #[test]
    fn malformed_instants_name_their_field() {
        for text in [
            "",
            "yesterday",
            "2026-02-30T00:00:00Z",
            "2026-13-01",
            "<b>soon</b>",
            "2026-03-07T25:00",
            "2026-03-07T17:00:00+25:00",
            "1772902800",
            "２０２６-03-07",
        ] {
            let error = instant("scheduleSlot", text).unwrap_err();
            assert!(
                matches!(
                    error,
                    AdminError::Invalid {
                        field: "scheduleSlot",
                        ..
                    }
                ),
                "{text}: {error}"
            );
        }
        let long = "9".repeat(10_000);
        let message = instant("to", &long).unwrap_err().to_string();
        assert!(message.len() < 400, "{message}");
    }

    #[test]
    fn durations_rates_statuses_pages_and_ids() {
        assert_eq!(seconds("wait", " 1.5 "), Ok(Duration::from_millis(1_500)));
        assert_eq!(seconds("wait", "3600"), Ok(MAX_WAIT));
        for bad in ["-1", "3600.5", "NaN", "inf", "1e400", "soon", ""] {
            assert!(seconds("wait", bad).is_err(), "{bad}");
        }
        assert_eq!(rate("perSecond", "0.5"), Ok(0.5));
        for bad in ["0", "1001", "NaN", "-inf", "fast"] {
            let error = rate("perSecond", bad).unwrap_err();
            assert!(matches!(
                error,
                AdminError::Invalid {
                    field: "perSecond",
                    ..
                }
            ));
        }
        assert_eq!(status("status", " FAILED "), Ok(RunStatus::Failed));
        assert_eq!(status("status", "dead"), Ok(RunStatus::Dead));
        assert!(status("status", "broken").is_err());
        assert_eq!(page(None), Ok(DEFAULT_PAGE));
        assert_eq!(page(Some("")), Ok(DEFAULT_PAGE));
        assert_eq!(page(Some(" 7 ")), Ok(7));
        assert!(page(Some("0")).is_err());
        assert_eq!(record_id("before", " 42 "), Ok(42));
        assert!(record_id("before", "42x").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Hostile input of any shape is refused with a typed error or read; never a panic.
        #[test]
        fn no_input_makes_a_parser_panic(text in ".{0,80}") {
            let _ = instant("from", &text);
            let _ = seconds("wait", &text);
            let _ = rate("perSecond", &text);
            let _ = status("status", &text);
            let _ = page(Some(&text));
            let _ = record_id("before", &text);
        }

        /// Near misses of the accepted forms: digits, separators and offsets shuffled.
        #[test]
        fn near_misses_of_instants_never_panic(text in "[0-9]{1,5}[-T: +Z.]{0,2}[0-9]{0,3}[-T: +Z.]{0,2}[0-9]{0,3}[-T: +Z.]{0,2}[0-9]{0,3}") {
            if let Err(error) = instant("from", &text) {
                let named = matches!(error, AdminError::Invalid { field: "from", .. });
                prop_assert!(named, "{}", error);
            }
        }

        /// Every instant written the way the API writes it is read back as itself.
        #[test]
        fn written_instants_are_read_back(secs in 0i64..4_102_444_800, millis in 0u32..1_000) {
            let at = DateTime::from_timestamp(secs, millis * 1_000_000).unwrap();
            prop_assert_eq!(instant("from", &crate::rfc3339(&at)), Ok(at));
        }
    }
}
