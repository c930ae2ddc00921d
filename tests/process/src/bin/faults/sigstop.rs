//! `sigstop`: SIGSTOP of a slot's owner past its stale threshold, SIGCONT after another replica took
//! the slot over; the woken owner's attempt is never accepted.

use crate::prelude::*;

/// What the stop cycles measured.
#[derive(Default)]
struct Cycles {
    /// The slots stopped so far (a cycle picks a fresh one).
    used: BTreeSet<String>,
    /// Each stopped owner's `start`, and the take-over's.
    stopped: Vec<(Effect, Effect)>,
    takeover_max: Duration,
    stopped_max: Duration,
    /// Woken owners told `lost`.
    told: usize,
    /// Woken owners whose completion the store refused.
    refused: usize,
}

pub(crate) fn sigstop(sc: &mut Sc) -> Outcome {
    let cycles = if sc.h.quick { 1 } else { 4 };
    let mut out = Outcome::new(
        "another replica takes over within stale (2 s) + 5 s; the woken owner's attempt is never accepted (told `lost` or its completion refused); one accepted completion per slot; (a)-(e)",
    );
    let args = with_common(&[
        "--jobs",
        "1",
        "--cron",
        "*/10 * * * * *",
        "--work-ms",
        "4000",
    ]);
    let nodes = sc.spawn_many(3, &args);
    // Every replica is up: each slot from here on is theirs.
    let from = Utc::now();
    let mut seen = Cycles::default();
    for _ in 0..cycles {
        if !stop_cycle(sc, &mut out, &mut seen) {
            break;
        }
    }
    if let Some((_, taken)) = seen.stopped.last() {
        let token = taken.token;
        if let Err(e) = wait_effect(&sc.ledger, secs(15), |e| {
            (e.kind == "end" || e.kind == "lost") && e.token == token
        }) {
            out.failures.push(format!("the take-over never ended: {e}"));
        }
    }
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    let expected = expect(&job_names(1), &every(from, to, 10));
    let (report, runs, _) = sc.check(&expected);
    require_fenced(&mut out, &runs, &seen.stopped);
    let limit = Duration::from_millis(STALE_MS + 5_000);
    out.fig("cycles", seen.stopped.len());
    out.fig(
        "takeover-max",
        format!("{:.2}s", seen.takeover_max.as_secs_f64()),
    );
    out.fig(
        "stopped-max",
        format!("{:.2}s", seen.stopped_max.as_secs_f64()),
    );
    out.fig("woken-told-lost", seen.told);
    out.fig("woken-completion-refused", seen.refused);
    out.invariants(&report);
    out.require(seen.takeover_max <= limit, || {
        format!("a take-over took {:?}", seen.takeover_max)
    });
    out.require_clean(unclean, "replicas");
    out
}

/// One cycle: SIGSTOP the owner of a fresh slot, wait for the take-over, SIGCONT, and see what the
/// woken owner did. Answers `false` when there was no run to stop (the cycles end there).
fn stop_cycle(sc: &mut Sc, out: &mut Outcome, seen: &mut Cycles) -> bool {
    let used = &seen.used;
    let first = match wait_effect(&sc.ledger, secs(25), |e| {
        e.kind == "start" && e.attempt == 1 && !used.contains(&e.slot)
    }) {
        Ok(e) => e,
        Err(e) => {
            out.failures.push(format!("no run to stop: {e}"));
            return false;
        }
    };
    seen.used.insert(first.slot.clone());
    sleep(sc.rng.ms(0, 500));
    let stopped_at = Instant::now();
    signal(first.pid, "STOP");
    let taken = wait_effect(&sc.ledger, secs(15), |e| {
        e.kind == "start" && e.job == first.job && e.slot == first.slot && e.token != first.token
    });
    let takeover = stopped_at.elapsed();
    sleep(sc.rng.ms(0, 3_000));
    seen.stopped_max = seen.stopped_max.max(stopped_at.elapsed());
    signal(first.pid, "CONT");
    let Ok(taken) = taken else {
        out.failures.push(format!(
            "slot {} never taken over from a stopped owner",
            first.slot
        ));
        return true;
    };
    seen.takeover_max = seen.takeover_max.max(takeover);
    match wait_effect(&sc.ledger, secs(15), |e| {
        (e.kind == "lost" || e.kind == "end") && e.token == first.token
    }) {
        Ok(e) if e.kind == "lost" => seen.told += 1,
        Ok(_) => seen.refused += 1,
        Err(e) => out.failures.push(format!(
            "the woken owner of {} did nothing: {e}",
            first.slot
        )),
    }
    seen.stopped.push((first, taken));
    true
}

/// Requires each stopped owner's attempt to have been refused and its slot to have succeeded under
/// the take-over.
fn require_fenced(out: &mut Outcome, runs: &[RunRecord], stopped: &[(Effect, Effect)]) {
    let rows = index(runs);
    for (first, _) in stopped {
        let Some(row) = rows.get(&(first.job.clone(), first.slot.clone())) else {
            continue;
        };
        let late = row.attempts.iter().find(|a| a.token == first.token);
        out.require(
            late.is_some_and(|a| a.status != RunStatus::Succeeded),
            || {
                format!(
                    "the stopped owner's attempt of {} was accepted: {late:?}",
                    first.slot
                )
            },
        );
        out.require(row.status == RunStatus::Succeeded, || {
            format!("{} ended {} after the take-over", first.slot, row.status)
        });
    }
}
