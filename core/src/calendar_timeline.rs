//! One job's schedule under operators' overrides of its calendar: each override read is a span in
//! force from its `effective_at`, and a slot at instant `T` is the slot of the span in force at `T`
//! (as a stored schedule's versions, [`Timeline`](crate::timeline::Timeline)). Every replica that
//! knows the overrides up to `T` computes the same slot, and the admin views plan a job's slots on
//! the same timeline.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use slotguard_cron::{BusinessRule, Calendar, Schedule, Slot};

use crate::store::{CalendarOverride, CalendarStamp, OverrideKind};
use crate::timeline::CalendarSpan;

/// A schedule in force from an instant (the first span: from the beginning).
#[derive(Debug, Clone)]
struct Span {
    from: Option<DateTime<Utc>>,
    schedule: Schedule,
    /// The last override in force (`None`: the calendar as the code gives it).
    seq: Option<i64>,
}

/// A job's schedule, span by span, as its calendar's overrides take effect.
#[derive(Debug, Clone)]
pub struct CalendarTimeline {
    spans: Vec<Span>,
    /// The calendar with every override read so far.
    calendar: Arc<Calendar>,
}

impl CalendarTimeline {
    /// The timeline of `schedule` with no override yet; `None` without a calendar.
    pub fn new(schedule: &Schedule) -> Option<Self> {
        let rule = schedule.business()?;
        Some(CalendarTimeline {
            calendar: Arc::new(rule.calendar().clone()),
            spans: vec![Span {
                from: None,
                schedule: schedule.clone(),
                seq: None,
            }],
        })
    }

    /// `schedule` with `overrides` (of any calendars, in the order they were written: those of its
    /// calendar and of the calendars it was built on apply), each in force from its
    /// `effective_at`; `None` without a calendar. What the admin views plan a job's slots on.
    pub fn with_overrides(schedule: &Schedule, overrides: &[CalendarOverride]) -> Option<Self> {
        let mut timeline = CalendarTimeline::new(schedule)?;
        for o in overrides {
            if timeline.follows(&o.spec.calendar) {
                timeline.apply(o);
            }
        }
        Some(timeline)
    }

    /// The slots strictly after `after`, each under the calendar in force at its instant.
    pub fn slots_after(&self, after: DateTime<Utc>) -> impl Iterator<Item = Slot> + '_ {
        std::iter::successors(self.next_after(after), |s| self.next_after(s.scheduled_at))
    }

    /// Whether the overrides of calendar `name` apply: the job's calendar is `name`, or was built
    /// on it.
    pub fn follows(&self, name: &str) -> bool {
        self.calendar.follows(name)
    }

    /// Adds `o` (an override of this calendar or one it was built on, read in order) as a span from
    /// its `effective_at`.
    pub fn apply(&mut self, o: &CalendarOverride) {
        let holiday = match o.spec.kind {
            OverrideKind::Add => Some(o.spec.name.as_str()),
            OverrideKind::Remove => None,
        };
        let calendar =
            (*self.calendar)
                .clone()
                .with_override(&o.spec.calendar, o.spec.date, holiday);
        self.calendar = Arc::new(calendar);
        let latest = &self.latest().schedule;
        let Some(rule) = latest.business() else {
            return;
        };
        let rule = BusinessRule::shared(Arc::clone(&self.calendar), rule.convention())
            .with_shift(rule.shift())
            .unwrap_or_else(|_| rule.clone());
        let schedule = latest.clone().with_calendar(rule);
        self.spans.push(Span {
            from: Some(o.effective_at),
            schedule,
            seq: Some(o.seq),
        });
    }

    fn latest(&self) -> &Span {
        // Never empty: `new` makes the first span and nothing removes the last.
        &self.spans[self.spans.len() - 1]
    }

    /// The schedule with every override read so far.
    pub fn schedule(&self) -> &Schedule {
        &self.latest().schedule
    }

    /// The first slot strictly after `after` of the span in force at its instant.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<Slot> {
        self.first(after, Schedule::next_after)
    }

    /// The first slot strictly after `after` that the span in force at its instant removes.
    pub fn next_removed_after(&self, after: DateTime<Utc>) -> Option<Slot> {
        self.first(after, Schedule::next_removed_after)
    }

    /// The calendar from each span's start, oldest first, for a stored schedule of the job to follow
    /// ([`Timeline::follow_calendar`](crate::timeline::Timeline::follow_calendar)).
    pub fn calendar_spans(&self) -> Vec<CalendarSpan> {
        self.spans
            .iter()
            .filter_map(|s| {
                Some(CalendarSpan {
                    from: s.from,
                    rule: s.schedule.business()?.clone(),
                    seq: s.seq,
                })
            })
            .collect()
    }

    /// The span in force at `slot`'s instant.
    fn at(&self, slot: &Slot) -> Option<&Span> {
        self.spans
            .iter()
            .rev()
            .find(|s| s.from.is_none_or(|f| f <= slot.scheduled_at))
    }

    /// What `slot` is planned on: the calendar in force at its instant.
    pub fn stamp(&self, slot: &Slot) -> Option<CalendarStamp> {
        let span = self.at(slot)?;
        CalendarStamp::of(&span.schedule, slot, span.seq)
    }

    /// The holiday on `slot`'s date in the calendar in force at its instant.
    pub fn holiday(&self, slot: &Slot) -> Option<String> {
        let span = self.at(slot)?;
        let rule = span.schedule.business()?;
        rule.calendar()
            .holiday(slot.business_date())
            .map(str::to_owned)
    }

    /// `next` of each span from its start, the first that falls before the next span's start.
    fn first(
        &self,
        after: DateTime<Utc>,
        next: impl Fn(&Schedule, DateTime<Utc>) -> Option<Slot>,
    ) -> Option<Slot> {
        for (i, span) in self.spans.iter().enumerate() {
            let end = self.spans.get(i + 1).and_then(|s| s.from);
            if end.is_some_and(|end| end <= after) {
                continue;
            }
            // A slot at the span's very start is the span's: look from just before it.
            let cut = span
                .from
                .map_or(after, |f| after.max(f - TimeDelta::nanoseconds(1)));
            let Some(slot) = next(&span.schedule, cut) else {
                continue;
            };
            if end.is_none_or(|end| slot.scheduled_at < end) {
                return Some(slot);
            }
        }
        None
    }

    /// Merges the spans no slot after `at` can be under into the one in force at `at`: what a
    /// replica keeps stays bounded however many overrides it read.
    pub fn forget_before(&mut self, at: DateTime<Utc>) {
        let keep_from = self
            .spans
            .iter()
            .rposition(|s| s.from.is_none_or(|f| f <= at))
            .unwrap_or(0);
        self.spans.drain(..keep_from);
        self.spans[0].from = None;
    }
}

#[cfg(test)]
mod tests {
    use chrono::{NaiveDate, TimeZone};
    use slotguard_cron::Adjust;

    use super::*;
    use crate::store::OverrideSpec;

    fn payday() -> Schedule {
        let rule = BusinessRule::new(Calendar::builtin("KR").unwrap(), Adjust::Preceding);
        Schedule::parse("0 2 25 * *", "Asia/Seoul")
            .unwrap()
            .with_calendar(rule)
    }

    fn add(date: (i32, u32, u32), effective_at: DateTime<Utc>) -> CalendarOverride {
        CalendarOverride {
            spec: OverrideSpec {
                calendar: "KR".into(),
                date: NaiveDate::from_ymd_opt(date.0, date.1, date.2).unwrap(),
                kind: OverrideKind::Add,
                name: "임시공휴일".into(),
            },
            reason: "decree".into(),
            changed_by: "kim".into(),
            changed_at: effective_at,
            effective_at,
            seq: 1,
        }
    }

    fn local(slot: Option<Slot>) -> String {
        slot.map(|s| s.local().to_rfc3339()).unwrap_or_default()
    }

    #[test]
    fn an_added_holiday_moves_the_slots_after_it_takes_effect_only() {
        let mut timeline = CalendarTimeline::new(&payday()).unwrap();
        let sept = Utc.with_ymd_and_hms(2026, 9, 1, 0, 0, 0).unwrap();
        // Without the override, 2026-11-25 (a Wednesday) is payday.
        let nov = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
        assert_eq!(local(timeline.next_after(nov)), "2026-11-25T02:00:00+09:00");
        // An operator makes the 25th a holiday, in force from 1 November.
        timeline.apply(&add((2026, 11, 25), nov));
        assert_eq!(local(timeline.next_after(nov)), "2026-11-24T02:00:00+09:00");
        let slot = timeline.next_after(nov).unwrap();
        assert_eq!(timeline.holiday(&slot), None);
        let stamp = timeline.stamp(&slot).unwrap();
        assert_eq!(
            stamp.nominal_dates,
            vec![NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()]
        );
        assert!(
            stamp.version.ends_with("+ override #1"),
            "{}",
            stamp.version
        );
        let before = timeline.next_after(sept).unwrap();
        assert!(
            !timeline
                .stamp(&before)
                .unwrap()
                .version
                .contains("override")
        );
        // Slots before it took effect are those of the calendar then: September's is unchanged.
        assert_eq!(
            local(timeline.next_after(sept)),
            "2026-09-23T02:00:00+09:00"
        );
        // An override taking effect after the adjusted slot leaves that slot where it was.
        let mut late = CalendarTimeline::new(&payday()).unwrap();
        let after_slot = Utc.with_ymd_and_hms(2026, 11, 25, 0, 0, 0).unwrap();
        late.apply(&add((2026, 11, 25), after_slot));
        assert_eq!(local(late.next_after(nov)), "2026-11-25T02:00:00+09:00");
    }

    #[test]
    fn a_skip_calendar_removes_the_added_day_and_names_it() {
        let rule = BusinessRule::new(Calendar::builtin("KR").unwrap(), Adjust::Skip);
        let daily = Schedule::parse("0 9 * * *", "Asia/Seoul")
            .unwrap()
            .with_calendar(rule);
        let mut timeline = CalendarTimeline::new(&daily).unwrap();
        let start = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap();
        timeline.apply(&add((2026, 11, 25), start));
        let removed = timeline
            .next_removed_after(Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap())
            .unwrap();
        assert_eq!(local(Some(removed)), "2026-11-25T09:00:00+09:00");
        assert_eq!(timeline.holiday(&removed).as_deref(), Some("임시공휴일"));
        timeline.forget_before(start + TimeDelta::days(1));
        assert_eq!(timeline.spans.len(), 1);
        let noon = Utc.with_ymd_and_hms(2026, 11, 24, 12, 0, 0).unwrap();
        assert_eq!(
            timeline.next_removed_after(noon),
            Some(removed),
            "kept after merging"
        );
    }
}
