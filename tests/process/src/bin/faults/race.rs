//! `race`: many replicas race on 1,000+ slots without faults; each slot runs once.

use crate::prelude::*;

pub(crate) fn race(sc: &mut Sc) -> Outcome {
    let n = sc.h.replicas;
    let (jobs, run_for) = if sc.h.quick { (90, 15) } else { (120, 30) };
    let mut out = Outcome::new(
        "at least 1,000 slots; every slot of the steady window executed exactly once and succeeded on attempt 1; (a)-(e)",
    );
    let args = with_common(&["--jobs", &jobs.to_string(), "--work-ms", "20"]);
    let Steady {
        expected, unclean, ..
    } = steady(sc, n, &args, jobs, run_for);
    let (report, runs, effects) = sc.check(&expected);
    let exec = executions(&effects);
    let rows = index(&runs);
    let (mut duplicates, mut missed, mut not_first) = (0, 0, 0);
    for key in &expected {
        match exec.get(key).copied().unwrap_or(0) {
            0 => missed += 1,
            1 => {}
            _ => duplicates += 1,
        }
        if rows
            .get(key)
            .is_none_or(|r| r.status != RunStatus::Succeeded || r.attempt != 1)
        {
            not_first += 1;
        }
    }
    out.fig("replicas", n);
    out.fig("slots", expected.len());
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    for run in runs.iter().filter(|r| r.status == RunStatus::Skipped) {
        *skipped
            .entry(run.error_message.clone().unwrap_or_default())
            .or_default() += 1;
    }
    out.fig("skipped-by-reason", format!("{skipped:?}"));
    out.fig("duplicates", duplicates);
    out.fig("missed", missed);
    out.fig("not-succeeded-first-attempt", not_first);
    out.invariants(&report);
    out.require(expected.len() >= 1_000, || {
        format!("only {} slots", expected.len())
    });
    out.require(duplicates == 0, || format!("{duplicates} slots ran twice"));
    out.require(missed == 0, || format!("{missed} slots never ran"));
    out.require(not_first == 0, || {
        format!("{not_first} slots not succeeded on attempt 1")
    });
    out.require_clean(unclean, "replicas");
    out
}
