//! Which slots a stored schedule produces: each of its versions is in force from its
//! `effective_at` until the next version's, and a slot at instant `T` is a slot of the schedule
//! when the version in force at `T` produces it. Every replica, scheduler and operator computes
//! the same slots from the same versions (see [`store::schedules`](crate::store::schedules)).

use chrono::{DateTime, TimeDelta, Utc};
use slotguard_cron::{
    BusinessRule, DstPolicy, Schedule, ScheduleError, Slot, UnknownDstPolicy, parse_zone,
};

use crate::store::{CalendarStamp, ScheduleSpec, ScheduleVersion};

/// The most runs [`ScheduleSpec::remaining_runs`] may ask for.
pub const MAX_REMAINING_RUNS: u32 = 100_000;

/// What is wrong with a stored schedule's expression, zone or DST policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The expression or the zone.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The DST policy.
    #[error(transparent)]
    Dst(#[from] UnknownDstPolicy),
}

/// The schedule `spec` describes, on the job's business calendar if it has one.
pub fn compile(
    spec: &ScheduleSpec,
    calendar: Option<&BusinessRule>,
) -> Result<Schedule, SpecError> {
    let zone = parse_zone(&spec.zone).map_err(ScheduleError::from)?;
    let expr = spec.cron.parse().map_err(ScheduleError::Cron)?;
    let dst: DstPolicy = spec.dst.parse()?;
    let schedule = Schedule::new(expr, zone, dst);
    Ok(match calendar {
        Some(rule) => schedule.with_calendar(rule.clone()),
        None => schedule,
    })
}

/// One version, or one calendar change within a version, compiled: in force from `effective_at`;
/// `None` slots when it is removed, paused or spent.
#[derive(Debug, Clone)]
struct Span {
    version: i64,
    effective_at: DateTime<Utc>,
    slots: Option<Bounded>,
    /// The last operators' calendar override in force (`None`: the calendar as the code gives it).
    seq: Option<i64>,
}

/// A schedule between two instants (both included).
#[derive(Debug, Clone)]
struct Bounded {
    schedule: Schedule,
    from: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
}

impl Bounded {
    /// The first slot strictly after `after`, within the bounds.
    fn next_after(&self, after: DateTime<Utc>) -> Option<Slot> {
        let slot = first_from(
            &self.schedule,
            self.from.max(after + TimeDelta::nanoseconds(1)),
        )?;
        self.until
            .is_none_or(|until| slot.scheduled_at <= until)
            .then_some(slot)
    }
}

/// The schedule's first slot at or after `at`.
fn first_from(schedule: &Schedule, at: DateTime<Utc>) -> Option<Slot> {
    let whole = at.timestamp() + i64::from(at.timestamp_subsec_nanos() > 0);
    schedule.next_after(DateTime::from_timestamp(whole - 1, 0)?)
}

/// The job's business calendar from an instant on, as operators' overrides changed it
/// ([`Timeline::follow_calendar`]).
#[derive(Debug, Clone)]
pub struct CalendarSpan {
    /// From when (`None`: from the beginning).
    pub from: Option<DateTime<Utc>>,
    /// The calendar and convention in force.
    pub rule: BusinessRule,
    /// The last override in force (`None`: none).
    pub seq: Option<i64>,
}

/// One version as written, with its bounds on the calendar it was written on.
#[derive(Debug, Clone)]
struct Version {
    version: i64,
    effective_at: DateTime<Utc>,
    spec: Option<ScheduleSpec>,
    slots: Option<Bounded>,
}

/// A stored schedule's versions, compiled, in the order they were written; with the calendar
/// changes it follows, each version is read on the calendar in force at each instant.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    versions: Vec<Version>,
    calendars: Vec<CalendarSpan>,
    spans: Vec<Span>,
}

impl Timeline {
    /// The timeline of `versions` (one schedule's, oldest first), on the job's calendar. A version
    /// whose spec does not compile has no slots (operators' changes are checked before they are
    /// stored, so it was written by something else).
    pub fn new(versions: &[ScheduleVersion], calendar: Option<&BusinessRule>) -> Self {
        let mut timeline = Timeline::default();
        for version in versions {
            timeline.push(version, calendar);
        }
        timeline
    }

    /// Adds the next version.
    pub fn push(&mut self, version: &ScheduleVersion, calendar: Option<&BusinessRule>) {
        let spec = version.spec.clone().filter(|spec| !spec.paused);
        let slots = spec.as_ref().and_then(|spec| {
            let schedule = compile(spec, calendar).ok()?;
            bounded(spec, schedule, version.effective_at)
        });
        self.versions.push(Version {
            version: version.version,
            effective_at: version.effective_at,
            spec,
            slots,
        });
        self.rebuild();
    }

    /// Reads every version on the calendar of `spans` in force at each instant (operators'
    /// overrides of the job's calendar, oldest first), instead of the calendar it was pushed with.
    /// A version's start, end and remaining runs stay as they were counted when it was pushed.
    pub fn follow_calendar(&mut self, spans: Vec<CalendarSpan>) {
        self.calendars = spans;
        self.rebuild();
    }

    /// The spans: each version from its `effective_at`, split where the calendar changes.
    fn rebuild(&mut self) {
        let mut spans = Vec::with_capacity(self.versions.len() + self.calendars.len());
        for (i, v) in self.versions.iter().enumerate() {
            let end = self.versions.get(i + 1).map(|n| n.effective_at);
            let in_force = self
                .calendars
                .iter()
                .rposition(|c| c.from.is_none_or(|f| f <= v.effective_at));
            let later = self.calendars.iter().enumerate().filter(|(_, c)| {
                c.from
                    .is_some_and(|f| f > v.effective_at && end.is_none_or(|e| f < e))
            });
            spans.push(match in_force {
                Some(k) => self.span_on(v, v.effective_at, &self.calendars[k]),
                None => Span {
                    version: v.version,
                    effective_at: v.effective_at,
                    slots: v.slots.clone(),
                    seq: None,
                },
            });
            for (k, c) in later {
                let from = c.from.unwrap_or(v.effective_at);
                spans.push(self.span_on(v, from, &self.calendars[k]));
            }
        }
        self.spans = spans;
    }

    /// Version `v` from `from` on the calendar of `calendar`.
    fn span_on(&self, v: &Version, from: DateTime<Utc>, calendar: &CalendarSpan) -> Span {
        let slots = v.slots.as_ref().and_then(|b| {
            let schedule = compile(v.spec.as_ref()?, Some(&calendar.rule)).ok()?;
            Some(Bounded {
                schedule,
                ..b.clone()
            })
        });
        Span {
            version: v.version,
            effective_at: from,
            slots,
            seq: calendar.seq,
        }
    }

    /// The first slot strictly after `after` under the version in force at its instant, and that
    /// version's number.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<(Slot, i64)> {
        for (i, span) in self.spans.iter().enumerate() {
            let end = self.spans.get(i + 1).map(|next| next.effective_at);
            if end.is_some_and(|end| end <= after) {
                continue;
            }
            let Some(slots) = &span.slots else { continue };
            let Some(slot) = slots.next_after(after) else {
                continue;
            };
            if end.is_none_or(|end| slot.scheduled_at < end) {
                return Some((slot, span.version));
            }
        }
        None
    }

    /// What `slot` was planned on: the calendar in force at its instant, with its nominal dates.
    pub fn stamp(&self, slot: &Slot) -> Option<CalendarStamp> {
        let span = self
            .spans
            .iter()
            .rev()
            .find(|s| s.effective_at <= slot.scheduled_at)?;
        CalendarStamp::of(&span.slots.as_ref()?.schedule, slot, span.seq)
    }

    /// Up to `n` slots strictly after `after`.
    pub fn upcoming(&self, after: DateTime<Utc>, n: usize) -> Vec<Slot> {
        let mut slots = Vec::with_capacity(n.min(64));
        let mut from = after;
        while slots.len() < n {
            let Some((slot, _)) = self.next_after(from) else {
                break;
            };
            from = slot.scheduled_at;
            slots.push(slot);
        }
        slots
    }

    /// Drops the versions (and calendar changes) no slot after `after` can be under (a later one
    /// was in force by then): what a replica keeps is bounded by the changes still to take effect.
    pub fn forget_before(&mut self, after: DateTime<Utc>) {
        let keep = |from: Option<DateTime<Utc>>| from.is_none_or(|f| f <= after);
        let versions = self
            .versions
            .iter()
            .rposition(|v| keep(Some(v.effective_at)))
            .unwrap_or(0);
        self.versions.drain(..versions);
        let calendars = self
            .calendars
            .iter()
            .rposition(|c| keep(c.from))
            .unwrap_or(0);
        self.calendars.drain(..calendars);
        self.rebuild();
    }

    /// The schedule of `version`, when it has slots (on the calendar it was pushed with).
    pub fn schedule(&self, version: i64) -> Option<&Schedule> {
        self.versions
            .iter()
            .find(|v| v.version == version)
            .and_then(|v| v.slots.as_ref().map(|b| &b.schedule))
    }
}

/// The schedule within its start, end and remaining runs counted from `effective_at`; `None` when
/// nothing is left.
fn bounded(
    spec: &ScheduleSpec,
    schedule: Schedule,
    effective_at: DateTime<Utc>,
) -> Option<Bounded> {
    let from = spec.start_at.map_or(effective_at, |s| s.max(effective_at));
    let mut bounded = Bounded {
        schedule,
        from,
        until: spec.end_at,
    };
    if let Some(runs) = spec.remaining_runs {
        if runs == 0 {
            return None;
        }
        let mut last = None;
        let mut cursor = from - TimeDelta::nanoseconds(1);
        for _ in 0..runs.min(MAX_REMAINING_RUNS) {
            let Some(slot) = bounded.next_after(cursor) else {
                break;
            };
            cursor = slot.scheduled_at;
            last = Some(cursor);
        }
        let last = last?;
        bounded.until = Some(bounded.until.map_or(last, |u| u.min(last)));
    }
    Some(bounded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn spec(cron: &str) -> ScheduleSpec {
        ScheduleSpec::new("j", cron, "UTC", "")
    }

    fn version(n: i64, spec: Option<ScheduleSpec>, effective: &str) -> ScheduleVersion {
        ScheduleVersion {
            id: "s".into(),
            version: n,
            spec,
            effective_at: at(effective),
            changed_by: "t".into(),
            changed_at: at(effective),
            reason: "r".into(),
            seq: n,
        }
    }

    fn seconds(timeline: &Timeline, after: &str, n: usize) -> Vec<u32> {
        use chrono::Timelike;
        timeline
            .upcoming(at(after), n)
            .iter()
            .map(|s| s.scheduled_at.second())
            .collect()
    }

    /// Each version rules from its `effective_at` (a slot at it included) until the next one's;
    /// a paused or removed version has no slots.
    #[test]
    fn each_version_rules_from_its_effect_until_the_next() {
        let mut paused = spec("* * * * * *");
        paused.paused = true;
        let timeline = Timeline::new(
            &[
                version(1, Some(spec("* * * * * *")), "2026-01-01T00:00:00.500Z"),
                version(2, Some(spec("*/5 * * * * *")), "2026-01-01T00:00:03Z"),
                version(3, Some(paused), "2026-01-01T00:00:11.200Z"),
                version(4, Some(spec("*/2 * * * * *")), "2026-01-01T00:00:20Z"),
                version(5, None, "2026-01-01T00:00:25Z"),
            ],
            None,
        );
        assert_eq!(
            seconds(&timeline, "2026-01-01T00:00:00Z", 20),
            [1, 2, 5, 10, 20, 22, 24]
        );
        let (slot, version) = timeline.next_after(at("2026-01-01T00:00:02Z")).unwrap();
        assert_eq!(
            (slot.scheduled_at, version),
            (at("2026-01-01T00:00:05Z"), 2)
        );
    }

    /// Remaining runs count the version's own slots from its effect, within its start and end.
    #[test]
    fn remaining_runs_start_and_end_bound_a_version() {
        let mut counted = spec("* * * * * *");
        counted.remaining_runs = Some(3);
        counted.start_at = Some(at("2026-01-01T00:00:04Z"));
        let timeline = Timeline::new(&[version(1, Some(counted), "2026-01-01T00:00:00Z")], None);
        assert_eq!(seconds(&timeline, "2026-01-01T00:00:00Z", 10), [4, 5, 6]);
        let mut ended = spec("* * * * * *");
        ended.end_at = Some(at("2026-01-01T00:00:02Z"));
        let timeline = Timeline::new(&[version(1, Some(ended), "2026-01-01T00:00:00Z")], None);
        assert_eq!(seconds(&timeline, "2026-01-01T00:00:00Z", 10), [1, 2]);
        let mut none = spec("* * * * * *");
        none.remaining_runs = Some(0);
        let timeline = Timeline::new(&[version(1, Some(none), "2026-01-01T00:00:00Z")], None);
        assert!(timeline.upcoming(at("2026-01-01T00:00:00Z"), 5).is_empty());
    }

    /// Forgetting keeps the version in force at the instant and every later one.
    #[test]
    fn forgetting_keeps_what_rules_from_the_instant_on() {
        let mut timeline = Timeline::new(
            &[
                version(1, Some(spec("* * * * * *")), "2026-01-01T00:00:00Z"),
                version(2, Some(spec("*/5 * * * * *")), "2026-01-01T00:00:03Z"),
                version(3, Some(spec("*/2 * * * * *")), "2026-01-01T00:00:11Z"),
            ],
            None,
        );
        let before = seconds(&timeline, "2026-01-01T00:00:04Z", 5);
        timeline.forget_before(at("2026-01-01T00:00:04Z"));
        assert!(timeline.schedule(1).is_none() && timeline.schedule(2).is_some());
        assert_eq!(seconds(&timeline, "2026-01-01T00:00:04Z", 5), before);
        assert_eq!(before, [5, 10, 12, 14, 16]);
    }

    /// A calendar change splits a version at its instant: slots before it stay on the calendar
    /// before, slots after it are read on the new one and name the override that placed them.
    #[test]
    fn a_calendar_change_applies_from_its_instant() {
        use slotguard_cron::{Adjust, Calendar, Weekend};
        let plain = Calendar::new("X", Weekend::of(&[]).unwrap());
        let day = |d: u32| chrono::NaiveDate::from_ymd_opt(2026, 1, d).unwrap();
        let holidays = plain
            .clone()
            .with_holiday(day(6), "a")
            .with_holiday(day(7), "b");
        let rule = |c: &Calendar| BusinessRule::new(c.clone(), Adjust::Skip);
        let daily = version(1, Some(spec("0 2 * * *")), "2026-01-01T00:00:00Z");
        let mut timeline = Timeline::new(&[daily], Some(&rule(&plain)));
        timeline.follow_calendar(vec![
            CalendarSpan {
                from: None,
                rule: rule(&plain),
                seq: None,
            },
            CalendarSpan {
                from: Some(at("2026-01-06T12:00:00Z")),
                rule: rule(&holidays),
                seq: Some(3),
            },
        ]);
        let slots = timeline.upcoming(at("2026-01-05T00:00:00Z"), 3);
        let days: Vec<_> = slots.iter().map(|s| s.business_date()).collect();
        assert_eq!(
            days,
            [day(5), day(6), day(8)],
            "the 7th is a holiday from noon on the 6th"
        );
        let stamp = |i: usize| timeline.stamp(&slots[i]).unwrap().version;
        assert_eq!(
            (stamp(1), stamp(2)),
            (String::new(), "override #3".to_owned())
        );
        timeline.forget_before(at("2026-01-07T00:00:00Z"));
        assert_eq!(timeline.upcoming(at("2026-01-06T13:00:00Z"), 1), [slots[2]]);
    }
}
