//! Property tests of the slot engine (`Schedule::next_after`, `Schedule::slots_after`).
//!
//! The central property compares the engine with an independent reference written here: it walks the
//! local wall-clock minutes of a few local dates, resolves each matching one with chrono's
//! `TimeZone::from_local_datetime` (one instant, two, or none) and applies the DST policy table of
//! DESIGN §3.3. The other properties pin what must hold whatever the table says: the slots do not
//! depend on where the computation starts, they strictly increase, every slot matches the fields, and
//! each policy's gap and overlap rule holds on its own. Start instants are biased towards the DST
//! transitions of the zones that break naive code.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use chrono::{
    DateTime, Datelike, Days, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone, Timelike,
    Utc,
};
use proptest::prelude::*;
use proptest::sample::{Index, select, subsequence};
use proptest::test_runner::FileFailurePersistence;
use slotguard_cron::{CronExpr, DstPolicy, Schedule, Slot, Tz};

const ZONES: [&str; 8] = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Antarctica/Troll",
    "Pacific/Apia",
    "Asia/Seoul",
    "Asia/Kolkata",
];
const APIA: usize = 5;
const MINUTE: i64 = 60;
const HOUR: i64 = 3600;
const DAY: i64 = 86_400;
/// cronie fires fixed-time jobs of a skipped period at the transition only for gaps shorter than this.
const VIXIE_MAX_GAP: i64 = 3 * HOUR;
/// 1995-01-01T00:00:00Z and 2041-01-01T00:00:00Z.
const FROM: i64 = 788_918_400;
const UNTIL: i64 = 2_240_524_800;
/// The first and last instants chrono can represent.
const MIN_TS: i64 = DateTime::<Utc>::MIN_UTC.timestamp();
const MAX_TS: i64 = DateTime::<Utc>::MAX_UTC.timestamp();
/// At most this many slots per matching day, to keep the suite fast in debug builds.
const MAX_TIMES_PER_DAY: u32 = 300;

fn zone(index: usize) -> Tz {
    ZONES[index].parse().expect("known zone")
}

fn utc(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).expect("instant in range")
}

fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339)
        .expect("valid RFC 3339")
        .with_timezone(&Utc)
}

/// Wall-clock seconds: a naive date-time counted as if it were UTC.
fn wall_secs(wall: NaiveDateTime) -> i64 {
    wall.and_utc().timestamp()
}

fn day_start(date: NaiveDate) -> i64 {
    wall_secs(date.and_hms_opt(0, 0, 0).expect("midnight"))
}

fn offset_at(tz: Tz, instant: i64) -> i64 {
    i64::from(
        utc(instant)
            .with_timezone(&tz)
            .offset()
            .fix()
            .local_minus_utc(),
    )
}

fn local_date(tz: Tz, instant: i64) -> NaiveDate {
    utc(instant).with_timezone(&tz).date_naive()
}

fn show(tz: Tz, instant: i64) -> String {
    utc(instant)
        .with_timezone(&tz)
        .format("%Y-%m-%d %H:%M:%S%:z")
        .to_string()
}

// ---------------------------------------------------------------------------------------------------
// Transitions, found by scanning offsets and bisecting to the second.

/// The offset changes from `before` to `after` at instant `at` (the first instant with `after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Transition {
    at: i64,
    before: i64,
    after: i64,
}

impl Transition {
    /// Wall times `[at + before, at + after)` do not exist.
    fn is_gap(&self) -> bool {
        self.after > self.before
    }
}

/// The transitions in `(from, to]`, scanning every `step` seconds: no zone here changes its offset
/// twice within one step.
fn transitions_between(tz: Tz, from: i64, to: i64, step: i64) -> Vec<Transition> {
    let mut found = Vec::new();
    let mut a = from;
    let mut offset = offset_at(tz, a);
    while a < to {
        let b = (a + step).min(to);
        let next = offset_at(tz, b);
        if next != offset {
            let (mut lo, mut hi) = (a, b);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if offset_at(tz, mid) == offset {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            found.push(Transition {
                at: hi,
                before: offset,
                after: offset_at(tz, hi),
            });
        }
        offset = next;
        a = b;
    }
    found
}

/// Every transition of every zone between 1995 and 2041.
fn all_transitions() -> &'static [Vec<Transition>] {
    static ALL: OnceLock<Vec<Vec<Transition>>> = OnceLock::new();
    ALL.get_or_init(|| {
        (0..ZONES.len())
            .map(|z| transitions_between(zone(z), FROM, UNTIL, DAY / 2))
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------------
// The reference reading of an expression: its own field parser, independent of the crate's.

#[derive(Debug, Clone)]
struct RefExpr {
    text: String,
    /// `{0}` for 5-field expressions.
    seconds: u64,
    minutes: u64,
    hours: u64,
    months: u64,
    dom: Vec<DayRule>,
    dow: Vec<DayRule>,
    dom_star: bool,
    dow_star: bool,
    fixed: bool,
    expr: CronExpr,
}

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// A plain field (`*`, `?`, `n`, `a-b`, lists, `/step`) as a bit set.
fn ref_set(field: &str, star: (u32, u32), max: u32, names: &[&str], name_base: u32) -> u64 {
    let value = |s: &str| -> u32 {
        names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(s))
            .map_or_else(|| s.parse().expect("number"), |p| p as u32 + name_base)
    };
    let mut bits = 0u64;
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, step.parse::<u32>().expect("step")),
            None => (item, 1),
        };
        let (a, b) = if range == "*" || range == "?" {
            star
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a), value(b))
        } else if item.contains('/') {
            (value(range), max)
        } else {
            (value(range), value(range))
        };
        let mut v = a;
        while v <= b {
            bits |= 1 << v;
            v += step;
        }
    }
    bits
}

/// One item of a day field.
#[derive(Debug, Clone, Copy)]
enum DayRule {
    /// Days of the month (bits 1..=31), or weekdays (bits 0..=6, Sunday is 0).
    Set(u64),
    /// `L` (0), `L-n`: n days before the last day of the month.
    BeforeLast(u32),
    /// `LW`: the last weekday (Monday to Friday) of the month.
    LastWeekday,
    /// `nW`: the weekday nearest day n, without leaving the month.
    Nearest(u32),
    /// `w#n`: the n-th weekday w of the month.
    Nth(u32, u32),
    /// `wL`: the last weekday w of the month.
    LastOf(u32),
}

fn last_day_of_month(date: NaiveDate) -> u32 {
    let (y, m) = (date.year(), date.month());
    let next = if m == 12 {
        NaiveDate::from_ymd_opt(y + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(y, m + 1, 1)
    };
    next.and_then(|d| d.pred_opt()).expect("date").day()
}

/// The weekday nearest `target`, within its month (`last` is the month's last day).
fn nearest_weekday(target: NaiveDate, last: u32) -> NaiveDate {
    match target.weekday() {
        chrono::Weekday::Sat if target.day() == 1 => target + Days::new(2),
        chrono::Weekday::Sat => target - Days::new(1),
        chrono::Weekday::Sun if target.day() == last => target - Days::new(2),
        chrono::Weekday::Sun => target + Days::new(1),
        _ => target,
    }
}

impl DayRule {
    fn dom(item: &str) -> DayRule {
        let upper = item.to_ascii_uppercase();
        if upper == "L" {
            DayRule::BeforeLast(0)
        } else if upper == "LW" {
            DayRule::LastWeekday
        } else if let Some(n) = upper.strip_prefix("L-") {
            DayRule::BeforeLast(n.parse().expect("number"))
        } else if let Some(n) = upper.strip_suffix('W') {
            DayRule::Nearest(n.parse().expect("number"))
        } else {
            DayRule::Set(ref_set(item, (1, 31), 31, &[], 0))
        }
    }

    fn dow(item: &str) -> DayRule {
        let weekday = |s: &str| ref_set(s, (0, 6), 7, &DAY_NAMES, 0).trailing_zeros() % 7;
        if let Some((w, n)) = item.split_once('#') {
            DayRule::Nth(weekday(w), n.parse().expect("number"))
        } else if let Some(w) = item.strip_suffix(['L', 'l']).filter(|w| !w.is_empty()) {
            DayRule::LastOf(weekday(w))
        } else {
            let bits = ref_set(item, (0, 6), 7, &DAY_NAMES, 0);
            DayRule::Set((bits | (bits >> 7)) & 0x7f)
        }
    }

    fn matches_dom(self, date: NaiveDate) -> bool {
        let (day, last) = (date.day(), last_day_of_month(date));
        match self {
            DayRule::Set(bits) => bits & (1 << day) != 0,
            DayRule::BeforeLast(n) => n < last && day == last - n,
            DayRule::LastWeekday => {
                let last_date = date.with_day(last).expect("date");
                let friday_or_before = match last_date.weekday() {
                    chrono::Weekday::Sat => last_date - Days::new(1),
                    chrono::Weekday::Sun => last_date - Days::new(2),
                    _ => last_date,
                };
                date == friday_or_before
            }
            DayRule::Nearest(n) => {
                n <= last && date == nearest_weekday(date.with_day(n).expect("date"), last)
            }
            DayRule::Nth(..) | DayRule::LastOf(_) => unreachable!("day-of-week rule"),
        }
    }

    fn matches_dow(self, date: NaiveDate) -> bool {
        let (day, last) = (date.day(), last_day_of_month(date));
        let wd = date.weekday().num_days_from_sunday();
        match self {
            DayRule::Set(bits) => bits & (1 << wd) != 0,
            DayRule::Nth(w, n) => wd == w && (day - 1) / 7 + 1 == n,
            DayRule::LastOf(w) => wd == w && day + 7 > last,
            _ => unreachable!("day-of-month rule"),
        }
    }
}

impl RefExpr {
    fn parse(text: &str) -> Option<RefExpr> {
        let expr = CronExpr::parse(text).ok()?;
        let expanded = match text {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let all: Vec<&str> = expanded.split_whitespace().collect();
        let (sec, f) = match all.len() {
            5 => ("0", &all[..]),
            6 => (all[0], &all[1..]),
            n => panic!("{n} fields in `{text}`"),
        };
        let star = |s: &str| s.starts_with(['*', '?']);
        Some(RefExpr {
            text: text.to_owned(),
            seconds: ref_set(sec, (0, 59), 59, &[], 0),
            minutes: ref_set(f[0], (0, 59), 59, &[], 0),
            hours: ref_set(f[1], (0, 23), 23, &[], 0),
            months: ref_set(f[3], (1, 12), 12, &MONTH_NAMES, 1),
            dom: f[2].split(',').map(DayRule::dom).collect(),
            dow: f[4].split(',').map(DayRule::dow).collect(),
            dom_star: star(f[2]),
            dow_star: star(f[4]),
            fixed: !star(sec) && !star(f[0]) && !star(f[1]),
            expr,
        })
    }

    fn times_per_day(&self) -> u32 {
        self.seconds.count_ones() * self.minutes.count_ones() * self.hours.count_ones()
    }

    fn matches_time(&self, hour: u32, minute: u32) -> bool {
        self.hours & (1 << hour) != 0 && self.minutes & (1 << minute) != 0
    }

    /// Vixie's rule: when either day field starts with `*` both must match, otherwise either may.
    fn matches_date(&self, date: NaiveDate) -> bool {
        let month = self.months & (1 << date.month()) != 0;
        let dom = self.dom.iter().any(|r| r.matches_dom(date));
        let dow = self.dow.iter().any(|r| r.matches_dow(date));
        month
            && if self.dom_star || self.dow_star {
                dom && dow
            } else {
                dom || dow
            }
    }

    fn matches(&self, wall: NaiveDateTime) -> bool {
        self.seconds & (1 << wall.second()) != 0
            && wall.nanosecond() == 0
            && self.matches_time(wall.hour(), wall.minute())
            && self.matches_date(wall.date())
    }

    fn schedule(&self, tz: Tz, policy: DstPolicy) -> Schedule {
        Schedule::new(self.expr.clone(), tz, policy)
    }
}

fn fires_twice(e: &RefExpr, policy: DstPolicy) -> bool {
    match policy {
        DstPolicy::Instant => true,
        DstPolicy::Vixie => !e.fixed,
        DstPolicy::Skip | DstPolicy::Shift => false,
    }
}

// ---------------------------------------------------------------------------------------------------
// The reference slot set over a window of local dates.

/// Local dates `first..=last` of a zone, and the instants `[lo, hi)` that only wall times of those
/// dates can reach, so the reference and the engine can be compared there without edge effects.
#[derive(Debug)]
struct Window {
    tz: Tz,
    first: NaiveDate,
    last: NaiveDate,
    transitions: Vec<Transition>,
    lo: i64,
    hi: i64,
}

impl Window {
    fn new(tz: Tz, first: NaiveDate, days: u64) -> Window {
        let last = first + Days::new(days - 1);
        let (f0, l0) = (day_start(first), day_start(last) + DAY);
        let (from, to) = (f0 - 2 * DAY, l0 + 2 * DAY);
        let transitions = transitions_between(tz, from, to, 15 * MINUTE);
        let start = offset_at(tz, from);
        let (mut min_off, mut max_off) = (start, start);
        for t in &transitions {
            min_off = min_off.min(t.after);
            max_off = max_off.max(t.after);
        }
        // Every slot instant i of a wall time w (regular, at a transition T of a gap containing w, or
        // w read with the offset before the gap) lies in [w - max_off, w - min_off]. So wall times
        // before `first` give instants before f0 - min_off, and wall times after `last` give instants
        // at or after l0 - max_off.
        Window {
            tz,
            first,
            last,
            transitions,
            lo: f0 - min_off,
            hi: l0 - max_off,
        }
    }

    fn dates(&self) -> impl Iterator<Item = NaiveDate> + '_ {
        self.first.iter_days().take_while(|d| *d <= self.last)
    }

    /// The matching wall times of the window, minute by minute (and second by second inside a
    /// matching minute), in order.
    fn matching_walls<'a>(&'a self, e: &'a RefExpr) -> impl Iterator<Item = NaiveDateTime> + 'a {
        self.dates()
            .filter(|d| e.matches_date(*d))
            .flat_map(move |d| {
                (0..24 * 60)
                    .filter(move |m| e.matches_time(m / 60, m % 60))
                    .flat_map(move |m| {
                        (0..60)
                            .filter(move |s| e.seconds & (1 << s) != 0)
                            .map(move |s| d.and_hms_opt(m / 60, m % 60, s).expect("valid time"))
                    })
            })
    }

    /// The gap transition whose skipped wall times contain `wall`.
    fn gap_of(&self, wall: NaiveDateTime) -> Transition {
        let w = wall_secs(wall);
        *self
            .transitions
            .iter()
            .find(|t| t.is_gap() && t.at + t.before <= w && w < t.at + t.after)
            .unwrap_or_else(|| panic!("{wall} does not exist in {} but no gap holds it", self.tz))
    }

    fn in_range(&self, instant: i64) -> bool {
        self.lo <= instant && instant < self.hi
    }

    /// DESIGN §3.3 applied to every matching wall time: instant → the wall time naming it (the
    /// earliest when several land on one instant).
    fn reference(&self, e: &RefExpr, policy: DstPolicy) -> BTreeMap<i64, NaiveDateTime> {
        let mut slots = BTreeMap::new();
        let mut add = |instant: i64, wall: NaiveDateTime| {
            // Wall times come in increasing order, so the first one kept is the earliest.
            slots.entry(instant).or_insert(wall);
        };
        for wall in self.matching_walls(e) {
            match self.tz.from_local_datetime(&wall) {
                LocalResult::Single(x) => add(x.timestamp(), wall),
                LocalResult::Ambiguous(a, b) => {
                    let (a, b) = (a.timestamp(), b.timestamp());
                    add(a.min(b), wall);
                    if fires_twice(e, policy) {
                        add(a.max(b), wall);
                    }
                }
                LocalResult::None => {
                    let gap = self.gap_of(wall);
                    match policy {
                        DstPolicy::Vixie if e.fixed && gap.after - gap.before < VIXIE_MAX_GAP => {
                            add(gap.at, wall);
                        }
                        DstPolicy::Shift => add(wall_secs(wall) - gap.before, wall),
                        DstPolicy::Vixie | DstPolicy::Skip | DstPolicy::Instant => {}
                    }
                }
            }
        }
        slots.retain(|i, _| self.in_range(*i));
        slots
    }

    /// The engine's slots in `[lo, hi)`.
    fn engine(&self, schedule: &Schedule) -> Vec<Slot> {
        schedule
            .slots_after(utc(self.lo - 1))
            .take_while(|s| s.scheduled_at.timestamp() < self.hi)
            .collect()
    }
}

fn describe(tz: Tz, slots: &BTreeMap<i64, NaiveDateTime>) -> Vec<String> {
    slots
        .iter()
        .map(|(i, w)| format!("{} (wall {w})", show(tz, *i)))
        .collect()
}

// ---------------------------------------------------------------------------------------------------
// Strategies.

fn join(v: Vec<u32>) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}

fn minute_field() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0u32..60).prop_map(|m| m.to_string()),
        2 => select(vec![0u32, 15, 30, 45, 59]).prop_map(|m| m.to_string()),
        2 => subsequence((0u32..60).collect::<Vec<_>>(), 2..=4).prop_map(join),
        1 => (0u32..54, 1u32..6).prop_map(|(a, n)| format!("{a}-{}", a + n)),
        3 => select(vec![5u32, 7, 10, 15, 20, 30]).prop_map(|k| format!("*/{k}")),
        1 => (0u32..15, select(vec![10u32, 15, 20, 30])).prop_map(|(a, k)| format!("{a}/{k}")),
        1 => (0u32..20, 20u32..60, select(vec![7u32, 10, 20]))
            .prop_map(|(a, b, k)| format!("{a}-{b}/{k}")),
        1 => Just("*".to_owned()),
    ]
}

fn hour_field(hint: Vec<u32>) -> BoxedStrategy<String> {
    let general = prop_oneof![
        // Local DST transitions happen around these hours.
        5 => select(vec![0u32, 1, 2, 3, 23]).prop_map(|h| h.to_string()),
        2 => (0u32..24).prop_map(|h| h.to_string()),
        2 => subsequence(vec![0u32, 1, 2, 3, 4, 12, 22, 23], 2..=4).prop_map(join),
        2 => (0u32..4, 1u32..4).prop_map(|(a, n)| format!("{a}-{}", a + n)),
        2 => Just("*".to_owned()),
        1 => select(vec![2u32, 3, 5]).prop_map(|k| format!("*/{k}")),
        1 => (0u32..3, select(vec![2u32, 3])).prop_map(|(a, k)| format!("{a}-23/{k}")),
    ];
    if hint.is_empty() {
        return general.boxed();
    }
    // The wall hours a nearby transition skips or repeats.
    prop_oneof![
        3 => general,
        4 => select(hint.clone()).prop_map(|h| h.to_string()),
        2 => (select(hint), 0u32..24).prop_map(|(a, b)| join(if a == b {
            vec![a]
        } else {
            vec![a.min(b), a.max(b)]
        })),
    ]
    .boxed()
}

/// The wall hours skipped or repeated by the transition of zone `z` nearest to `instant`, if one is
/// within three days.
fn transition_hours(z: usize, instant: i64) -> Vec<u32> {
    let Some(t) = all_transitions()[z]
        .iter()
        .filter(|t| (t.at - instant).abs() < 3 * DAY)
        .min_by_key(|t| (t.at - instant).abs())
    else {
        return Vec::new();
    };
    let (lo, hi) = (t.at + t.before.min(t.after), t.at + t.before.max(t.after));
    let mut hours: Vec<u32> = (lo..hi)
        .step_by(MINUTE as usize)
        .map(|w| (w.rem_euclid(DAY) / HOUR) as u32)
        .collect();
    hours.sort_unstable();
    hours.dedup();
    hours
}

fn dom_field(star_weight: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        star_weight => Just("*".to_owned()),
        2 => Just("?".to_owned()),
        1 => (1u32..=31).prop_map(|d| d.to_string()),
        1 => Just("13".to_owned()),
        1 => Just("1-7".to_owned()),
        1 => Just("*/2".to_owned()),
        1 => Just("1,15,29".to_owned()),
        3 => select(vec!["L", "L-3", "L-30", "LW", "1W", "15W", "30W", "31W", "1,L", "L-1,13W"])
            .prop_map(str::to_owned),
    ]
}

fn month_field() -> impl Strategy<Value = String> {
    prop_oneof![
        30 => Just("*".to_owned()),
        // The months with transitions in the zones above.
        2 => Just("3,4,9,10,11,12".to_owned()),
        1 => Just("1-6".to_owned()),
        1 => Just("MAR-NOV".to_owned()),
    ]
}

fn dow_field(star_weight: u32) -> impl Strategy<Value = String> {
    prop_oneof![
        star_weight => Just("*".to_owned()),
        // Most transitions fall on a Sunday.
        2 => select(vec!["0", "7", "SUN", "0,6"]).prop_map(str::to_owned),
        1 => (0u32..=7).prop_map(|d| d.to_string()),
        1 => Just("1-5".to_owned()),
        1 => Just("SAT,SUN".to_owned()),
        1 => Just("MON-FRI".to_owned()),
        1 => Just("*/2".to_owned()),
        3 => select(vec!["5#1", "2#5", "SUN#2", "0L", "7L", "FRIL", "5L,1#1", "1#1,5"])
            .prop_map(str::to_owned),
    ]
}

const LITERALS: [&str; 22] = [
    "30 2 * * *",
    "0 0,1,2,3 * * *",
    "15 1 * * 0",
    "*/15 * * * *",
    "0 * * * *",
    "*/7 1-3 * * *",
    "30 * * * *",
    "0,30 2,3 * * *",
    "0 0 * * *",
    "30 0 * * *",
    "0 23 * * *",
    "59 1 * * *",
    "*/30 0-3 * * *",
    "45 1-2 * * *",
    "0-59/20 1,2 * * *",
    "* 2 * * *",
    "0 0 13 * 5",
    "0 2 * * 1-5",
    "0 3 * * SUN",
    "@daily",
    "@hourly",
    "@weekly",
];

fn second_field() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => Just(String::new()),
        2 => (0u32..60).prop_map(|s| format!("{s} ")),
        1 => select(vec!["0,30", "*/20", "15-17", "*/30", "5/15", "*"]).prop_map(|s| format!("{s} ")),
    ]
}

fn expr(hint: Vec<u32>) -> impl Strategy<Value = RefExpr> {
    let generated = (
        second_field(),
        minute_field(),
        hour_field(hint),
        dom_field(40),
        month_field(),
        dow_field(40),
    )
        .prop_map(|(s, m, h, dom, mon, dow)| format!("{s}{m} {h} {dom} {mon} {dow}"));
    prop_oneof![
        1 => select(LITERALS.to_vec()).prop_map(str::to_owned),
        3 => generated,
    ]
    .prop_filter_map("valid and not too dense", |text| {
        RefExpr::parse(&text).filter(|e| e.times_per_day() <= MAX_TIMES_PER_DAY)
    })
}

fn policy() -> impl Strategy<Value = DstPolicy> {
    select(DstPolicy::ALL.to_vec())
}

/// A zone and an instant to start from: uniform over 1995..2041, near a transition of the zone (to
/// the second, within three hours), inside a repeated period, or around Apia's skipped day.
fn start() -> impl Strategy<Value = (usize, i64)> {
    fn near(z: usize, pick: Index, delta: i64) -> (usize, i64) {
        let list = &all_transitions()[z];
        if list.is_empty() {
            (z, FROM + pick.index((UNTIL - FROM) as usize) as i64)
        } else {
            (z, list[pick.index(list.len())].at + delta)
        }
    }
    fn repeated(z: usize, pick: Index, within: Index) -> (usize, i64) {
        let backs: Vec<_> = all_transitions()[z]
            .iter()
            .filter(|t| !t.is_gap())
            .collect();
        if backs.is_empty() {
            return near(z, pick, 0);
        }
        let t = backs[pick.index(backs.len())];
        let len = (t.before - t.after) as usize;
        // Either pass of the repeated period: [at - len, at + len).
        (z, t.at - len as i64 + within.index(2 * len) as i64)
    }
    prop_oneof![
        2 => (0..ZONES.len(), FROM..UNTIL),
        5 => (0..ZONES.len(), any::<Index>(), -3 * HOUR..3 * HOUR)
            .prop_map(|(z, pick, delta)| near(z, pick, delta)),
        2 => (0..ZONES.len(), any::<Index>(), any::<Index>())
            .prop_map(|(z, pick, within)| repeated(z, pick, within)),
        // 2011-12-29T10:00Z .. 2011-12-31T10:00Z: windows that hold the skipped 2011-12-30.
        1 => (1_325_152_800i64..1_325_325_600).prop_map(|t| (APIA, t)),
    ]
}

/// A start, and an expression biased towards the wall hours of a transition near it.
fn case() -> impl Strategy<Value = (usize, i64, RefExpr)> {
    start().prop_flat_map(|(z, t)| (Just(z), Just(t), expr(transition_hours(z, t))))
}

/// `cases` cases, or `PROPTEST_CASES` when set (for a longer hunt).
fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        max_global_rejects: 10 * cases,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------------
// Properties.

proptest! {
    #![proptest_config(config(256))]

    /// 1. The engine's slots equal the minute-by-minute reference over four local dates, under each
    /// policy.
    #[test]
    fn slots_equal_the_reference((z, instant, e) in case()) {
        let tz = zone(z);
        let first = local_date(tz, instant).pred_opt().expect("date");
        let window = Window::new(tz, first, 4);
        for policy in DstPolicy::ALL {
            let expected = window.reference(&e, policy);
            let engine = window.engine(&e.schedule(tz, policy));
            let got: BTreeMap<i64, NaiveDateTime> = engine
                .iter()
                .map(|s| (s.scheduled_at.timestamp(), s.wall))
                .collect();
            prop_assert_eq!(got.len(), engine.len(), "duplicate instants");
            if got != expected {
                let missing: BTreeMap<_, _> =
                    expected.iter().filter(|(i, w)| got.get(i) != Some(w)).map(|(i, w)| (*i, *w)).collect();
                let extra: BTreeMap<_, _> =
                    got.iter().filter(|(i, w)| expected.get(i) != Some(w)).map(|(i, w)| (*i, *w)).collect();
                prop_assert!(
                    false,
                    "`{}` in {} under {policy}, local dates {}..={}:\nmissing (reference only): {:#?}\nextra (engine only): {:#?}\ntransitions: {:?}",
                    e.text, tz, window.first, window.last,
                    describe(tz, &missing), describe(tz, &extra), window.transitions
                );
            }
        }
    }

    /// 2. Start-independence: the slots after b are the slots after a < b that come after b, whether
    /// b is a whole minute or not, before, inside or after a repeated period.
    #[test]
    fn slots_do_not_depend_on_the_start(
        (z, b, e) in case(),
        nanos in prop_oneof![Just(0u32), 1u32..1_000_000_000],
        back in 1i64..3 * DAY,
        policy in policy(),
    ) {
        let tz = zone(z);
        let schedule = e.schedule(tz, policy);
        // b is a whole second, or not.
        let b_at = utc(b) + chrono::Duration::nanoseconds(i64::from(nanos));
        let a = b - back;
        let horizon = utc(b + 2 * DAY);
        let from_a: Vec<Slot> = schedule
            .slots_after(utc(a))
            .skip_while(|s| s.scheduled_at <= b_at)
            .take_while(|s| s.scheduled_at <= horizon)
            .take(2_000)
            .collect();
        let from_b: Vec<Slot> = schedule
            .slots_after(b_at)
            .take_while(|s| s.scheduled_at <= horizon)
            .take(2_000)
            .collect();
        prop_assert_eq!(
            &from_a, &from_b,
            "`{}` in {} under {}: from {} vs from {} (+{}ns)", e.text, tz, policy, show(tz, a), show(tz, b), nanos
        );
        // One step of `next_after` from just before a slot, or from the previous slot, gives it.
        for pair in from_b.windows(2) {
            let (p, s) = (pair[0].scheduled_at, pair[1].scheduled_at);
            prop_assert_eq!(schedule.next_after(p), Some(pair[1]));
            prop_assert_eq!(schedule.next_after(s - chrono::Duration::seconds(1)), Some(pair[1]));
        }
    }

    /// The whole calendar chrono can represent: the search never panics, a slot comes after its
    /// start and matches, and a daily job has a slot within a day and a bit of any instant but the
    /// calendar's last days. The ends of the range are where bounded searches overflow.
    #[test]
    fn calendar_edges(
        (z, _, e) in case(),
        policy in policy(),
        after in prop_oneof![
            Just(MIN_TS),
            MIN_TS..MIN_TS + 1_000 * 366 * DAY,
            MIN_TS..MAX_TS,
            MAX_TS - 1_000 * 366 * DAY..MAX_TS,
            Just(MAX_TS),
        ],
    ) {
        let tz = zone(z);
        if let Some(slot) = e.schedule(tz, policy).next_after(utc(after)) {
            prop_assert!(slot.scheduled_at > utc(after), "`{}`: {} after {}", e.text, slot, after);
            prop_assert!(e.matches(slot.wall), "`{}`: {}", e.text, slot);
        }
        let daily = Schedule::new(CronExpr::parse("0 0 * * *").expect("valid"), tz, policy);
        let next = daily.next_after(utc(after));
        if after < MAX_TS - 3 * DAY {
            prop_assert!(next.is_some(), "no daily slot in {} under {} after {}", tz, policy, utc(after));
            let slot = next.expect("checked");
            prop_assert!(slot.scheduled_at > utc(after));
            prop_assert!(slot.scheduled_at <= utc(after + DAY + 2 * HOUR), "{} after {}", slot, utc(after));
        }
    }

    /// DESIGN §3.3: fixed-time when no time field (seconds, minutes, hours) starts with `*`.
    #[test]
    fn fixed_time_is_read_from_the_fields(e in expr(Vec::new())) {
        prop_assert_eq!(e.expr.is_fixed_time(), e.fixed, "`{}`", e.text);
    }

    /// 3 and 4. Slots strictly increase, and every slot matches the fields; a slot not made by a gap
    /// rule is its wall time read in the zone.
    #[test]
    fn slots_increase_and_match_the_fields(
        (z, from, e) in case(),
        policy in policy(),
    ) {
        let tz = zone(z);
        let schedule = e.schedule(tz, policy);
        let mut previous = utc(from);
        let horizon = utc(from + 3 * DAY);
        // Sixty slots at least (years ahead for sparse expressions), or all of the next three days.
        for (n, slot) in schedule.slots_after(utc(from)).take(2_000).enumerate() {
            if n >= 60 && slot.scheduled_at > horizon {
                break;
            }
            prop_assert!(
                slot.scheduled_at > previous,
                "`{}` in {tz} under {policy}: {slot} does not follow {}", e.text, previous
            );
            previous = slot.scheduled_at;
            prop_assert_eq!(slot.zone, tz);
            prop_assert!(e.matches(slot.wall), "`{}`: wall {} does not match", e.text, slot.wall);
            prop_assert!(e.expr.matches_date(slot.wall.date()), "`{}`: matches_date({})", e.text, slot.wall.date());
            prop_assert_eq!(slot.business_date(), slot.wall.date());
            prop_assert_eq!(slot.scheduled_at.timestamp_subsec_nanos(), 0);
            if !matches!(tz.from_local_datetime(&slot.wall), LocalResult::None) {
                prop_assert_eq!(
                    slot.local().naive_local(), slot.wall,
                    "`{}` in {} under {}: {}", e.text, tz, policy, slot
                );
            }
        }
    }

    /// 5. Each policy's gap and overlap rule, checked slot by slot and wall time by wall time.
    #[test]
    fn policy_rules_hold((z, instant, e) in case()) {
        let tz = zone(z);
        let first = local_date(tz, instant).pred_opt().expect("date");
        let window = Window::new(tz, first, 4);
        for policy in DstPolicy::ALL {
            let slots = window.engine(&e.schedule(tz, policy));
            let by_instant: BTreeMap<i64, NaiveDateTime> =
                slots.iter().map(|s| (s.scheduled_at.timestamp(), s.wall)).collect();
            let twice = fires_twice(&e, policy);
            let ctx = format!("`{}` in {tz} under {policy}", e.text);

            // Slot by slot: the instant a wall time may have.
            for slot in &slots {
                let i = slot.scheduled_at.timestamp();
                match tz.from_local_datetime(&slot.wall) {
                    LocalResult::Single(x) => prop_assert_eq!(i, x.timestamp(), "{}: {}", ctx, slot),
                    LocalResult::Ambiguous(a, b) => {
                        let (a, b) = (a.timestamp(), b.timestamp());
                        if twice {
                            prop_assert!(i == a || i == b, "{}: {}", ctx, slot);
                        } else {
                            prop_assert_eq!(i, a.min(b), "{}: {} is not the first pass", ctx, slot);
                        }
                    }
                    LocalResult::None => {
                        let gap = window.gap_of(slot.wall);
                        match policy {
                            DstPolicy::Vixie => {
                                prop_assert!(e.fixed, "{}: non-fixed job fired in a gap: {}", ctx, slot);
                                prop_assert!(gap.after - gap.before < VIXIE_MAX_GAP, "{}: gap of 3 h or more fired: {}", ctx, slot);
                                prop_assert_eq!(i, gap.at, "{}: {} is not at the transition", ctx, slot);
                            }
                            DstPolicy::Shift => prop_assert_eq!(
                                i, wall_secs(slot.wall) - gap.before,
                                "{}: {} is not read with the pre-transition offset", ctx, slot
                            ),
                            DstPolicy::Skip | DstPolicy::Instant => {
                                prop_assert!(false, "{}: a time that does not exist fired: {}", ctx, slot);
                            }
                        }
                    }
                }
            }
            // Policies that fire a wall time once never repeat a wall time.
            if !twice {
                let mut walls: Vec<_> = slots.iter().map(|s| s.wall).collect();
                walls.sort();
                let n = walls.len();
                walls.dedup();
                prop_assert_eq!(walls.len(), n, "{}: a wall time fired twice", ctx);
            }
            // Wall time by wall time: what each matching time must produce.
            for wall in window.matching_walls(&e) {
                match tz.from_local_datetime(&wall) {
                    LocalResult::Single(x) => {
                        let x = x.timestamp();
                        if window.in_range(x) {
                            prop_assert!(by_instant.get(&x).is_some_and(|w| *w <= wall), "{}: {} missing", ctx, wall);
                        }
                    }
                    LocalResult::Ambiguous(a, b) => {
                        let (a, b) = (a.timestamp().min(b.timestamp()), a.timestamp().max(b.timestamp()));
                        if window.in_range(a) {
                            prop_assert_eq!(by_instant.get(&a), Some(&wall), "{}: first pass of {} missing", ctx, wall);
                        }
                        if window.in_range(b) {
                            if twice {
                                prop_assert_eq!(by_instant.get(&b), Some(&wall), "{}: second pass of {} missing", ctx, wall);
                            } else {
                                prop_assert_ne!(by_instant.get(&b), Some(&wall), "{}: second pass of {} fired", ctx, wall);
                            }
                        }
                    }
                    LocalResult::None => {
                        let gap = window.gap_of(wall);
                        let expected = match policy {
                            DstPolicy::Vixie if e.fixed && gap.after - gap.before < VIXIE_MAX_GAP => Some(gap.at),
                            DstPolicy::Shift => Some(wall_secs(wall) - gap.before),
                            _ => None,
                        };
                        match expected {
                            Some(x) if window.in_range(x) => prop_assert!(
                                by_instant.get(&x).is_some_and(|w| *w <= wall),
                                "{}: gap time {} did not fire at {}", ctx, wall, show(tz, x)
                            ),
                            Some(_) => {}
                            None => prop_assert!(
                                slots.iter().all(|s| s.wall != wall),
                                "{}: gap time {} fired", ctx, wall
                            ),
                        }
                    }
                }
            }
        }
    }

    /// The reference's own date matcher (with `L`, `L-n`, `W`, `LW`, `#`, `wL`) agrees with
    /// `CronExpr::matches_date`.
    #[test]
    fn reference_date_matcher_agrees(
        (dom, month, dow) in (dom_field(2), month_field(), dow_field(2)),
        day in 0u64..(UNTIL - FROM) as u64 / DAY as u64,
    ) {
        let text = format!("0 0 {dom} {month} {dow}");
        let Some(e) = RefExpr::parse(&text) else {
            // Never fires (`0 0 31W 2 *`): rejected at parse time, as it must be.
            return Ok(());
        };
        let first = NaiveDate::from_ymd_opt(1995, 1, 1).expect("date") + Days::new(day);
        for date in first.iter_days().take(62) {
            prop_assert_eq!(e.expr.matches_date(date), e.matches_date(date), "`{}` on {}", text, date);
        }
        prop_assert!(e.expr.is_fixed_time() && e.fixed);
    }
}

// ---------------------------------------------------------------------------------------------------
// Deterministic cases the properties only reach by chance.

fn locals(expr: &str, zone: &str, policy: DstPolicy, after: &str, n: usize) -> Vec<String> {
    Schedule::parse(expr, zone)
        .expect("valid schedule")
        .with_dst(policy)
        .slots_after(at(after))
        .take(n)
        .map(|s| {
            format!(
                "{} wall {}",
                s.local().format("%Y-%m-%d %H:%M%:z"),
                s.wall.format("%H:%M")
            )
        })
        .collect()
}

#[test]
fn lord_howe_half_hour_spring_forward() {
    // 2026-10-04 02:00 +10:30 → 02:30 +11:00: 02:00..02:29 do not exist.
    let (z, from) = ("Australia/Lord_Howe", "2026-10-03T12:00:00Z");
    assert_eq!(
        locals("15 2 * * *", z, DstPolicy::Vixie, from, 2),
        [
            "2026-10-04 02:30+11:00 wall 02:15",
            "2026-10-05 02:15+11:00 wall 02:15"
        ]
    );
    assert_eq!(
        locals("15 2 * * *", z, DstPolicy::Shift, from, 1),
        ["2026-10-04 02:45+11:00 wall 02:15"]
    );
    for policy in [DstPolicy::Skip, DstPolicy::Instant] {
        assert_eq!(
            locals("15 2 * * *", z, policy, from, 1),
            ["2026-10-05 02:15+11:00 wall 02:15"]
        );
    }
    // Not fixed-time: the half hour is simply missing under vixie.
    assert_eq!(
        locals("*/15 2 * * *", z, DstPolicy::Vixie, from, 2),
        [
            "2026-10-04 02:30+11:00 wall 02:30",
            "2026-10-04 02:45+11:00 wall 02:45"
        ]
    );
    // 02:00 and 02:15 both move to 02:30 under vixie, which also fires itself: once.
    assert_eq!(
        locals("0,15,30 2 * * *", z, DstPolicy::Vixie, from, 2),
        [
            "2026-10-04 02:30+11:00 wall 02:00",
            "2026-10-05 02:00+11:00 wall 02:00"
        ]
    );
}

#[test]
fn lord_howe_half_hour_fall_back() {
    // 2026-04-05 02:00 +11:00 → 01:30 +10:30: 01:30..01:59 happen twice.
    let (z, from) = ("Australia/Lord_Howe", "2026-04-04T13:00:00Z");
    assert_eq!(
        locals("45 1 * * *", z, DstPolicy::Instant, from, 2),
        [
            "2026-04-05 01:45+11:00 wall 01:45",
            "2026-04-05 01:45+10:30 wall 01:45"
        ]
    );
    for policy in [DstPolicy::Vixie, DstPolicy::Skip, DstPolicy::Shift] {
        assert_eq!(
            locals("45 1 * * *", z, policy, from, 2),
            [
                "2026-04-05 01:45+11:00 wall 01:45",
                "2026-04-06 01:45+10:30 wall 01:45"
            ]
        );
    }
    assert_eq!(
        locals("*/15 1 * * *", z, DstPolicy::Vixie, from, 6),
        [
            "2026-04-05 01:00+11:00 wall 01:00",
            "2026-04-05 01:15+11:00 wall 01:15",
            "2026-04-05 01:30+11:00 wall 01:30",
            "2026-04-05 01:45+11:00 wall 01:45",
            "2026-04-05 01:30+10:30 wall 01:30",
            "2026-04-05 01:45+10:30 wall 01:45"
        ]
    );
    // Starting inside the second pass of the half hour: the same slots as from before it.
    let s = Schedule::parse("*/15 1 * * *", z).expect("valid");
    let inside = at("2026-04-04T15:05:00Z"); // 01:35 +10:30
    assert_eq!(
        s.next_after(inside).map(|s| s.scheduled_at),
        Some(at("2026-04-04T15:15:00Z"))
    );
}

#[test]
fn troll_two_hour_shift() {
    // 2026-03-29 01:00 UTC: +00 → +02, so 01:00..02:59 do not exist; the gap is under 3 h, so
    // vixie still fires fixed-time jobs at the transition.
    let (z, from) = ("Antarctica/Troll", "2026-03-28T12:00:00Z");
    assert_eq!(
        locals("30 1 * * *", z, DstPolicy::Vixie, from, 2),
        [
            "2026-03-29 03:00+02:00 wall 01:30",
            "2026-03-30 01:30+02:00 wall 01:30"
        ]
    );
    assert_eq!(
        locals("0 1,2 * * *", z, DstPolicy::Vixie, from, 2),
        [
            "2026-03-29 03:00+02:00 wall 01:00",
            "2026-03-30 01:00+02:00 wall 01:00"
        ]
    );
    assert_eq!(
        locals("30 1 * * *", z, DstPolicy::Shift, from, 1),
        ["2026-03-29 03:30+02:00 wall 01:30"]
    );
    assert_eq!(
        locals("30 2 * * *", z, DstPolicy::Shift, from, 1),
        ["2026-03-29 04:30+02:00 wall 02:30"]
    );
    assert_eq!(
        locals("30 1 * * *", z, DstPolicy::Skip, from, 1),
        ["2026-03-30 01:30+02:00 wall 01:30"]
    );
    assert_eq!(
        locals("30 * * * *", z, DstPolicy::Vixie, "2026-03-29T00:00:00Z", 3),
        [
            "2026-03-29 00:30+00:00 wall 00:30",
            "2026-03-29 03:30+02:00 wall 03:30",
            "2026-03-29 04:30+02:00 wall 04:30"
        ]
    );
    // 2026-10-25 01:00 UTC: +02 → +00, so 01:00..02:59 happen twice.
    let from = "2026-10-24T12:00:00Z";
    assert_eq!(
        locals("30 2 * * *", z, DstPolicy::Instant, from, 2),
        [
            "2026-10-25 02:30+02:00 wall 02:30",
            "2026-10-25 02:30+00:00 wall 02:30"
        ]
    );
    assert_eq!(
        locals("30 2 * * *", z, DstPolicy::Vixie, from, 2),
        [
            "2026-10-25 02:30+02:00 wall 02:30",
            "2026-10-26 02:30+00:00 wall 02:30"
        ]
    );
}

#[test]
fn first_and_last_days_of_the_calendar() {
    let min = DateTime::<Utc>::MIN_UTC;
    let max = DateTime::<Utc>::MAX_UTC;
    let daily = Schedule::parse("0 0 * * *", "UTC").expect("valid");
    let first: Vec<DateTime<Utc>> = daily
        .slots_after(min)
        .take(2)
        .map(|s| s.scheduled_at)
        .collect();
    assert_eq!(
        first,
        [
            min + chrono::Duration::days(1),
            min + chrono::Duration::days(2)
        ]
    );
    // The last slot of the calendar, then nothing.
    let last = max
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .expect("midnight")
        .and_utc();
    let from = last - chrono::Duration::days(1);
    assert_eq!(daily.next_after(from).map(|s| s.scheduled_at), Some(last));
    assert_eq!(daily.next_after(last), None);
    assert_eq!(daily.next_after(max), None);
    // Zones too: New York kept local mean time (-04:56:02) before 1883.
    let ny = Schedule::parse("0 12 * * *", "America/New_York").expect("valid");
    let slot = ny.next_after(min).expect("a slot");
    assert_eq!(slot.wall, (min.naive_utc() + chrono::Duration::hours(12)));
    let slot = ny
        .next_after(max - chrono::Duration::days(30))
        .expect("a slot");
    assert!(slot.scheduled_at > max - chrono::Duration::days(30));
}

#[test]
fn kolkata_has_no_transitions() {
    // +05:30 all year: a daily job is exactly one day apart, the same under every policy.
    for policy in DstPolicy::ALL {
        let s = Schedule::parse("0 2 * * *", "Asia/Kolkata")
            .expect("valid")
            .with_dst(policy);
        let slots: Vec<Slot> = s
            .slots_after(at("2025-12-31T00:00:00Z"))
            .take(366)
            .collect();
        assert_eq!(slots[0].scheduled_at, at("2025-12-31T20:30:00Z"));
        for pair in slots.windows(2) {
            assert_eq!(
                pair[1].scheduled_at - pair[0].scheduled_at,
                chrono::Duration::days(1)
            );
            assert_eq!(pair[1].local().naive_local(), pair[1].wall);
        }
        assert_eq!(
            locals(
                "*/30 * * * *",
                "Asia/Kolkata",
                policy,
                "2026-03-08T00:10:00Z",
                2
            ),
            [
                "2026-03-08 06:00+05:30 wall 06:00",
                "2026-03-08 06:30+05:30 wall 06:30"
            ]
        );
    }
}

#[test]
fn apia_skipped_day_per_policy() {
    // 2011-12-29 23:59:59 -10:00 was followed by 2011-12-31 00:00:00 +14:00: a 24 h gap.
    let (z, from) = ("Pacific/Apia", "2011-12-29T00:00:00Z");
    for policy in [DstPolicy::Vixie, DstPolicy::Skip, DstPolicy::Instant] {
        assert_eq!(
            locals("0 12 * * *", z, policy, from, 2),
            [
                "2011-12-29 12:00-10:00 wall 12:00",
                "2011-12-31 12:00+14:00 wall 12:00"
            ]
        );
    }
    // Shift reads 2011-12-30 12:00 with -10:00: the same instant as 2011-12-31 12:00 +14:00. The two
    // land on one instant and fire once, named by the earlier wall time.
    let s = Schedule::parse("0 12 * * *", z)
        .expect("valid")
        .with_dst(DstPolicy::Shift);
    let slots: Vec<Slot> = s.slots_after(at(from)).take(3).collect();
    let dates: Vec<String> = slots
        .iter()
        .map(|s| s.business_date().to_string())
        .collect();
    assert_eq!(dates, ["2011-12-29", "2011-12-30", "2012-01-01"]);
    assert_eq!(slots[1].scheduled_at, at("2011-12-30T22:00:00Z"));
}

#[test]
fn santiago_repeated_hour_before_midnight() {
    // 2026-04-05 00:00 -03:00 → 2026-04-04 23:00 -04:00: 23:xx of April 4 happens twice.
    let (z, from) = ("America/Santiago", "2026-04-04T12:00:00Z");
    assert_eq!(
        locals("30 23 * * *", z, DstPolicy::Instant, from, 2),
        [
            "2026-04-04 23:30-03:00 wall 23:30",
            "2026-04-04 23:30-04:00 wall 23:30"
        ]
    );
    assert_eq!(
        locals("30 23 * * *", z, DstPolicy::Skip, from, 2),
        [
            "2026-04-04 23:30-03:00 wall 23:30",
            "2026-04-05 23:30-04:00 wall 23:30"
        ]
    );
    // Midnight of September 6 does not exist: shift reads it with -04:00.
    assert_eq!(
        locals("0 0 * * *", z, DstPolicy::Shift, "2026-09-05T12:00:00Z", 2),
        [
            "2026-09-06 01:00-03:00 wall 00:00",
            "2026-09-07 00:00-03:00 wall 00:00"
        ]
    );
}
