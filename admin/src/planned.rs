//! A job's schedule as the admin views plan it: on its business calendar with the operators'
//! overrides in force at each slot's instant, as running schedulers plan it, so that `missed`, the
//! next slots and `skip` agree with what the replicas fire.

use chrono::{DateTime, Utc};
use slotguard::calendar_timeline::CalendarTimeline;
use slotguard::store::{CalendarOverride, JobRecord, ScheduleVersion};
use slotguard::timeline::Timeline;
use slotguard_cron::{Schedule, Slot};

use crate::missed::schedule_of;
use crate::{Admin, AdminError};

/// The most overrides read ([`Admin::calendar_overrides`] and the views that plan slots).
pub const MAX_OVERRIDES: usize = 100_000;

/// The most overrides one read returns.
const PAGE: usize = 1_000;

/// A stored job's schedule, with its calendar's overrides when it has one.
#[derive(Debug, Clone)]
pub(crate) enum Planned {
    /// No business calendar: the schedule as written.
    Plain(Schedule),
    /// On a business calendar, span by span as the overrides change it.
    Calendar(CalendarTimeline),
}

impl Planned {
    /// The schedule `record` names with `overrides` applied; `None` when this version cannot read
    /// it (see [`schedule_of`]).
    pub(crate) fn of(record: &JobRecord, overrides: &[CalendarOverride]) -> Option<Self> {
        let schedule = schedule_of(record)?;
        Some(
            match CalendarTimeline::with_overrides(&schedule, overrides) {
                Some(timeline) => Planned::Calendar(timeline),
                None => Planned::Plain(schedule),
            },
        )
    }

    /// The first slot strictly after `after`.
    pub(crate) fn next_after(&self, after: DateTime<Utc>) -> Option<Slot> {
        match self {
            Planned::Plain(s) => s.next_after(after),
            Planned::Calendar(t) => t.next_after(after),
        }
    }

    /// The slots strictly after `after`, in order.
    pub(crate) fn slots_after(&self, after: DateTime<Utc>) -> impl Iterator<Item = Slot> + '_ {
        std::iter::successors(self.next_after(after), |s| self.next_after(s.scheduled_at))
    }

    /// The schedule with every override (the nominal dates and holidays of recent slots).
    #[cfg(feature = "dashboard")]
    pub(crate) fn schedule(&self) -> &Schedule {
        match self {
            Planned::Plain(s) => s,
            Planned::Calendar(t) => t.schedule(),
        }
    }
}

/// A stored schedule of `record`'s job: its versions on the job's calendar with `overrides` in
/// force at each instant, as the replicas follow it.
pub(crate) fn stored_timeline(
    record: &JobRecord,
    history: &[ScheduleVersion],
    overrides: &[CalendarOverride],
) -> Timeline {
    let calendar = record.definition.calendar.as_ref().and_then(|c| c.rule());
    let mut timeline = Timeline::new(history, calendar.as_ref());
    if let Some(Planned::Calendar(job)) = Planned::of(record, overrides) {
        timeline.follow_calendar(job.calendar_spans());
    }
    timeline
}

impl Admin {
    /// Every operators' override, in the order written (at most [`MAX_OVERRIDES`]).
    pub(crate) async fn all_overrides(&self) -> Result<Vec<CalendarOverride>, AdminError> {
        let mut all = Vec::new();
        loop {
            let after = all.last().map_or(0, |o: &CalendarOverride| o.seq);
            let page = self.store.override_changes(after, PAGE).await?;
            let more = page.overrides.len() >= PAGE;
            all.extend(page.overrides);
            if !more || all.len() >= MAX_OVERRIDES {
                return Ok(all);
            }
        }
    }

    /// Every override when one of `records` has a business calendar; none otherwise (no read).
    pub(crate) async fn overrides_of(
        &self,
        records: &[JobRecord],
    ) -> Result<Vec<CalendarOverride>, AdminError> {
        if records.iter().all(|r| r.definition.calendar.is_none()) {
            return Ok(Vec::new());
        }
        self.all_overrides().await
    }

    /// `record`'s schedule with the overrides in force; `None` when this version cannot read it.
    pub(crate) async fn planned(&self, record: &JobRecord) -> Result<Option<Planned>, AdminError> {
        let overrides = self.overrides_of(std::slice::from_ref(record)).await?;
        Ok(Planned::of(record, &overrides))
    }
}
