//! The slots of a schedule with a business calendar: the expression's dates are nominal; each is
//! moved by the [`BusinessRule`] (or dropped), and the expression's wall times are read on the date
//! it becomes, under the schedule's DST policy for that date.

use chrono::{DateTime, Days, NaiveDate, NaiveTime, Utc};

use super::civil::{DAY, date_of, day_start};
use super::{LOOKBACK, Schedule, Slot, search_end};
use crate::BusinessRule;

/// Days past the best date found after which no other date can hold an earlier slot: a date's wall
/// times lie within a day and the largest offsets either side of it.
const MARGIN: u64 = 3;

/// How many days ahead [`Schedule::next_removed_after`] looks.
pub const REMOVED_HORIZON: u64 = 800;

impl Schedule {
    /// [`Schedule::next_after`] under `rule`: the first slot strictly after `after`, its date the
    /// one a nominal date becomes. Two nominal dates that become one date give its slots once.
    pub(super) fn next_business(&self, rule: &BusinessRule, after: DateTime<Utc>) -> Option<Slot> {
        let min_inst = after.timestamp().checked_add(1)?;
        let reach = Days::new(u64::try_from(rule.reach()).ok()? + MARGIN);
        // A nominal date up to `reach` days before the first date that can hold such a slot can
        // still move onto it.
        let mut date = date_of(min_inst - LOOKBACK)
            .checked_sub_days(reach)
            .unwrap_or(NaiveDate::MIN);
        let until = search_end(date);
        let mut best: Option<((i64, i64), NaiveDate)> = None;
        while let Some(nominal) = self.expr.next_date(date, until) {
            if best.is_some_and(|(_, day)| nominal > day.checked_add_days(reach).unwrap_or(day)) {
                break;
            }
            if let Some(day) = rule.adjust(nominal)
                && let Some(found) = self.first_on(day, min_inst)
                && best.is_none_or(|(b, _)| found < b)
            {
                best = Some((found, day));
            }
            let Some(next) = nominal.succ_opt() else {
                break;
            };
            date = next;
        }
        let ((instant, wall), day) = best?;
        let time = NaiveTime::from_num_seconds_from_midnight_opt(
            u32::try_from(wall - day_start(day)).ok()?,
            0,
        )?;
        Some(Slot {
            scheduled_at: DateTime::from_timestamp(instant, 0)?,
            wall: day.and_time(time),
            zone: self.zone,
        })
    }

    /// The first slot strictly after `after` that the schedule's calendar *removes*: a slot of the
    /// expression, without the calendar, on a nominal date that [`Adjust::Skip`](crate::Adjust::Skip)
    /// drops because it is not a business day. `None` without a calendar, under another convention
    /// (their dates move instead), or when no such slot lies within [`REMOVED_HORIZON`] days.
    ///
    /// The runtime records these slots `skipped` (reason `calendar`), so that a job's history says
    /// why a day has no run instead of leaving a gap.
    pub fn next_removed_after(&self, after: DateTime<Utc>) -> Option<Slot> {
        let rule = self.business.as_ref()?;
        if rule.convention() != crate::Adjust::Skip {
            return None;
        }
        let min_inst = after.timestamp().checked_add(1)?;
        let mut date = date_of(min_inst - LOOKBACK);
        let until = date
            .checked_add_days(Days::new(REMOVED_HORIZON))
            .unwrap_or(NaiveDate::MAX);
        while let Some(nominal) = self.expr.next_date(date, until) {
            if rule.adjust(nominal).is_none()
                && let Some((instant, wall)) = self.first_on(nominal, min_inst)
            {
                let time = NaiveTime::from_num_seconds_from_midnight_opt(
                    u32::try_from(wall - day_start(nominal)).ok()?,
                    0,
                )?;
                return Some(Slot {
                    scheduled_at: DateTime::from_timestamp(instant, 0)?,
                    wall: nominal.and_time(time),
                    zone: self.zone,
                });
            }
            date = nominal.succ_opt()?;
        }
        None
    }

    /// The nominal dates `slot` stands for: the dates of the expression that became its business
    /// date (several when they moved onto one day). Without a calendar, its business date.
    pub fn nominal_dates(&self, slot: &Slot) -> Vec<NaiveDate> {
        let day = slot.business_date();
        let Some(rule) = &self.business else {
            return vec![day];
        };
        let reach = u64::try_from(rule.reach()).unwrap_or(0);
        let first = day
            .checked_sub_days(Days::new(reach))
            .unwrap_or(NaiveDate::MIN);
        first
            .iter_days()
            .take_while(|d| {
                d.checked_sub_days(Days::new(reach))
                    .is_none_or(|back| back <= day)
            })
            .filter(|d| self.expr.matches_date(*d) && rule.adjust(*d) == Some(day))
            .collect()
    }

    /// The first of the expression's wall times on `date`, under the DST policy, whose instant is
    /// at least `min_inst`: `(instant, wall)`. The date's own fields are not consulted.
    fn first_on(&self, date: NaiveDate, min_inst: i64) -> Option<(i64, i64)> {
        let d0 = day_start(date);
        match self.regular_offset(d0) {
            Some(offset) => self.first_between(d0, d0, d0 + DAY, offset, min_inst),
            None => self.first_on_irregular_date(d0, min_inst),
        }
    }
}
