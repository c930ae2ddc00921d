//! Next-slot computation: `slotguard-cron` against the `cron` (0.17) and `croner` (4.x) crates.
//!
//! One criterion group per expression and zone, one function per library. Every library answers the
//! same question — the first firing strictly after an instant, as a UTC instant — for the same fixed
//! sequence of 1,024 instants spread over 2026, so none of them benefits from repeating one instant.
//! Converting the UTC input into the zone is part of the measured work for every library
//! (`slotguard` takes UTC and converts inside).
//!
//! Before anything is timed, the setup checks that the three libraries agree on every instant of the
//! sequence; a disagreement aborts the run. Instants next to the 2026 DST transitions are probed too,
//! and where a peer's semantics differ from ours there the difference is printed, not asserted.
//!
//! Run: `cargo bench -p slotguard-benches --bench next_slot -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use criterion::{Criterion, criterion_group, criterion_main};
use slotguard_cron::Schedule;

/// How many instants the timed loop cycles through.
const INSTANTS: usize = 1024;

/// One benchmarked schedule, spelled for each library.
struct Case {
    /// Short id, used as the criterion group name so it is easy to filter on the command line.
    id: &'static str,
    /// The expression in our dialect (and croner's: both are standard 5-field Unix cron).
    expr: &'static str,
    /// The same schedule for the `cron` crate: a seconds field first, weekday names (its numbers
    /// start at 1 = Sunday).
    cron_expr: &'static str,
    zone: &'static str,
}

const CASES: [Case; 4] = [
    Case {
        id: "daily_0200_seoul",
        expr: "0 2 * * *",
        cron_expr: "0 0 2 * * *",
        zone: "Asia/Seoul",
    },
    Case {
        id: "every_15min_new_york",
        expr: "*/15 * * * *",
        cron_expr: "0 */15 * * * *",
        zone: "America/New_York",
    },
    Case {
        id: "weekdays_0900_berlin",
        expr: "0 9 * * MON-FRI",
        cron_expr: "0 0 9 * * MON-FRI",
        zone: "Europe/Berlin",
    },
    Case {
        id: "last_dom_utc",
        expr: "0 0 L * *",
        cron_expr: "0 0 0 L * *",
        zone: "UTC",
    },
];

/// The three libraries, set up for one case.
struct Peers {
    zone: Tz,
    ours: Schedule,
    /// `None` when the `cron` crate cannot parse the expression.
    cron: Option<cron::Schedule>,
    croner: croner::Cron,
}

impl Peers {
    fn new(case: &Case) -> Self {
        let zone: Tz = case.zone.parse().expect("zone");
        Peers {
            zone,
            ours: Schedule::parse(case.expr, case.zone).expect("slotguard parses"),
            cron: cron::Schedule::from_str(case.cron_expr).ok(),
            croner: croner::Cron::from_str(case.expr).expect("croner parses"),
        }
    }

    fn ours(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.ours.next_after(after).map(|slot| slot.scheduled_at)
    }

    fn cron(&self, schedule: &cron::Schedule, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        schedule
            .after(&after.with_timezone(&self.zone))
            .next()
            .map(|next| next.with_timezone(&Utc))
    }

    fn croner(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.croner
            .find_next_occurrence(&after.with_timezone(&self.zone), false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }

    /// The instants among `sample` on which a peer disagrees with slotguard, described.
    fn disagreements(&self, sample: &[DateTime<Utc>]) -> Vec<String> {
        let mut out = Vec::new();
        for &after in sample {
            let ours = self.ours(after);
            let croner = self.croner(after);
            if croner != ours {
                out.push(format!(
                    "after {after}: slotguard {ours:?}, croner {croner:?}"
                ));
            }
            if let Some(schedule) = &self.cron {
                let cron = self.cron(schedule, after);
                if cron != ours {
                    out.push(format!("after {after}: slotguard {ours:?}, cron {cron:?}"));
                }
            }
        }
        out
    }
}

/// 1,024 instants over 2026, in order, about 8.5 hours apart, each moved by a pseudo-random number of
/// seconds within its step so they fall on no particular minute or hour.
fn instants() -> Vec<DateTime<Utc>> {
    let start = Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .unwrap()
        .timestamp();
    let step = 365 * 86_400 / INSTANTS as i64;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..INSTANTS as i64)
        .map(|i| {
            // xorshift64: deterministic, so every run times the same sequence.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let jitter = (state % step as u64) as i64;
            DateTime::from_timestamp(start + i * step + jitter, 0).unwrap()
        })
        .collect()
}

/// Instants around the 2026 transitions of the benchmarked zones, where DST rules could differ.
fn dst_probes() -> Vec<DateTime<Utc>> {
    let transitions = [
        "2026-03-08T07:00:00Z", // New York springs forward
        "2026-11-01T06:00:00Z", // New York falls back
        "2026-03-29T01:00:00Z", // Berlin springs forward
        "2026-10-25T01:00:00Z", // Berlin falls back
    ];
    let mut probes = Vec::new();
    for t in transitions {
        let t = DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc);
        for minutes in (-180..=180).step_by(7) {
            probes.push(t + chrono::Duration::minutes(minutes));
        }
    }
    probes
}

fn next_slot(c: &mut Criterion) {
    let instants = instants();
    let probes = dst_probes();
    for case in &CASES {
        let peers = Peers::new(case);
        // Honesty check: the libraries must compute the same slots on the timed sequence.
        let wrong = peers.disagreements(&instants);
        assert!(
            wrong.is_empty(),
            "`{}` in {}: the libraries disagree on the timed instants:\n{}",
            case.expr,
            case.zone,
            wrong.join("\n")
        );
        for line in peers.disagreements(&probes) {
            eprintln!("note: `{}` in {} near DST: {line}", case.expr, case.zone);
        }
        if peers.cron.is_none() {
            eprintln!(
                "note: `{}` in {}: the cron crate does not parse `{}`: unsupported, not timed",
                case.expr, case.zone, case.cron_expr
            );
        }

        let mut group = c.benchmark_group(case.id);
        group.bench_function("slotguard", |b| {
            let mut i = 0;
            b.iter(|| {
                let after = instants[i];
                i = (i + 1) % INSTANTS;
                black_box(peers.ours(black_box(after)))
            });
        });
        if let Some(schedule) = &peers.cron {
            group.bench_function("cron", |b| {
                let mut i = 0;
                b.iter(|| {
                    let after = instants[i];
                    i = (i + 1) % INSTANTS;
                    black_box(peers.cron(schedule, black_box(after)))
                });
            });
        }
        group.bench_function("croner", |b| {
            let mut i = 0;
            b.iter(|| {
                let after = instants[i];
                i = (i + 1) % INSTANTS;
                black_box(peers.croner(black_box(after)))
            });
        });
        group.finish();
    }
}

criterion_group!(benches, next_slot);
criterion_main!(benches);
