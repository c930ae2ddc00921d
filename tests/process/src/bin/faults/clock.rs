//! `skew` and `clockjump`: replicas whose wall clocks are wrong (±90 s) or are stepped an hour ahead
//! or back mid-run; the slots run are those of the true clock, each once, none early.

use crate::prelude::*;

pub(crate) fn skew(sc: &mut Sc) -> Outcome {
    let run_for = if sc.h.quick { 12 } else { 40 };
    clock_fault(
        sc,
        run_for,
        &[
            ("n0", &[]),
            ("fast", &["--skew-ms", "90000"]),
            ("slow", &["--skew-ms", "-90000"]),
        ],
    )
}

pub(crate) fn clockjump(sc: &mut Sc) -> Outcome {
    let run_for: u64 = if sc.h.quick { 15 } else { 40 };
    // Each replica's clock steps once, at a seeded instant in the middle third of the run.
    let third = run_for * 1_000 / 3;
    let at = |sc: &mut Sc| (third + sc.rng.below(third as usize) as u64).to_string();
    let (up, down) = (at(sc), at(sc));
    clock_fault(
        sc,
        run_for,
        &[
            ("n0", &[]),
            ("ahead", &["--jump-ms", "3600000", "--jump-after-ms", &up]),
            (
                "behind",
                &["--jump-ms", "-3600000", "--jump-after-ms", &down],
            ),
        ],
    )
}

/// Three replicas whose clocks are set by `nodes` (`sg-node` arguments), four jobs every second: the
/// slots run are those of the true clock (the database's), each once, none early.
fn clock_fault(sc: &mut Sc, run_for: u64, nodes: &[(&str, &[&str])]) -> Outcome {
    let mut out = Outcome::new(
        "every slot of the true window executed exactly once, no run started more than 0.1 s before or 1 s after its slot (database clock), no row for a slot past the end, no lease taken over; (a)-(e)",
    );
    // job000 and job001 keep the default overlap policy (`skip`: the flag and lock layers guard
    // them); job002 and job003 use `allow`, for which those layers step aside and only the slot
    // row decides.
    let base = with_common(&[
        "--jobs",
        "4",
        "--work-ms",
        "100",
        "--overlap",
        "skip,skip,allow,allow",
    ]);
    let nodes: Vec<Node> = nodes
        .iter()
        .map(|(name, extra)| {
            let mut args = base.clone();
            args.extend(strings(extra));
            sc.spawn(name, &args)
        })
        .collect();
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(run_for));
    let to = Utc::now() - chrono_ms(1_000);
    let end = Utc::now();
    let unclean = stop_all(nodes);
    let names = job_names(4);
    let expected = expect(&names, &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);
    let exec = executions(&effects);
    let not_once = expected
        .iter()
        .filter(|k| exec.get(*k).copied().unwrap_or(0) != 1)
        .count();
    let taken_over = runs.iter().filter(|r| r.attempt > 1).count();
    let off_time = off_time(&mut out, &runs);
    let ahead = runs
        .iter()
        .filter(|r| r.key.scheduled_at > end + chrono_ms(1_000))
        .count();
    out.fig("slots", expected.len());
    out.fig("executed-once", expected.len() - not_once);
    out.fig("runs-off-time", off_time);
    out.fig("rows-past-the-end", ahead);
    out.fig("attempts-beyond-first", taken_over);
    out.invariants(&report);
    out.require(taken_over == 0, || {
        format!("{taken_over} runs taken over without a fault")
    });
    out.require(not_once == 0, || {
        format!("{not_once} expected slots not executed exactly once")
    });
    out.require(off_time == 0, || {
        format!("{off_time} runs started off their slot's time")
    });
    out.require(ahead == 0, || format!("{ahead} rows for slots not yet due"));
    out.require_clean(unclean, "replicas");
    out
}

/// Per owner, its first attempts and the furthest one from its slot (a figure each); answers how
/// many first attempts started more than 0.1 s before or 1 s after their slot.
fn off_time(out: &mut Outcome, runs: &[RunRecord]) -> usize {
    let mut by_owner: BTreeMap<String, (usize, chrono::Duration)> = BTreeMap::new();
    let mut off_time = 0;
    for run in runs {
        if let Some(a) = run.attempts.first() {
            let entry = by_owner
                .entry(a.owner.clone())
                .or_insert((0, chrono::Duration::zero()));
            entry.0 += 1;
            // Positive: started after its slot; negative: before it.
            let late = a.started_at - run.key.scheduled_at;
            if late.abs() > entry.1.abs() {
                entry.1 = late;
            }
            if late < -chrono_ms(100) || late > chrono_ms(1_000) {
                off_time += 1;
            }
        }
    }
    for (owner, (n, late)) in &by_owner {
        out.fig(
            owner,
            format!("runs:{n} furthest-from-slot:{}", secs_f(*late)),
        );
    }
    off_time
}
