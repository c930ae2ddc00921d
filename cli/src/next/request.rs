//! One `next` request, validated the same way whichever mode it came from.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::{self, Deserializer, Unexpected, Visitor};
use slotguard_cron::{DstPolicy, Schedule, ScheduleError, Slot, UnknownDstPolicy};

use super::calendar::{CalendarProblem, CalendarSpec, rule};
use super::shown::shown;

/// The zone used when a request names none.
pub(crate) const DEFAULT_ZONE: &str = "UTC";
/// The number of slots listed when a request does not say.
pub(crate) const DEFAULT_COUNT: i64 = 5;
/// The most slots one request may ask for: enough for any person or test, small enough that one line of
/// a JSON stream cannot ask for gigabytes.
pub(crate) const MAX_COUNT: i64 = 10_000;

/// The fields of a request as given, before validation. The JSON mode reads exactly these keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a JSON object with `expr` and optional `tz`, `after`, `count`, `dst`, \
                 `calendar`, `adjust`, `shift`"
)]
pub(crate) struct Fields {
    /// The cron expression.
    pub(crate) expr: String,
    /// The IANA zone; [`DEFAULT_ZONE`] when absent.
    #[serde(default)]
    pub(crate) tz: Option<String>,
    /// RFC 3339 instant the slots are strictly after; now when absent.
    #[serde(default)]
    pub(crate) after: Option<String>,
    /// How many slots; [`DEFAULT_COUNT`] when absent.
    #[serde(default, deserialize_with = "count")]
    pub(crate) count: Option<i64>,
    /// The DST policy by name; `vixie` when absent.
    #[serde(default)]
    pub(crate) dst: Option<String>,
    /// The business calendar; none when absent.
    #[serde(default)]
    pub(crate) calendar: Option<CalendarSpec>,
    /// The business-day convention by name; `skip` when a calendar is given without one.
    #[serde(default)]
    pub(crate) adjust: Option<String>,
    /// The shift in business days; 0 when absent.
    #[serde(default)]
    pub(crate) shift: Option<i64>,
}

/// Reads `count` as any JSON integer, so that the range check and its message are the same as for
/// `--count`; anything else is refused with a message that says what a count is.
fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    struct Count;

    impl Visitor<'_> for Count {
        type Value = Option<i64>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a whole number from 1 to {MAX_COUNT}")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            i64::try_from(v)
                .map(Some)
                .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }

    deserializer.deserialize_any(Count)
}

/// Why a request cannot be answered. The messages are shown to people as they are, in both modes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    /// The expression or the zone.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The DST policy name.
    #[error(transparent)]
    Dst(#[from] UnknownDstPolicy),
    /// The calendar, convention or shift.
    #[error(transparent)]
    Calendar(#[from] CalendarProblem),
    /// The `after` instant.
    #[error(
        "after `{input}` is not an RFC 3339 instant such as 2026-03-08T00:00:00Z or \
         2026-03-08T09:00:00+09:00 ({reason})"
    )]
    After {
        /// The text given, shortened and escaped.
        input: String,
        /// What chrono found wrong with it.
        reason: chrono::ParseError,
    },
    /// The count.
    #[error("count {0} is out of range: expected 1 to {MAX_COUNT}")]
    Count(i64),
}

/// A valid request: a schedule, where to start and how many slots to list.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// Expression, zone and policy.
    pub(crate) schedule: Schedule,
    /// Slots are strictly after this instant.
    pub(crate) after: DateTime<Utc>,
    /// At most this many slots are listed.
    pub(crate) count: usize,
}

impl Request {
    /// Validates `fields`, filling in the defaults; `now` stands for an absent `after`.
    ///
    /// # Errors
    /// The first field that is wrong, in the order expression, zone, policy, calendar, convention,
    /// shift, after, count.
    pub(crate) fn new(fields: &Fields, now: DateTime<Utc>) -> Result<Self, RequestError> {
        let zone = fields.tz.as_deref().unwrap_or(DEFAULT_ZONE);
        let schedule = Schedule::parse(&fields.expr, zone)?;
        let dst = match &fields.dst {
            Some(name) => name.parse()?,
            None => DstPolicy::default(),
        };
        let mut schedule = schedule.with_dst(dst);
        let business = rule(
            fields.calendar.as_ref(),
            fields.adjust.as_deref(),
            fields.shift,
        )?;
        if let Some(business) = business {
            schedule = schedule.with_calendar(business);
        }
        let after = match &fields.after {
            Some(text) => parse_instant(text)?,
            None => now,
        };
        let count = fields.count.unwrap_or(DEFAULT_COUNT);
        if !(1..=MAX_COUNT).contains(&count) {
            return Err(RequestError::Count(count));
        }
        Ok(Request {
            schedule,
            after,
            // In range 1..=MAX_COUNT, so it fits.
            count: usize::try_from(count).unwrap_or(usize::MAX),
        })
    }

    /// The slots to list, in order: at most `count`, and only those RFC 3339 can write (years 0000 to
    /// 9999), so every instant printed can be read back by any RFC 3339 parser.
    pub(crate) fn slots(&self) -> impl Iterator<Item = Slot> + '_ {
        let (first, last) = representable();
        // One second before the first representable instant, since slots are strictly after.
        let floor = first - chrono::TimeDelta::seconds(1);
        self.schedule
            .slots_after(self.after.max(floor))
            .take_while(move |slot| slot.scheduled_at <= last)
            .take(self.count)
    }
}

/// The first and last whole-second instants RFC 3339 can write: 0000-01-01T00:00:00Z and
/// 9999-12-31T23:59:59Z.
pub(crate) fn representable() -> (DateTime<Utc>, DateTime<Utc>) {
    const FIRST: i64 = -62_167_219_200;
    const LAST: i64 = 253_402_300_799;
    (
        DateTime::from_timestamp(FIRST, 0).unwrap_or(DateTime::<Utc>::MIN_UTC),
        DateTime::from_timestamp(LAST, 0).unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

/// An instant as the JSON mode writes it: UTC, whole seconds, `Z` suffix.
pub(crate) fn utc_string(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn parse_instant(text: &str) -> Result<DateTime<Utc>, RequestError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|at| at.with_timezone(&Utc))
        .map_err(|reason| RequestError::After {
            input: shown(text),
            reason,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(expr: &str) -> Fields {
        Fields {
            expr: expr.to_owned(),
            ..Fields::default()
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_772_928_000, 0).unwrap() // 2026-03-08T00:00:00Z
    }

    #[test]
    fn defaults() {
        let request = Request::new(&fields("0 2 * * *"), now()).unwrap();
        assert_eq!(request.schedule.zone().name(), "UTC");
        assert_eq!(request.schedule.dst(), DstPolicy::Vixie);
        assert_eq!(request.after, now());
        assert_eq!(request.count, 5);
    }

    #[test]
    fn count_bounds() {
        for (count, ok) in [
            (0, false),
            (1, true),
            (10_000, true),
            (10_001, false),
            (-1, false),
        ] {
            let f = Fields {
                count: Some(count),
                ..fields("* * * * *")
            };
            assert_eq!(Request::new(&f, now()).is_ok(), ok, "count {count}");
        }
        let f = Fields {
            count: Some(10_001),
            ..fields("* * * * *")
        };
        assert_eq!(
            Request::new(&f, now()).unwrap_err().to_string(),
            "count 10001 is out of range: expected 1 to 10000"
        );
    }

    #[test]
    fn after_is_checked_and_escaped() {
        let f = Fields {
            after: Some("2026-02-30T00:00:00Z\0".to_owned()),
            ..fields("* * * * *")
        };
        let message = Request::new(&f, now()).unwrap_err().to_string();
        assert!(
            message.starts_with("after `2026-02-30T00:00:00Z\\0` is not"),
            "{message}"
        );
        let f = Fields {
            after: Some("2026-03-08T09:00:00+09:00".to_owned()),
            ..fields("* * * * *")
        };
        assert_eq!(Request::new(&f, now()).unwrap().after, now());
    }

    #[test]
    fn slots_stop_at_year_9999() {
        let f = Fields {
            after: Some("9999-12-31T23:00:00Z".to_owned()),
            count: Some(10),
            ..fields("30 * * * *")
        };
        let request = Request::new(&f, now()).unwrap();
        let slots: Vec<_> = request
            .slots()
            .map(|s| utc_string(s.scheduled_at))
            .collect();
        assert_eq!(slots, ["9999-12-31T23:30:00Z"]);
    }

    #[test]
    fn slots_start_at_year_0000() {
        // The offset puts `after` in year -1 in UTC.
        let f = Fields {
            after: Some("0000-01-01T00:00:00+23:00".to_owned()),
            count: Some(1),
            ..fields("0 * * * *")
        };
        let request = Request::new(&f, now()).unwrap();
        let slots: Vec<_> = request
            .slots()
            .map(|s| utc_string(s.scheduled_at))
            .collect();
        assert_eq!(slots, ["0000-01-01T00:00:00Z"]);
    }

    #[test]
    fn shown_is_short_and_escaped() {
        assert_eq!(shown("a\0b"), "a\\0b");
        let long = shown(&"x".repeat(10_000));
        assert!(long.ends_with("… (10000 characters)"));
        assert!(long.chars().count() < 80);
    }
}
