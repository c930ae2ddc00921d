//! How long before its instant the timer offers a slot to the chain: the claim lead, longer when
//! many slots fall due at one instant.
//!
//! Claiming costs time in proportion to the slots due together. With 10,000 jobs due at one
//! instant on eight replicas (PostgreSQL, 2 cores), claims that began 100 ms ahead ended 0.45 to
//! 0.75 s after the instant: the bodies started that late, and the claims shared the server with
//! the first bodies' finishes and the second looks, which start at the instant. Begun 700 ms
//! ahead (this default), they ran alone, about 500 ms, and every row existed when the bench first
//! looked after the instant, 7–21 ms after it (docs/PERFORMANCE.md). So the default lead is the
//! base of [`claim_ahead`](crate::SchedulerBuilder::claim_ahead) (100 ms) or [`STORM_PER_SLOT`]
//! for each slot due at the instant, whichever is longer, and at most [`MAX_LEAD`]. A lead the user
//! set is kept as set.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The longest lead: the most [`claim_ahead`](crate::SchedulerBuilder::claim_ahead) allows.
pub(crate) const MAX_LEAD: Duration = Duration::from_secs(1);

/// The default lead's allowance per slot due at one instant: 1,428 slots or fewer keep the base
/// lead (100 ms), 10,000 get 700 ms, 14,286 or more [`MAX_LEAD`]. The claims of 10,000 slots took
/// about 50 µs a slot on 2 cores beside nothing else; the rest is margin.
pub(crate) const STORM_PER_SLOT: Duration = Duration::from_micros(70);

/// The timer's lead: a base, and an allowance per slot due at the same instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lead {
    base: Duration,
    per_slot: Duration,
}

impl Lead {
    /// `base`, whatever falls due together (a lead the user set).
    pub(crate) const fn fixed(base: Duration) -> Self {
        Lead {
            base,
            per_slot: Duration::ZERO,
        }
    }

    /// `base`, or [`STORM_PER_SLOT`] per slot due at the instant when that is longer.
    pub(crate) const fn for_storms(base: Duration) -> Self {
        Lead {
            base,
            per_slot: STORM_PER_SLOT,
        }
    }

    /// The shortest lead, whatever falls due.
    pub(crate) const fn base(self) -> Duration {
        self.base
    }

    /// The lead of an instant at which `slots` slots fall due.
    pub(crate) fn of(self, slots: usize) -> Duration {
        let slots = u32::try_from(slots).unwrap_or(u32::MAX);
        let storm = self.per_slot.saturating_mul(slots).min(MAX_LEAD);
        self.base.max(storm)
    }
}

/// How many slots of the timer's heap fall due at each instant.
#[derive(Debug, Default)]
pub(crate) struct Instants(BTreeMap<DateTime<Utc>, usize>);

impl Instants {
    /// One slot more at `at`.
    pub(crate) fn add(&mut self, at: DateTime<Utc>) {
        *self.0.entry(at).or_default() += 1;
    }

    /// One slot less at `at`.
    pub(crate) fn remove(&mut self, at: DateTime<Utc>) {
        if let Some(n) = self.0.get_mut(&at) {
            *n -= 1;
            if *n == 0 {
                self.0.remove(&at);
            }
        }
    }

    /// No slot anywhere.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// When the first instant's slots are to be offered: the earliest `at - lead(at)`. Only the
    /// instants within [`MAX_LEAD`] of the earliest can come first.
    pub(crate) fn wake(&self, lead: Lead) -> Option<DateTime<Utc>> {
        let first = *self.0.keys().next()?;
        self.within(first + to_chrono(MAX_LEAD))
            .map(|(at, n)| at - to_chrono(lead.of(n)))
            .min()
    }

    /// How far past `now` the slots to offer at `now` reach: the base lead, or up to the latest
    /// instant whose own lead has begun.
    pub(crate) fn horizon(&self, lead: Lead, now: DateTime<Utc>) -> chrono::Duration {
        let base = to_chrono(lead.base());
        self.within(now + to_chrono(MAX_LEAD))
            .filter(|&(at, n)| at - to_chrono(lead.of(n)) <= now)
            .map(|(at, _)| at - now)
            .fold(base, chrono::Duration::max)
    }

    /// The instants up to `until`, with their slot counts.
    fn within(&self, until: DateTime<Utc>) -> impl Iterator<Item = (DateTime<Utc>, usize)> + '_ {
        self.0.range(..=until).map(|(&at, &n)| (at, n))
    }
}

fn to_chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn ms(n: i64) -> chrono::Duration {
        chrono::Duration::milliseconds(n)
    }

    const BASE: Duration = Duration::from_millis(100);

    #[test]
    fn the_default_lead_grows_with_the_slots_due_together_up_to_a_second() {
        let lead = Lead::for_storms(BASE);
        assert_eq!(lead.of(1), BASE);
        assert_eq!(lead.of(1_000), BASE);
        assert_eq!(lead.of(2_000), Duration::from_millis(140));
        assert_eq!(lead.of(10_000), Duration::from_millis(700));
        assert_eq!(lead.of(20_000), MAX_LEAD);
        assert_eq!(lead.of(usize::MAX), MAX_LEAD);
        // A lead the user set stays as set.
        assert_eq!(Lead::fixed(BASE).of(10_000), BASE);
        assert_eq!(Lead::fixed(Duration::ZERO).of(10_000), Duration::ZERO);
    }

    /// `n` slots at `at`.
    fn instants(slots: &[(&str, usize)]) -> Instants {
        let mut instants = Instants::default();
        for &(s, n) in slots {
            for _ in 0..n {
                instants.add(at(s));
            }
        }
        instants
    }

    #[test]
    fn a_storm_behind_a_lone_slot_wakes_the_timer_first() {
        let lead = Lead::for_storms(BASE);
        // One slot at :00.5 (offered at :00.4), 8,000 at :01 (offered at :00.44).
        let mut i = instants(&[
            ("2026-01-05T02:00:00.5Z", 1),
            ("2026-01-05T02:00:01Z", 8_000),
        ]);
        assert_eq!(i.wake(lead), Some(at("2026-01-05T02:00:00.4Z")));
        // 10,000 at :01 are offered at :00.3 (700 ms ahead), before the lone slot.
        for _ in 0..2_000 {
            i.add(at("2026-01-05T02:00:01Z"));
        }
        assert_eq!(i.wake(lead), Some(at("2026-01-05T02:00:00.3Z")));
        // Without the allowance the first instant comes first, by the base lead.
        assert_eq!(
            i.wake(Lead::fixed(BASE)),
            Some(at("2026-01-05T02:00:00.4Z"))
        );
        assert_eq!(Instants::default().wake(lead), None);
    }

    #[test]
    fn the_horizon_reaches_the_storm_whose_lead_has_begun_and_no_further() {
        let lead = Lead::for_storms(BASE);
        let i = instants(&[
            ("2026-01-05T02:00:00.5Z", 1),
            ("2026-01-05T02:00:01Z", 10_000),
            ("2026-01-05T02:00:01.2Z", 1),
        ]);
        let now = at("2026-01-05T02:00:00.3Z");
        // The storm at :01 is 700 ms ahead: its lead (700 ms) has begun; the lone slot after it
        // (100 ms) has not.
        assert_eq!(i.horizon(lead, now), ms(700));
        assert_eq!(i.horizon(lead, now - ms(1)), ms(100));
        assert_eq!(i.horizon(lead, at("2026-01-05T02:00:00.5Z")), ms(500));
        assert_eq!(i.horizon(Lead::fixed(BASE), now), ms(100));
    }

    #[test]
    fn counts_follow_the_slots_added_and_removed() {
        let mut i = instants(&[("2026-01-05T02:00:01Z", 3)]);
        let lead = Lead::for_storms(Duration::ZERO);
        assert_eq!(i.wake(lead), Some(at("2026-01-05T02:00:00.99979Z")));
        i.remove(at("2026-01-05T02:00:01Z"));
        i.remove(at("2026-01-05T02:00:07Z"));
        assert_eq!(i.wake(lead), Some(at("2026-01-05T02:00:00.99986Z")));
        i.remove(at("2026-01-05T02:00:01Z"));
        i.remove(at("2026-01-05T02:00:01Z"));
        assert_eq!(i.wake(lead), None);
        i.add(at("2026-01-05T02:00:02Z"));
        i.clear();
        assert_eq!(i.wake(lead), None);
    }
}
