//! Business calendars against a brute-force model written here.
//!
//! The model keeps its own matcher for the day fields, walks a calendar day by day to apply each
//! convention and shift as the docs state them, and reads the wall times on the date a nominal
//! date becomes through a schedule without day fields (the DST reading of one date, which
//! `slots_proptest.rs` holds to its own minute-by-minute reference). The engine's calendar path is
//! compared with it over random weekends, holidays, conventions, shifts, DST zones and policies.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Datelike, Days, NaiveDate, NaiveDateTime, TimeZone, Utc, Weekday};
use proptest::prelude::*;
use slotguard_cron::{Adjust, BusinessRule, Calendar, DstPolicy, Schedule, Tz, Weekend};

const ZONES: [&str; 5] = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Seoul",
];
const WEEKDAYS: [Weekday; 7] = [
    Weekday::Mon,
    Weekday::Tue,
    Weekday::Wed,
    Weekday::Thu,
    Weekday::Fri,
    Weekday::Sat,
    Weekday::Sun,
];

/// The day fields of a generated expression: a day-of-month list or a day-of-week list (never
/// both, so the model's matcher needs no OR rule).
#[derive(Debug, Clone)]
enum DayFields {
    Month(BTreeSet<u32>),
    Week(BTreeSet<u32>),
}

#[derive(Debug, Clone)]
struct Case {
    zone: usize,
    policy: DstPolicy,
    minutes: BTreeSet<u32>,
    hours: BTreeSet<u32>,
    days: DayFields,
    weekend: Vec<Weekday>,
    /// Holidays as day offsets from `first`.
    holidays: BTreeSet<i64>,
    adjust: Adjust,
    shift: i32,
    first: NaiveDate,
}

fn join(set: &BTreeSet<u32>) -> String {
    set.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

impl Case {
    fn tz(&self) -> Tz {
        ZONES[self.zone].parse().expect("zone")
    }

    fn expr(&self) -> String {
        let (dom, dow) = match &self.days {
            DayFields::Month(d) => (join(d), "*".to_owned()),
            DayFields::Week(d) => ("*".to_owned(), join(d)),
        };
        format!(
            "{} {} {dom} * {dow}",
            join(&self.minutes),
            join(&self.hours)
        )
    }

    fn calendar(&self) -> Calendar {
        let weekend = Weekend::of(&self.weekend).expect("not all seven");
        self.holidays
            .iter()
            .fold(Calendar::new("model", weekend), |c, d| {
                c.with_holiday(self.first + Days::new(*d as u64), "holiday")
            })
    }

    /// The engine's schedule of the case: its expression, zone, DST policy and calendar rule.
    fn schedule(&self) -> Schedule {
        let rule = BusinessRule::new(self.calendar(), self.adjust)
            .with_shift(self.shift)
            .expect("small shift");
        Schedule::parse(&self.expr(), ZONES[self.zone])
            .expect("valid")
            .with_dst(self.policy)
            .with_calendar(rule)
    }

    /// The instants compared: from the 20th to the 60th day of the window, read at the zone's
    /// midnight (the holidays span days 0..80, so every date that can move into it is modelled).
    fn window(&self) -> (i64, i64) {
        let local = |d: u64| {
            let date = self.first + Days::new(d);
            self.tz()
                .from_utc_datetime(&date.and_hms_opt(0, 0, 0).unwrap())
                .timestamp()
        };
        (local(20), local(60))
    }

    /// The model's day matcher.
    fn nominal(&self, date: NaiveDate) -> bool {
        match &self.days {
            DayFields::Month(d) => d.contains(&date.day()),
            DayFields::Week(d) => d.contains(&date.weekday().num_days_from_sunday()),
        }
    }

    fn business(&self, date: NaiveDate) -> bool {
        !self.weekend.contains(&date.weekday())
            && !self.holidays.contains(&(date - self.first).num_days())
    }

    /// Walks from `date` by `step` days to the first business day.
    fn walk(&self, date: NaiveDate, step: i64) -> NaiveDate {
        let mut d = date;
        loop {
            d += chrono::TimeDelta::days(step);
            if self.business(d) {
                return d;
            }
        }
    }

    /// The model of a convention and shift.
    fn adjust(&self, date: NaiveDate) -> Option<NaiveDate> {
        let month = |d: NaiveDate| (d.year(), d.month());
        let mut d = if self.business(date) {
            date
        } else {
            let (next, prev) = (self.walk(date, 1), self.walk(date, -1));
            match self.adjust {
                Adjust::Skip => return None,
                Adjust::Following => next,
                Adjust::Preceding => prev,
                Adjust::ModifiedFollowing if month(next) == month(date) => next,
                Adjust::ModifiedFollowing => prev,
                Adjust::ModifiedPreceding if month(prev) == month(date) => prev,
                Adjust::ModifiedPreceding => next,
                Adjust::Nearest if (date - prev) < (next - date) => prev,
                Adjust::Nearest => next,
            }
        };
        for _ in 0..self.shift.unsigned_abs() {
            d = self.walk(d, if self.shift < 0 { -1 } else { 1 });
        }
        Some(d)
    }

    /// The wall times of the expression on `date` read in the zone under the policy, from a
    /// schedule without day fields: instant → wall.
    fn read_on(&self, date: NaiveDate) -> BTreeMap<i64, NaiveDateTime> {
        let times = format!("{} {} * * *", join(&self.minutes), join(&self.hours));
        let schedule = Schedule::parse(&times, ZONES[self.zone])
            .expect("valid")
            .with_dst(self.policy);
        let from = self
            .tz()
            .from_utc_datetime(&date.and_hms_opt(0, 0, 0).unwrap())
            .timestamp();
        schedule
            .slots_after(DateTime::from_timestamp(from - 2 * 86_400, 0).unwrap())
            .take_while(|s| s.scheduled_at.timestamp() < from + 3 * 86_400)
            .filter(|s| s.wall.date() == date)
            .map(|s| (s.scheduled_at.timestamp(), s.wall))
            .collect()
    }
}

fn set(range: std::ops::Range<u32>, max: usize) -> impl Strategy<Value = BTreeSet<u32>> {
    prop::collection::btree_set(range, 1..=max)
}

fn case() -> impl Strategy<Value = Case> {
    let days = prop_oneof![
        set(1..32, 4).prop_map(DayFields::Month),
        set(0..7, 3).prop_map(DayFields::Week),
    ];
    let weekend = prop::sample::subsequence(WEEKDAYS.to_vec(), 0..=3);
    // 2026-01-01 plus up to ~4 years, so DST transitions of every zone fall inside some windows.
    let first = (0i64..1500)
        .prop_map(|d| NaiveDate::from_ymd_opt(2026, 1, 1).unwrap() + Days::new(d as u64));
    (
        0..ZONES.len(),
        prop::sample::select(DstPolicy::ALL.to_vec()),
        set(0..60, 2),
        prop_oneof![set(0..24, 2), set(0..4, 2)],
        days,
        weekend,
        prop::collection::btree_set(0i64..80, 0..20),
        prop::sample::select(Adjust::ALL.to_vec()),
        -3i32..=3,
        first,
    )
        .prop_map(
            |(zone, policy, minutes, hours, days, weekend, holidays, adjust, shift, first)| Case {
                zone,
                policy,
                minutes,
                hours,
                days,
                weekend,
                holidays,
                adjust,
                shift,
                first,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// The engine's calendar slots equal the model's between the 20th and the 60th day of the
    /// window (the holidays span days 0..80, so every date that can move into it is modelled).
    #[test]
    fn calendar_slots_equal_the_model(case in case()) {
        let schedule = case.schedule();
        let (lo, hi) = case.window();
        let mut expected = BTreeMap::new();
        for d in 0..80 {
            let nominal = case.first + Days::new(d);
            if !case.nominal(nominal) {
                continue;
            }
            if let Some(day) = case.adjust(nominal) {
                for (instant, wall) in case.read_on(day) {
                    expected.entry(instant).or_insert(wall);
                }
            }
        }
        expected.retain(|i, _| (lo..hi).contains(i));
        let got: Vec<(i64, NaiveDateTime)> = schedule
            .slots_after(DateTime::from_timestamp(lo - 1, 0).unwrap())
            .take_while(|s| s.scheduled_at.timestamp() < hi)
            .map(|s| (s.scheduled_at.timestamp(), s.wall))
            .collect();
        let got_map: BTreeMap<i64, NaiveDateTime> = got.iter().copied().collect();
        prop_assert_eq!(got_map.len(), got.len(), "duplicate instants");
        prop_assert_eq!(got_map, expected, "`{}` {:?}", case.expr(), case);
    }

    /// Under `skip`, the removed slots (`next_removed_after`, walked) are the model's nominal slots
    /// on dates that are not business days, between the 20th and the 60th day; under any other
    /// convention there are none.
    #[test]
    fn removed_slots_equal_the_model(case in case()) {
        let schedule = case.schedule();
        let (lo, hi) = case.window();
        let mut expected = BTreeMap::new();
        if case.adjust == Adjust::Skip {
            for d in 0..80 {
                let nominal = case.first + Days::new(d);
                if case.nominal(nominal) && !case.business(nominal) {
                    expected.extend(case.read_on(nominal));
                }
            }
        }
        expected.retain(|i, _| (lo..hi).contains(i));
        let mut got = BTreeMap::new();
        let mut after = DateTime::from_timestamp(lo - 1, 0).unwrap();
        while let Some(slot) = schedule.next_removed_after(after) {
            if slot.scheduled_at.timestamp() >= hi {
                break;
            }
            prop_assert!(slot.scheduled_at > after, "not after {after}: {slot}");
            got.insert(slot.scheduled_at.timestamp(), slot.wall);
            after = slot.scheduled_at;
        }
        prop_assert_eq!(got, expected, "`{}` {:?}", case.expr(), case);
    }
}

/// The Korean payday under each convention around Chuseok 2026 (24th–26th, a Thursday to a
/// Saturday), and the Christmas-time month end in the US.
#[test]
fn payday_per_convention() {
    let day = |m, d| NaiveDate::from_ymd_opt(2026, m, d).unwrap();
    let kr = Calendar::builtin("KR").unwrap();
    let rule = |adjust| BusinessRule::new(kr.clone(), adjust);
    assert_eq!(rule(Adjust::Preceding).adjust(day(9, 25)), Some(day(9, 23)));
    assert_eq!(rule(Adjust::Following).adjust(day(9, 25)), Some(day(9, 28)));
    assert_eq!(rule(Adjust::Nearest).adjust(day(9, 25)), Some(day(9, 23)));
    assert_eq!(rule(Adjust::Skip).adjust(day(9, 25)), None);
    assert_eq!(rule(Adjust::Skip).adjust(day(9, 23)), Some(day(9, 23)));
    let shifted = rule(Adjust::Preceding).with_shift(-2).unwrap();
    assert_eq!(shifted.adjust(day(9, 25)), Some(day(9, 21)));
    // 2026-10-31 is a Saturday: following leaves October, so modified following goes back to the
    // 30th; 2026-08-01 is a Saturday: modified preceding stays in August, on Monday the 3rd.
    assert_eq!(
        rule(Adjust::ModifiedFollowing).adjust(day(10, 31)),
        Some(day(10, 30))
    );
    assert_eq!(
        rule(Adjust::ModifiedPreceding).adjust(day(8, 1)),
        Some(day(8, 3))
    );
}

/// Two nominal dates that become one business date give its slots once: the 24th, 25th and 26th
/// of September 2026 all become the 23rd under `preceding` in Seoul.
#[test]
fn dates_moved_onto_one_day_fire_once() {
    let rule = BusinessRule::new(Calendar::builtin("KR").unwrap(), Adjust::Preceding);
    let schedule = Schedule::parse("0 2 23-26 9 *", "Asia/Seoul")
        .unwrap()
        .with_calendar(rule);
    let after = Utc.with_ymd_and_hms(2026, 9, 1, 0, 0, 0).unwrap();
    let slots: Vec<String> = schedule
        .slots_after(after)
        .take(2)
        .map(|s| s.local().to_rfc3339())
        .collect();
    assert_eq!(
        slots,
        ["2026-09-23T02:00:00+09:00", "2027-09-23T02:00:00+09:00"]
    );
}

/// A nominal date before T that moves past T counts for "after T"; one after T that moves before it
/// does not.
#[test]
fn after_t_means_the_moved_instant() {
    let rule = BusinessRule::new(Calendar::builtin("KR").unwrap(), Adjust::Following);
    let schedule = Schedule::parse("0 2 25 * *", "Asia/Seoul")
        .unwrap()
        .with_calendar(rule);
    // The 25th (Chuseok) moves to Monday the 28th: asked after the 26th, it is still ahead.
    let after = Utc.with_ymd_and_hms(2026, 9, 26, 0, 0, 0).unwrap();
    let next = schedule.next_after(after).unwrap();
    assert_eq!(next.local().to_rfc3339(), "2026-09-28T02:00:00+09:00");
    let preceding = Schedule::parse("0 2 25 * *", "Asia/Seoul")
        .unwrap()
        .with_calendar(BusinessRule::new(
            Calendar::builtin("KR").unwrap(),
            Adjust::Preceding,
        ));
    // Under `preceding` the 25th became the 23rd: asked after the 24th, the next is October's.
    let after = Utc.with_ymd_and_hms(2026, 9, 24, 0, 0, 0).unwrap();
    let next = preceding.next_after(after).unwrap();
    assert_eq!(next.local().to_rfc3339(), "2026-10-23T02:00:00+09:00");
}

#[test]
fn builtin_calendars_cover_2000_to_2050() {
    for name in slotguard_cron::BUILTIN {
        let calendar = Calendar::builtin(name).unwrap();
        assert!(calendar.version().starts_with("holidays "), "{name}");
        assert!(calendar.covers(2000) && calendar.covers(2050), "{name}");
        assert!(!calendar.covers(1999) && !calendar.covers(2051), "{name}");
        for year in 2000..=2050 {
            let count = calendar
                .holidays()
                .filter(|(d, _)| d.year() == year)
                .count();
            assert!(count >= 5, "{name} has {count} holidays in {year}");
        }
    }
    assert_eq!(
        Calendar::builtin("kr")
            .unwrap()
            .holiday(NaiveDate::from_ymd_opt(2026, 9, 25).unwrap()),
        Some("Chuseok")
    );
}

#[test]
fn bad_input_is_a_typed_error() {
    use slotguard_cron::CalendarError;
    assert!(matches!(
        Calendar::builtin("XX"),
        Err(CalendarError::Unknown { .. })
    ));
    assert_eq!(Weekend::of(&WEEKDAYS), Err(CalendarError::NoBusinessDay));
    let rule = BusinessRule::new(Calendar::new("c", Weekend::SAT_SUN), Adjust::Following);
    assert!(matches!(
        rule.clone().with_shift(i32::MIN),
        Err(CalendarError::Shift { .. })
    ));
    assert!(rule.with_shift(260).is_ok());
    assert!("sideways".parse::<Adjust>().is_err());
    assert_eq!(
        "Modified_Following".parse::<Adjust>(),
        Ok(Adjust::ModifiedFollowing)
    );
}

#[test]
fn a_company_calendar_extends_a_country() {
    let day = |m, d| NaiveDate::from_ymd_opt(2026, m, d).unwrap();
    let kr = Calendar::builtin("KR").unwrap();
    let company = Calendar::new("acme", Weekend::NONE)
        .with_holiday(day(12, 28), "shutdown week")
        .extend(&kr);
    assert!(!company.is_business_day(day(12, 28)));
    assert!(!company.is_business_day(day(9, 25)));
    assert!(company.is_business_day(day(12, 29)));
    assert!(
        company.version().contains("KR: holidays"),
        "{}",
        company.version()
    );
}

#[test]
fn an_override_of_a_country_reaches_the_calendars_built_on_it() {
    let day = |m, d| NaiveDate::from_ymd_opt(2026, m, d).unwrap();
    let kr = Calendar::builtin("KR").unwrap();
    let acme = Calendar::new("acme", Weekend::NONE)
        .with_holiday(day(12, 28), "shutdown week")
        .extend(&kr);
    let team = Calendar::new("team", Weekend::NONE)
        .with_holiday(day(12, 30), "offsite")
        .extend(&acme);
    assert!(acme.follows("acme") && acme.follows("KR") && !acme.follows("JP"));
    assert!(team.follows("acme") && team.follows("KR"));
    // A temporary holiday in Korea reaches both; Chuseok withdrawn (hypothetically) leaves both.
    let added = team
        .clone()
        .with_override("KR", day(10, 2), Some("임시공휴일"));
    assert_eq!(added.holiday(day(10, 2)), Some("임시공휴일"));
    let withdrawn = team.clone().with_override("KR", day(9, 25), None);
    assert!(withdrawn.is_business_day(day(9, 25)));
    // A country's override leaves a date a calendar above it names itself.
    let kept = team.clone().with_override("KR", day(12, 28), None);
    assert_eq!(kept.holiday(day(12, 28)), Some("shutdown week"));
    let renamed = acme
        .clone()
        .with_override("KR", day(12, 28), Some("national day"));
    assert_eq!(renamed.holiday(day(12, 28)), Some("shutdown week"));
    // The company's own override reaches the team calendar built on it, but not the team's day.
    let open = team.clone().with_override("acme", day(12, 28), None);
    assert!(open.is_business_day(day(12, 28)));
    let offsite = team.clone().with_override("acme", day(12, 30), None);
    assert!(!offsite.is_business_day(day(12, 30)));
    // A calendar's own name changes any date; another calendar's changes nothing.
    assert!(
        team.clone()
            .with_override("team", day(12, 30), None)
            .is_business_day(day(12, 30))
    );
    assert_eq!(
        team.clone().with_override("JP", day(10, 2), Some("x")),
        team
    );
}
