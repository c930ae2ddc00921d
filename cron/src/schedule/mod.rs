//! The slot engine: the instants at which a cron expression fires in an IANA zone under a DST policy.

use std::fmt;

use chrono::{DateTime, Datelike, Days, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Utc};
use chrono_tz::Tz;

use crate::{BusinessRule, CronExpr, DstPolicy, ParseError, UnknownZone, parse_zone};

mod business;
pub use business::REMOVED_HORIZON;
mod civil;
mod offsets;
mod transitions;

use civil::{DAY, civil_from_days, date_of, day_start, days_from_civil, weekday_of};
use offsets::OffsetCache;

/// No zone in the tz database is further than this from UTC (local mean times reach ±15:57).
const MAX_OFFSET: i64 = 16 * 3600;
/// Farther back than any shifted or repeated wall time can reach forward (the largest gap, Pacific/Apia
/// in 2011, is a day; add the largest offset and a margin).
const LOOKBACK: i64 = 64 * 3600;
/// The instants the cache-only path takes (0001-01-01 to the end of 9996): its dates stay well inside
/// chrono's calendar.
const FAST_FIRST: i64 = -62_135_596_800;
const FAST_LAST: i64 = 253_307_692_799;
/// How many months the cache-only path searches for a matching date before leaving it to the general
/// path.
const FAST_MONTHS: u32 = 14;
/// One Gregorian cycle and a little: past it, a pattern that did not match never will.
const SEARCH_DAYS: u64 = 146_097 + 2;

/// A cron expression, the zone its wall-clock times are read in, and the DST policy.
///
/// The slots it produces are a fixed set of instants: they are strictly increasing and do not depend on
/// when or from where they are computed, so every replica derives the same `scheduled_at` for a slot.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use slotguard_cron::Schedule;
///
/// let schedule = Schedule::parse("0 2 * * *", "Asia/Seoul")?;
/// let after = Utc.with_ymd_and_hms(2026, 3, 8, 0, 0, 0).unwrap();
/// let slot = schedule.next_after(after).unwrap();
/// assert_eq!(slot.scheduled_at.to_rfc3339(), "2026-03-08T17:00:00+00:00");
/// assert_eq!(slot.business_date().to_string(), "2026-03-09");
/// # Ok::<(), slotguard_cron::ScheduleError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schedule {
    expr: CronExpr,
    zone: Tz,
    dst: DstPolicy,
    /// The business calendar that moves the expression's dates, if any.
    business: Option<BusinessRule>,
    /// Spans near the instants asked about, and near the dates searched (which can be weeks
    /// later): two entries, so that the one does not keep evicting the other.
    cache: [OffsetCache; 2],
    /// The last transition found by bisection, as `(instant, offset before, offset after)`: calls
    /// near the same transition verify it with two lookups instead of bisecting again.
    transition: OffsetCache,
}

/// A cron expression or zone that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The expression is malformed or never fires.
    #[error(transparent)]
    Cron(#[from] ParseError),
    /// The zone is not in the tz database.
    #[error(transparent)]
    Zone(#[from] UnknownZone),
}

/// One scheduled firing of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot {
    /// The instant of the slot, to the second. This is the slot's identity.
    pub scheduled_at: DateTime<Utc>,
    /// The wall-clock time the schedule names for this slot. It differs from the local reading of
    /// `scheduled_at` only when a DST policy moved the slot out of a gap (02:30 that did not exist).
    pub wall: NaiveDateTime,
    /// The zone the schedule is read in.
    pub zone: Tz,
}

impl Slot {
    /// `scheduled_at` read in the slot's zone, with its offset.
    pub fn local(&self) -> DateTime<Tz> {
        self.scheduled_at.with_timezone(&self.zone)
    }

    /// The business date of the slot: the local date of the wall time the schedule names.
    pub fn business_date(&self) -> NaiveDate {
        self.wall.date()
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} {})",
            self.scheduled_at.format("%Y-%m-%dT%H:%M:%SZ"),
            self.local().format("%Y-%m-%d %H:%M:%S%:z"),
            self.zone.name()
        )
    }
}

impl Schedule {
    /// A schedule from parts that are already valid.
    pub fn new(expr: CronExpr, zone: Tz, dst: DstPolicy) -> Self {
        Schedule {
            expr,
            zone,
            dst,
            business: None,
            cache: Default::default(),
            transition: OffsetCache::default(),
        }
    }

    /// Parses an expression and an IANA zone name, with the default DST policy.
    ///
    /// # Errors
    /// [`ScheduleError`] naming the field or the zone that is wrong.
    pub fn parse(expr: &str, zone: &str) -> Result<Self, ScheduleError> {
        Ok(Schedule::new(
            CronExpr::parse(expr)?,
            parse_zone(zone)?,
            DstPolicy::default(),
        ))
    }

    /// The same schedule under another DST policy.
    #[must_use]
    pub fn with_dst(mut self, dst: DstPolicy) -> Self {
        self.dst = dst;
        self
    }

    /// The same schedule on a business calendar: the expression's dates are nominal, and each
    /// becomes the date `rule` makes of it (or none); the expression's wall times are read on that
    /// date under the DST policy. Two nominal dates that become one date give its slots once.
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use slotguard_cron::{Adjust, BusinessRule, Calendar, Schedule};
    ///
    /// // Payday: 02:00 on the 25th in Seoul, or the business day before.
    /// let rule = BusinessRule::new(Calendar::builtin("KR")?, Adjust::Preceding);
    /// let schedule = Schedule::parse("0 2 25 * *", "Asia/Seoul")?.with_calendar(rule);
    /// let after = Utc.with_ymd_and_hms(2026, 9, 1, 0, 0, 0).unwrap();
    /// let slot = schedule.next_after(after).unwrap();
    /// assert_eq!(slot.local().to_rfc3339(), "2026-09-23T02:00:00+09:00");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn with_calendar(mut self, rule: BusinessRule) -> Self {
        self.business = Some(rule);
        self
    }

    /// The business calendar rule, if the schedule has one.
    pub fn business(&self) -> Option<&BusinessRule> {
        self.business.as_ref()
    }

    /// The cron expression.
    pub fn expr(&self) -> &CronExpr {
        &self.expr
    }

    /// The zone wall-clock times are read in.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The DST policy.
    pub fn dst(&self) -> DstPolicy {
        self.dst
    }

    /// A stable 64-bit fingerprint of expression, zone and policy, recorded with every run so that a
    /// schedule change between deploys can be seen in the history.
    pub fn fingerprint(&self) -> u64 {
        // FNV-1a: stable across Rust versions and platforms, unlike `DefaultHasher`.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let business = self.business.as_ref().map(|rule| {
            let calendar = rule.calendar();
            format!(
                "{} {} {:016x} {} {}",
                calendar.name(),
                calendar.version(),
                calendar.digest(),
                rule.convention(),
                rule.shift()
            )
        });
        let parts = [self.expr.source(), self.zone.name(), self.dst.as_str()];
        for part in parts.into_iter().chain(business.as_deref()) {
            for byte in part.bytes().chain([0]) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        hash
    }

    /// The first slot strictly after `after`, or `None` past the end of the calendar.
    ///
    /// The search is bounded: it never looks further than one 400-year Gregorian cycle ahead.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<Slot> {
        if let Some(rule) = &self.business {
            return self.next_business(rule, after);
        }
        let min_inst = after.timestamp().checked_add(1)?;
        if let Some(slot) = self.next_cached(min_inst) {
            return Some(slot);
        }
        let offset = self.offset_at(min_inst);
        let local_date = date_of(min_inst + offset);
        // The common case: no transition anywhere near, so no earlier date can reach past `min_inst`
        // and the first date is regular.
        let quiet = self.offset_at(min_inst - LOOKBACK) == offset
            && self.offset_at(day_start(local_date) + DAY + MAX_OFFSET) == offset;
        let date = if quiet {
            self.note_regular(
                &self.cache[0],
                min_inst - LOOKBACK,
                day_start(local_date) + DAY + MAX_OFFSET,
                offset,
            );
            local_date
        } else {
            date_of(min_inst - LOOKBACK)
                .pred_opt()
                .unwrap_or(NaiveDate::MIN)
        };
        let ((instant, wall), best_date) =
            self.first_from(date, quiet.then_some((local_date, offset)), min_inst)?;
        let offset = wall - instant;
        // Every candidate's wall time lies on the day it was found for.
        let time = NaiveTime::from_num_seconds_from_midnight_opt(
            u32::try_from(wall - day_start(best_date)).ok()?,
            0,
        )?;
        let wall = best_date.and_time(time);
        let scheduled_at = wall
            .checked_sub_signed(TimeDelta::seconds(offset))?
            .and_utc();
        Some(Slot {
            scheduled_at,
            wall,
            zone: self.zone,
        })
    }

    /// The general path's search from `date` on: the earliest candidate `(instant, wall)` whose
    /// instant is at least `min_inst`, with the date whose wall time it is. `quiet_day` is a date
    /// already found regular, with its offset.
    fn first_from(
        &self,
        mut date: NaiveDate,
        quiet_day: Option<(NaiveDate, i64)>,
        min_inst: i64,
    ) -> Option<((i64, i64), NaiveDate)> {
        // Near the end of the calendar the search stops at its last day rather than not starting.
        let until = search_end(date);
        debug_assert_eq!(
            until,
            date.checked_add_days(Days::new(SEARCH_DAYS))
                .unwrap_or(NaiveDate::MAX)
        );
        let mut best: Option<(i64, i64)> = None;
        let mut previous: Option<(NaiveDate, Option<i64>)> = None;
        let mut best_date = date;
        while let Some(next) = self.expr.next_date(date, until) {
            date = next;
            let d0 = day_start(date);
            if let Some((instant, _)) = best {
                // The earliest instant any wall time of `date` can have.
                let bound = match previous {
                    Some((p, Some(p_offset))) if p.succ_opt() == Some(date) => d0 - p_offset,
                    _ => d0 - MAX_OFFSET,
                };
                if bound > instant {
                    break;
                }
            }
            let regular = match quiet_day {
                Some((day, offset)) if day == date => Some(offset),
                _ => self.regular_offset(d0),
            };
            let found = match regular {
                Some(off) => self.first_between(d0, d0, d0 + DAY, off, min_inst),
                None => self.first_on_irregular_date(d0, min_inst),
            };
            if found.is_some() && earliest(best, found) == found {
                best_date = date;
            }
            best = earliest(best, found);
            previous = Some((date, regular));
            // A regular day read with `off`: every instant before the next day's start read with
            // `off` has a wall time before that start, so no later date can have an earlier slot.
            if let (Some((instant, _)), Some(off)) = (best, regular)
                && d0 + DAY - off > instant
            {
                break;
            }
            // The calendar's last day: what was found stands.
            let Some(next) = date.succ_opt() else {
                break;
            };
            date = next;
        }
        Some((best?, best_date))
    }

    /// [`Schedule::next_after`] on integer seconds, for the general path's common case: `None` when
    /// the first date is not quiet, or the first matching date after it is not regular or not within
    /// [`FAST_MONTHS`] (the general path then runs instead).
    ///
    /// It makes the general path's quiet test (the same three offset reads, cached as there) and then
    /// reads the first date with that offset. A later date is used only when
    /// [`Schedule::regular_offset`] finds it regular; a regular day always yields its first time of
    /// day, which ends the general search.
    fn next_cached(&self, min_inst: i64) -> Option<Slot> {
        if !(FAST_FIRST..=FAST_LAST).contains(&min_inst) {
            return None;
        }
        let offset = self.offset_at(min_inst);
        let local = min_inst + offset;
        let days = local.div_euclid(DAY);
        let d0 = days * DAY;
        let end = d0 + DAY + MAX_OFFSET;
        if self.offset_at(min_inst - LOOKBACK) != offset || self.offset_at(end) != offset {
            return None;
        }
        self.note_regular(&self.cache[0], min_inst - LOOKBACK, end, offset);
        let civil = civil_from_days(days);
        let mut found = self
            .expr
            .next_date_within(civil, weekday_of(days), FAST_MONTHS)?;
        if found == civil {
            if let Some(time) = self.expr.next_time_of_day((local - d0) as u32) {
                return self.slot_at(d0 + i64::from(time), offset, found);
            }
            found = self.expr.next_date_within(
                civil_from_days(days + 1),
                weekday_of(days + 1),
                FAST_MONTHS,
            )?;
        }
        let d0 = days_from_civil(found) * DAY;
        let offset = self.regular_offset(d0)?;
        let time = self.expr.next_time_of_day(0)?;
        self.slot_at(d0 + i64::from(time), offset, found)
    }

    /// The slot at wall second `wall` read with `offset`, on the date `(year, month, day)`.
    fn slot_at(&self, wall: i64, offset: i64, (year, month, day): (i64, u32, u32)) -> Option<Slot> {
        let date = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month, day)?;
        let time = NaiveTime::from_num_seconds_from_midnight_opt(
            u32::try_from(wall - days_from_civil((year, month, day)) * DAY).ok()?,
            0,
        )?;
        Some(Slot {
            scheduled_at: DateTime::from_timestamp(wall - offset, 0)?,
            wall: date.and_time(time),
            zone: self.zone,
        })
    }

    /// The slots strictly after `after`, in order.
    pub fn slots_after(&self, after: DateTime<Utc>) -> Slots<'_> {
        Slots {
            schedule: self,
            cursor: Some(after),
        }
    }

    /// The first matching wall time in `[lo, hi)` on the day starting at `d0`, read with `offset`, whose
    /// instant is at least `min_inst`: `(instant, wall)`.
    fn first_between(
        &self,
        d0: i64,
        lo: i64,
        hi: i64,
        offset: i64,
        min_inst: i64,
    ) -> Option<(i64, i64)> {
        let wall = self.first_wall(d0, lo.max(min_inst.saturating_add(offset)), hi)?;
        Some((wall - offset, wall))
    }

    /// The first matching wall time in `[lo, hi)` on the day starting at `d0`.
    fn first_wall(&self, d0: i64, lo: i64, hi: i64) -> Option<i64> {
        let (lo, hi) = (lo.max(d0), hi.min(d0 + DAY));
        if lo >= hi {
            return None;
        }
        let wall = d0 + i64::from(self.expr.next_time_of_day((lo - d0) as u32)?);
        (wall < hi).then_some(wall)
    }
}

/// Iterator over the slots of a schedule; see [`Schedule::slots_after`].
#[derive(Debug, Clone)]
pub struct Slots<'a> {
    schedule: &'a Schedule,
    cursor: Option<DateTime<Utc>>,
}

impl Iterator for Slots<'_> {
    type Item = Slot;

    fn next(&mut self) -> Option<Slot> {
        let slot = self.schedule.next_after(self.cursor?);
        self.cursor = slot.map(|s| s.scheduled_at);
        slot
    }
}

/// The earlier of two candidates; at the same instant, the earlier wall time names the slot.
fn earliest(a: Option<(i64, i64)>, b: Option<(i64, i64)>) -> Option<(i64, i64)> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// `date` plus [`SEARCH_DAYS`], or the calendar's last day: 400 Gregorian years are 146,097 days
/// from any date, so this needs no day counting.
fn search_end(date: NaiveDate) -> NaiveDate {
    date.year()
        .checked_add(400)
        .and_then(|year| NaiveDate::from_ymd_opt(year, date.month(), date.day()))
        .and_then(|d| d.succ_opt()?.succ_opt())
        .unwrap_or(NaiveDate::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn next(expr: &str, zone: &str, dst: DstPolicy, after: &str, n: usize) -> Vec<String> {
        Schedule::parse(expr, zone)
            .unwrap()
            .with_dst(dst)
            .slots_after(at(after))
            .take(n)
            .map(|s| s.local().format("%Y-%m-%d %H:%M%:z").to_string())
            .collect()
    }

    #[test]
    fn new_york_spring_forward_per_policy() {
        // 2026-03-08: 02:00 EST → 03:00 EDT.
        let from = "2026-03-07T12:00:00Z";
        let ny = "America/New_York";
        assert_eq!(
            next("30 2 * * *", ny, DstPolicy::Vixie, from, 2),
            ["2026-03-08 03:00-04:00", "2026-03-09 02:30-04:00"]
        );
        assert_eq!(
            next("30 2 * * *", ny, DstPolicy::Skip, from, 1),
            ["2026-03-09 02:30-04:00"]
        );
        assert_eq!(
            next("30 2 * * *", ny, DstPolicy::Shift, from, 1),
            ["2026-03-08 03:30-04:00"]
        );
        assert_eq!(
            next("30 2 * * *", ny, DstPolicy::Instant, from, 1),
            ["2026-03-09 02:30-04:00"]
        );
        // Not fixed-time: vixie skips the gap.
        assert_eq!(
            next(
                "30 * * * *",
                ny,
                DstPolicy::Vixie,
                "2026-03-08T06:00:00Z",
                2
            ),
            ["2026-03-08 01:30-05:00", "2026-03-08 03:30-04:00"]
        );
    }

    #[test]
    fn new_york_fall_back_per_policy() {
        // 2026-11-01: 02:00 EDT → 01:00 EST; 01:xx happens twice.
        let from = "2026-11-01T04:00:00Z";
        let ny = "America/New_York";
        assert_eq!(
            next("30 1 * * *", ny, DstPolicy::Vixie, from, 2),
            ["2026-11-01 01:30-04:00", "2026-11-02 01:30-05:00"]
        );
        assert_eq!(
            next("30 1 * * *", ny, DstPolicy::Instant, from, 2),
            ["2026-11-01 01:30-04:00", "2026-11-01 01:30-05:00"]
        );
        assert_eq!(
            next("*/30 1 * * *", ny, DstPolicy::Vixie, from, 4),
            [
                "2026-11-01 01:00-04:00",
                "2026-11-01 01:30-04:00",
                "2026-11-01 01:00-05:00",
                "2026-11-01 01:30-05:00"
            ]
        );
        // Starting inside the repeated hour gives the same slots as starting before it.
        let inside = at("2026-11-01T06:10:00Z"); // 01:10 EST, second pass
        let s = Schedule::parse("*/30 1 * * *", ny).unwrap();
        assert_eq!(
            s.next_after(inside).unwrap().scheduled_at,
            at("2026-11-01T06:30:00Z")
        );
        let fixed = Schedule::parse("0 1 * * *", ny).unwrap();
        assert_eq!(
            fixed.next_after(inside).unwrap().scheduled_at,
            at("2026-11-02T06:00:00Z")
        );
    }

    #[test]
    fn gap_slots_landing_on_one_instant_fire_once() {
        let s = Schedule::parse("0,30 2,3 * * *", "America/New_York").unwrap();
        let slots: Vec<_> = s
            .slots_after(at("2026-03-08T06:00:00Z"))
            .take(3)
            .map(|s| (s.scheduled_at, s.wall.time().to_string()))
            .collect();
        assert_eq!(
            slots[0],
            (at("2026-03-08T07:00:00Z"), "02:00:00".to_owned())
        );
        assert_eq!(
            slots[1],
            (at("2026-03-08T07:30:00Z"), "03:30:00".to_owned())
        );
    }

    #[test]
    fn apia_skipped_day_and_santiago_midnight() {
        // Pacific/Apia skipped 2011-12-30 entirely.
        let apia = next(
            "0 12 * * *",
            "Pacific/Apia",
            DstPolicy::Vixie,
            "2011-12-28T00:00:00Z",
            3,
        );
        assert_eq!(
            apia,
            [
                "2011-12-28 12:00-10:00",
                "2011-12-29 12:00-10:00",
                "2011-12-31 12:00+14:00"
            ]
        );
        // America/Santiago: 2026-09-06 00:00 does not exist (clocks go 00:00 → 01:00).
        let santiago = next(
            "0 0 * * *",
            "America/Santiago",
            DstPolicy::Vixie,
            "2026-09-05T12:00:00Z",
            2,
        );
        assert_eq!(
            santiago,
            ["2026-09-06 01:00-03:00", "2026-09-07 00:00-03:00"]
        );
    }

    #[test]
    fn far_and_rare_dates() {
        let s = Schedule::parse("0 0 29 2 *", "UTC").unwrap();
        let slot = s
            .next_after(Utc.with_ymd_and_hms(2097, 3, 1, 0, 0, 0).unwrap())
            .unwrap();
        // 2100 is not a leap year.
        assert_eq!(slot.business_date().to_string(), "2104-02-29");
        let end = DateTime::<Utc>::MAX_UTC;
        assert_eq!(s.next_after(end), None);
    }

    #[test]
    fn shared_offset_cache_gives_the_answers_of_a_fresh_schedule() {
        let zones = ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe"];
        for zone in zones {
            let shared = Schedule::parse("*/20 1-3 * * *", zone).unwrap();
            std::thread::scope(|scope| {
                for thread in 0..4i64 {
                    let shared = &shared;
                    scope.spawn(move || {
                        let start = at("2025-12-20T00:00:00Z").timestamp();
                        for step in 0..3_000i64 {
                            let t = DateTime::from_timestamp(
                                start + (step * 4 + thread) * 2_777 + thread * 30_011,
                                0,
                            )
                            .unwrap();
                            let fresh = shared.clone();
                            assert_eq!(shared.next_after(t), fresh.next_after(t), "{zone} {t}");
                        }
                    });
                }
            });
        }
    }

    #[test]
    fn cached_answers_match_a_cold_cache() {
        let exprs = [
            "0 2 * * *",
            "*/15 * * * *",
            "0 9 * * MON-FRI",
            "0 0 29 2 *",
            "30 23 31 * *",
        ];
        let zones = [
            "Asia/Seoul",
            "America/New_York",
            "Europe/Berlin",
            "Australia/Lord_Howe",
        ];
        for expr in exprs {
            for zone in zones {
                let warm = Schedule::parse(expr, zone).unwrap();
                let start = at("2025-06-01T00:00:00Z").timestamp();
                for step in 0..4_000i64 {
                    let t = DateTime::from_timestamp(start + step * 7_919, 0).unwrap();
                    // A clone starts with an empty cache, so all its offset reads go to the tz data.
                    let cold = warm.clone();
                    assert_eq!(warm.next_after(t), cold.next_after(t), "{expr} {zone} {t}");
                }
            }
        }
    }

    #[test]
    fn fingerprint_is_stable_and_sensitive() {
        let a = Schedule::parse("0 2 * * *", "Asia/Seoul").unwrap();
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_ne!(
            a.fingerprint(),
            a.clone().with_dst(DstPolicy::Skip).fingerprint()
        );
        assert_ne!(
            a.fingerprint(),
            Schedule::parse("0 2 * * *", "Asia/Tokyo")
                .unwrap()
                .fingerprint()
        );
        // A calendar, its convention, its shift and its dates are part of it.
        let calendar = crate::Calendar::new("c", crate::Weekend::SAT_SUN);
        let rule = |c: &crate::Calendar, adjust| crate::BusinessRule::new(c.clone(), adjust);
        let on = |r| a.clone().with_calendar(r).fingerprint();
        let following = on(rule(&calendar, crate::Adjust::Following));
        assert_ne!(following, a.fingerprint());
        assert_ne!(following, on(rule(&calendar, crate::Adjust::Preceding)));
        assert_ne!(
            following,
            on(rule(&calendar, crate::Adjust::Following)
                .with_shift(1)
                .unwrap())
        );
        let holiday = chrono::NaiveDate::from_ymd_opt(2026, 9, 25).unwrap();
        let more = calendar.clone().with_holiday(holiday, "h");
        assert_ne!(following, on(rule(&more, crate::Adjust::Following)));
    }
}
