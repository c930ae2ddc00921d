//! DST expectations computed independently of slotguard's slot engine: the instants a simple
//! `sec min hour * * *` pattern fires at in a zone, under each DST policy as docs/time.md describes
//! it, from chrono-tz's offsets and nothing else.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDateTime, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// The DST policies of docs/time.md, as this harness understands them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// cronie's rule.
    Vixie,
    /// Gap skipped, overlap once.
    Skip,
    /// Gap read with the old offset, overlap once.
    Shift,
    /// Gap skipped, overlap at both instants.
    Instant,
}

/// Every policy.
pub const POLICIES: [Policy; 4] = [Policy::Vixie, Policy::Skip, Policy::Shift, Policy::Instant];

impl Policy {
    /// The name slotguard gives the policy.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Vixie => "vixie",
            Policy::Skip => "skip",
            Policy::Shift => "shift",
            Policy::Instant => "instant",
        }
    }

    /// Whether a wall time that happens twice fires at both instants.
    pub fn twice(self, fixed: bool) -> bool {
        match self {
            Policy::Instant => true,
            Policy::Vixie => !fixed,
            Policy::Skip | Policy::Shift => false,
        }
    }
}

/// `sec min hour * * *` with a seconds step, a minute list and an hour list. *Fixed-time* spells
/// the seconds `0-59/step` instead of `*/step` (docs/time.md: a job is fixed-time when none of its
/// seconds, minute and hour fields starts with `*`); both match the same wall times.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// The seconds step (1: every second).
    pub step: u32,
    /// The minutes.
    pub minutes: Vec<u32>,
    /// The hours.
    pub hours: Vec<u32>,
}

impl Pattern {
    /// Whether a wall time matches.
    pub fn matches(&self, wall: NaiveDateTime) -> bool {
        wall.second().is_multiple_of(self.step)
            && self.minutes.contains(&wall.minute())
            && self.hours.contains(&wall.hour())
    }

    /// The expression, fixed-time or not.
    pub fn cron(&self, fixed: bool) -> String {
        let list = |v: &[u32]| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let secs = match (fixed, self.step) {
            (true, 1) => "0-59".to_owned(),
            (true, n) => format!("0-59/{n}"),
            (false, 1) => "*".to_owned(),
            (false, n) => format!("*/{n}"),
        };
        format!("{secs} {} {} * * *", list(&self.minutes), list(&self.hours))
    }
}

/// One zone's offset change: the instant, and the offsets (seconds east of UTC) before and after.
#[derive(Debug, Clone, Copy)]
pub struct Change {
    /// The first instant of the new offset.
    pub at: DateTime<Utc>,
    /// The offset before, seconds east of UTC.
    pub before: i64,
    /// The offset after.
    pub after: i64,
}

/// The offset of `tz` at `at`, seconds east of UTC.
pub fn offset(tz: Tz, at: DateTime<Utc>) -> i64 {
    i64::from(
        tz.offset_from_utc_datetime(&at.naive_utc())
            .fix()
            .local_minus_utc(),
    )
}

/// `at` read in `tz`.
pub fn wall(tz: Tz, at: DateTime<Utc>) -> NaiveDateTime {
    at.with_timezone(&tz).naive_local()
}

/// The offset changes in `[from, to)`, to the second, read from chrono-tz.
pub fn changes(tz: Tz, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<Change> {
    let mut out = Vec::new();
    let mut t = from;
    let mut current = offset(tz, t);
    while t < to {
        let next = t + chrono::Duration::minutes(1);
        if offset(tz, next) != current {
            let mut s = t;
            while offset(tz, s) == current {
                s += chrono::Duration::seconds(1);
            }
            let after = offset(tz, s);
            out.push(Change {
                at: s,
                before: current,
                after,
            });
            current = after;
        }
        t = next;
    }
    out
}

/// The slots `pattern` gives in `[from, to]` in `tz` under `policy`, each with the wall time that
/// names it, as docs/time.md says:
///
/// - a wall time that exists once fires at its instant;
/// - one that happens twice fires at the first instant, and at the second too under `instant`, and
///   under `vixie` for jobs that are not fixed-time;
/// - one in a gap fires, under `vixie` for fixed-time jobs and gaps under 3 h, at the transition
///   instant; under `shift` at the wall time read with the offset before the transition; else never.
///
/// Several candidates at one instant fire once, named by the earliest wall time.
pub fn expected(
    tz: Tz,
    pattern: &Pattern,
    fixed: bool,
    policy: Policy,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> BTreeMap<DateTime<Utc>, NaiveDateTime> {
    let mut out: BTreeMap<DateTime<Utc>, NaiveDateTime> = BTreeMap::new();
    let mut put = |at: DateTime<Utc>, w: NaiveDateTime| {
        if at >= from && at <= to {
            out.entry(at)
                .and_modify(|old| *old = (*old).min(w))
                .or_insert(w);
        }
    };
    let mut t = from;
    while t <= to {
        let w = wall(tz, t);
        if pattern.matches(w) {
            let second_pass = match tz.from_local_datetime(&w) {
                chrono::LocalResult::Ambiguous(_, later) => later.to_utc() == t,
                _ => false,
            };
            if !second_pass || policy.twice(fixed) {
                put(t, w);
            }
        }
        t += chrono::Duration::seconds(1);
    }
    let hours = chrono::Duration::hours(4);
    for c in changes(tz, from - hours, to + hours) {
        if c.after <= c.before {
            continue;
        }
        let gap = c.after - c.before;
        let first = c.at.naive_utc() + chrono::Duration::seconds(c.before);
        for s in 0..gap {
            let w = first + chrono::Duration::seconds(s);
            if !pattern.matches(w) {
                continue;
            }
            match policy {
                Policy::Vixie if fixed && gap < 3 * 3600 => put(c.at, w),
                Policy::Shift => put((w - chrono::Duration::seconds(c.before)).and_utc(), w),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    fn walls(m: &BTreeMap<DateTime<Utc>, NaiveDateTime>) -> Vec<String> {
        m.iter()
            .map(|(at, w)| format!("{} {}", at.format("%H:%M:%S"), w.format("%H:%M:%S")))
            .collect()
    }

    /// docs/time.md's worked example, New York spring forward: `30 2 * * *` is 03:00 EDT under
    /// vixie, 03:30 EDT under shift, nothing under skip and instant.
    #[test]
    fn new_york_spring_forward_as_documented() {
        let tz: Tz = "America/New_York".parse().unwrap();
        let p = Pattern {
            step: 60,
            minutes: vec![30],
            hours: vec![2],
        };
        let (from, to) = (utc("2026-03-08T05:00:00Z"), utc("2026-03-08T09:00:00Z"));
        let got = |policy, fixed| walls(&expected(tz, &p, fixed, policy, from, to));
        assert_eq!(got(Policy::Vixie, true), ["07:00:00 02:30:00"]);
        assert!(got(Policy::Vixie, false).is_empty());
        assert!(got(Policy::Skip, true).is_empty());
        assert_eq!(got(Policy::Shift, true), ["07:30:00 02:30:00"]);
        assert!(got(Policy::Instant, true).is_empty());
    }

    /// Fall back: `30 1 * * *` is 01:30 EDT once, and 01:30 EST too under instant (and vixie for a
    /// job that is not fixed-time).
    #[test]
    fn new_york_fall_back_as_documented() {
        let tz: Tz = "America/New_York".parse().unwrap();
        let p = Pattern {
            step: 60,
            minutes: vec![30],
            hours: vec![1],
        };
        let (from, to) = (utc("2026-11-01T04:00:00Z"), utc("2026-11-01T08:00:00Z"));
        let got = |policy, fixed| walls(&expected(tz, &p, fixed, policy, from, to));
        assert_eq!(got(Policy::Vixie, true), ["05:30:00 01:30:00"]);
        assert_eq!(
            got(Policy::Vixie, false),
            ["05:30:00 01:30:00", "06:30:00 01:30:00"]
        );
        assert_eq!(got(Policy::Skip, false), ["05:30:00 01:30:00"]);
        assert_eq!(got(Policy::Shift, false), ["05:30:00 01:30:00"]);
        assert_eq!(
            got(Policy::Instant, true),
            ["05:30:00 01:30:00", "06:30:00 01:30:00"]
        );
    }

    /// Santiago loses midnight: under vixie every fixed gap time fires once at the transition, named
    /// by the first (00:00, so the business date is the new day).
    #[test]
    fn santiago_midnight_gap() {
        let tz: Tz = "America/Santiago".parse().unwrap();
        let p = Pattern {
            step: 20,
            minutes: vec![59, 0],
            hours: vec![23, 0],
        };
        let (from, to) = (utc("2026-09-06T03:58:00Z"), utc("2026-09-06T04:01:00Z"));
        let got = expected(tz, &p, true, Policy::Vixie, from, to);
        assert_eq!(
            walls(&got),
            [
                "03:59:00 23:59:00",
                "03:59:20 23:59:20",
                "03:59:40 23:59:40",
                "04:00:00 00:00:00"
            ]
        );
        let shifted = expected(tz, &p, true, Policy::Shift, from, to);
        assert_eq!(shifted.len(), 3 + 3);
    }
}
