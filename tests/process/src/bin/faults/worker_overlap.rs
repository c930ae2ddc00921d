//! `workeroverlap`: the same job in two shapes side by side, no faults. `wshape` runs with the
//! trigger apart (1 scheduler, 2 workers with room 4), `ishape` in-process (2 replicas that schedule
//! and run); both every second, overlap `skip` (the default), bodies of 960 ms: shorter than the
//! interval, so each run ends before the next slot is due.
//!
//! The invariant (issue 21, finding 10): the worker shape decides overlap as a tick's claim does, so
//! it skips a slot only when the in-process shape would: only when, at the slot's instant, another
//! run of the job was still open (an attempt started before it and not finished by it, by the
//! database's clock). A skip without one was decided early. Each shape's skips without one are
//! counted; the worker shape may have at most as many as the in-process shape (which has none: its
//! claim is taken at the instant), plus 1 and a twentieth of the window for clock quirks. Today the
//! scheduler decides 100 ms before the instant, while the previous body still runs, and skips about
//! every other slot.

use crate::prelude::*;

/// The two jobs: the worker shape's and the in-process shape's.
const WORKER_JOB: &str = "wshape";
const INPROCESS_JOB: &str = "ishape";

/// `sg-node` arguments for one job of the pair.
fn args(job: &str) -> Vec<String> {
    with_common(&[
        "--names",
        job,
        "--cron",
        "* * * * * *",
        "--overlap",
        "skip",
        "--work-ms",
        "960",
    ])
}

/// `args` with `extra` after them.
fn with(mut args: Vec<String>, extra: &[&str]) -> Vec<String> {
    args.extend(strings(extra));
    args
}

pub(crate) fn workeroverlap(sc: &mut Sc) -> Outcome {
    let run_for = if sc.h.quick { 20 } else { 60 };
    let mut out = Outcome::new(
        "no faults; one job every second, overlap skip, 960 ms bodies, in the worker shape (1 scheduler + 2 workers) and the in-process shape (2 replicas) side by side: a slot is skipped only when another run of the job was open at its instant (database clock), as the in-process shape decides: the worker shape has at most as many skips without one as the in-process shape, + 1 + a twentieth of the window; (a)-(e)",
    );
    let worker = args(WORKER_JOB);
    let mut nodes = sc.spawn_named(
        &["s0".to_owned()],
        &with(worker.clone(), &["--role", "scheduler"]),
    );
    nodes.extend(sc.spawn_named(
        &["w0".to_owned(), "w1".to_owned()],
        &with(worker, &["--role", "worker", "--max-runs", "4"]),
    ));
    nodes.extend(sc.spawn_many(2, &args(INPROCESS_JOB)));
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(run_for));
    let to = Utc::now() - chrono_ms(1_000);
    // The last slots' bodies end.
    sleep(secs(2));
    let unclean = stop_all(nodes);
    let jobs = [WORKER_JOB.to_owned(), INPROCESS_JOB.to_owned()];
    let window = every(from, to, 1);
    let expected = expect(&jobs, &window);
    let (report, runs, _) = sc.check(&expected);
    let [worker, inprocess] = jobs.map(|job| skipped(&runs, &job, &expected));
    let early = |skips: &[&RunRecord]| -> Vec<String> {
        skips
            .iter()
            .filter(|r| !open_at(&runs, &r.key.job, r.key.scheduled_at))
            .map(|r| {
                format!(
                    "{} {}: skipped ({}), recorded at its instant {:+.3}s, with no run of the job open at it",
                    r.key.job,
                    slot_name(r.key.scheduled_at),
                    r.error_message.as_deref().unwrap_or(""),
                    (r.updated_at - r.key.scheduled_at).num_milliseconds() as f64 / 1000.0
                )
            })
            .collect()
    };
    let (worker_early, inprocess_early) = (early(&worker), early(&inprocess));
    let allowed = inprocess_early.len() + 1 + window.len() / 20;
    out.fig("slots-per-job", window.len());
    out.fig("worker-shape-skipped", worker.len());
    out.fig("in-process-skipped", inprocess.len());
    out.fig("worker-shape-skipped-with-no-run-open", worker_early.len());
    out.fig("in-process-skipped-with-no-run-open", inprocess_early.len());
    out.invariants(&report);
    if worker_early.len() > allowed {
        out.failures.push(format!(
            "the worker shape skipped {} of {} slots with no run of the job open at their instant (the in-process shape {} of {}; allowed {allowed}); it skipped {} in all, the in-process shape {}",
            worker_early.len(),
            window.len(),
            inprocess_early.len(),
            window.len(),
            worker.len(),
            inprocess.len()
        ));
        out.failures.extend(worker_early.into_iter().take(10));
    }
    out.require_clean(unclean, "processes");
    out
}

/// `job`'s rows in `expected` recorded `skipped`.
fn skipped<'r>(
    runs: &'r [RunRecord],
    job: &str,
    expected: &BTreeSet<(String, String)>,
) -> Vec<&'r RunRecord> {
    runs.iter()
        .filter(|r| r.key.job == job && r.status == RunStatus::Skipped)
        .filter(|r| expected.contains(&(job.to_owned(), slot_name(r.key.scheduled_at))))
        .collect()
}

/// Whether an attempt of `job` was open at `at`: started before it and not finished by it (database
/// clock), the only reason overlap `skip` has to skip the slot at `at`.
fn open_at(runs: &[RunRecord], job: &str, at: DateTime<Utc>) -> bool {
    runs.iter()
        .filter(|r| r.key.job == job)
        .flat_map(|r| &r.attempts)
        .any(|a| a.started_at < at && a.finished_at.is_none_or(|f| f >= at))
}
