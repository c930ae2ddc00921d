//! Which slots a stored schedule produces: each of its versions is in force from its
//! `effective_at` until the next version's, and a slot at instant `T` is a slot of the schedule
//! when the version in force at `T` produces it. Every replica, scheduler and operator computes
//! the same slots from the same versions (see [`store::schedules`](crate::store::schedules)).

use chrono::{DateTime, TimeDelta, Utc};
use slotguard_cron::{
    BusinessRule, DstPolicy, Schedule, ScheduleError, Slot, UnknownDstPolicy, parse_zone,
};

use crate::store::{ScheduleSpec, ScheduleVersion};

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

/// One version, compiled: in force from `effective_at`; `None` slots when it is removed, paused or
/// spent.
#[derive(Debug, Clone)]
struct Span {
    version: i64,
    effective_at: DateTime<Utc>,
    slots: Option<Bounded>,
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

/// A stored schedule's versions, compiled, in the order they were written.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
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
        let slots = version
            .spec
            .as_ref()
            .filter(|spec| !spec.paused)
            .and_then(|spec| {
                let schedule = compile(spec, calendar).ok()?;
                bounded(spec, schedule, version.effective_at)
            });
        self.spans.push(Span {
            version: version.version,
            effective_at: version.effective_at,
            slots,
        });
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

    /// Drops the versions no slot after `after` can be under (a later version was in force by
    /// then): what a replica keeps is bounded by the changes still to take effect.
    pub fn forget_before(&mut self, after: DateTime<Utc>) {
        let keep_from = self
            .spans
            .iter()
            .rposition(|s| s.effective_at <= after)
            .unwrap_or(0);
        self.spans.drain(..keep_from);
    }

    /// The schedule of `version`, when it has slots.
    pub fn schedule(&self, version: i64) -> Option<&Schedule> {
        self.spans
            .iter()
            .find(|s| s.version == version)
            .and_then(|s| s.slots.as_ref().map(|b| &b.schedule))
    }

    /// The latest version.
    pub fn version(&self) -> i64 {
        self.spans.last().map_or(0, |s| s.version)
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
