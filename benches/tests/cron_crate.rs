//! Why slotguard has its own cron engine: the `cron` crate (0.17), the benchmark's peer, next to
//! slotguard's `Schedule` on the points docs/DECISIONS.md names. Each test states what `cron` does
//! and what slotguard does instead, so that a new `cron` release that changes any of it fails here.
//!
//! ```text
//! cargo test -p slotguard-benches --test cron_crate
//! ```

use std::str::FromStr;

use chrono::{DateTime, Datelike, Utc, Weekday};
use chrono_tz::Tz;
use slotguard_cron::Schedule;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

/// The `cron` crate's next firing strictly after `after`, read in `zone`, as a UTC instant.
fn cron_next(expr: &str, zone: &str, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let zone: Tz = zone.parse().expect("zone");
    cron::Schedule::from_str(expr)
        .expect("cron parses")
        .after(&after.with_timezone(&zone))
        .next()
        .map(|t| t.with_timezone(&Utc))
}

fn ours_next(expr: &str, zone: &str, after: DateTime<Utc>) -> DateTime<Utc> {
    Schedule::parse(expr, zone)
        .expect("slotguard parses")
        .next_after(after)
        .expect("a next slot")
        .scheduled_at
}

/// `cron` numbers weekdays from 1 = Sunday: `1` is Sunday, where Unix cron's `1` is Monday.
#[test]
fn cron_numbers_sunday_as_one() {
    // Saturday 2026-03-07.
    let after = at("2026-03-07T12:00:00Z");
    let cron = cron_next("0 0 0 * * 1", "UTC", after).expect("a firing");
    assert_eq!(cron.weekday(), Weekday::Sun, "{cron}");
    let ours = ours_next("0 0 * * 1", "UTC", after);
    assert_eq!(ours.weekday(), Weekday::Mon, "{ours}");
}

/// `cron` fires only when day-of-month AND day-of-week match; Vixie cron (and slotguard) fire when
/// either does, if neither is `*`.
#[test]
fn cron_ands_day_of_month_with_day_of_week() {
    let after = at("2026-01-01T00:00:00Z");
    // The 13th or a Friday: Friday 2026-01-02 under Vixie's rule; `cron` waits for Friday the 13th.
    let cron = cron_next("0 0 0 13 * FRI", "UTC", after).expect("a firing");
    assert_eq!(cron, at("2026-02-13T00:00:00Z"));
    assert_eq!(
        ours_next("0 0 13 * FRI", "UTC", after),
        at("2026-01-02T00:00:00Z")
    );
}

/// `cron` has no `L` (last day of the month).
#[test]
fn cron_has_no_last_day_of_month() {
    assert!(cron::Schedule::from_str("0 0 0 L * *").is_err());
    assert_eq!(
        ours_next("0 0 L * *", "UTC", at("2026-02-10T00:00:00Z")),
        at("2026-02-28T00:00:00Z")
    );
}

/// `cron` needs a seconds field: a standard five-field line is refused.
#[test]
fn cron_refuses_five_fields() {
    assert!(cron::Schedule::from_str("0 2 * * *").is_err());
}

/// At New York's fall-back (2026-11-01, 01:00–02:00 happens twice) `cron` skips the repeated hour
/// and, inside it, answers an instant before the one it was asked about.
#[test]
fn cron_skips_and_goes_back_in_a_dst_overlap() {
    let zone = "America/New_York";
    // 01:48 EDT: the next quarter is 01:00 EST (06:00Z), the hour's second pass.
    let after = at("2026-11-01T05:48:00Z");
    assert_eq!(
        cron_next("0 */15 * * * *", zone, after),
        Some(at("2026-11-01T07:00:00Z")),
        "cron: 02:00 EST, the repeated hour skipped"
    );
    assert_eq!(
        ours_next("*/15 * * * *", zone, after),
        at("2026-11-01T06:00:00Z")
    );
    // 01:02 EST (06:02Z): `cron` answers 01:15 EDT (05:15Z), 47 minutes in the past.
    let after = at("2026-11-01T06:02:00Z");
    let cron = cron_next("0 */15 * * * *", zone, after).expect("a firing");
    assert_eq!(cron, at("2026-11-01T05:15:00Z"));
    assert!(cron < after, "in the past: {cron} after {after}");
    assert_eq!(
        ours_next("*/15 * * * *", zone, after),
        at("2026-11-01T06:15:00Z")
    );
}
