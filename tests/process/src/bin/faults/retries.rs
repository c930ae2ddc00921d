//! `retries`: 8 concurrent `Admin::retry` calls on one failed slot; exactly one is accepted.

use slotguard_admin::{Admin, AdminError, ChangeRequest};

use crate::prelude::*;

/// Concurrent callers per slot.
const CALLERS: usize = 8;

/// What the concurrent retries answered.
#[derive(Default)]
struct Answers {
    accepted: usize,
    refused: usize,
    errors: Vec<String>,
    per_slot_accepted: Vec<usize>,
}

pub(crate) fn retries(sc: &mut Sc) -> Outcome {
    let slots = if sc.h.quick { 3 } else { 10 };
    let mut out = Outcome::new(
        "of 8 concurrent retries of one failed slot exactly 1 is accepted and the rest refused; exactly one new attempt runs, once, and succeeds; (a)-(e)",
    );
    let flag = sc.dir.path().join("fail");
    std::fs::write(&flag, b"fail").expect("flag file");
    let nodes = sc.spawn_many(
        3,
        &with_common(&[
            "--jobs",
            "1",
            "--work-ms",
            "50",
            "--max-attempts",
            "1",
            "--fail-while",
            &flag.to_string_lossy(),
        ]),
    );
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(slots as u64 + 3));
    std::fs::remove_file(&flag).expect("remove the flag file");
    let chosen = failed_slots(sc, from, slots);
    out.require(chosen.len() == slots, || {
        format!("only {} failed slots to retry", chosen.len())
    });
    let answers = retry_all(sc, &chosen);
    let retried: BTreeSet<String> = chosen.iter().map(|t| slot_name(*t)).collect();
    let took = await_succeeded(sc, &mut out, &retried);
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    let expected = expect(&job_names(1), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);
    let exec = executions(&effects);
    let rows = index(&runs);
    for slot in &retried {
        let key = ("job000".to_owned(), slot.clone());
        let row = rows.get(&key);
        let attempts = row.map_or(0, |r| r.attempts.len());
        let ran = exec.get(&key).copied().unwrap_or(0);
        out.require(attempts == 2 && ran == 2, || {
            format!(
                "{slot}: {attempts} attempts and {ran} executions after the retries (want 2 and 2)"
            )
        });
    }
    out.fig("slots-retried", chosen.len());
    out.fig("concurrent-calls", CALLERS);
    out.fig("accepted", answers.accepted);
    out.fig("refused", answers.refused);
    out.fig("retry-to-success", format!("{:.2}s", took.as_secs_f64()));
    out.invariants(&report);
    let per_slot = &answers.per_slot_accepted;
    out.require(per_slot.iter().all(|n| *n == 1), || {
        format!("accepted per slot: {per_slot:?}")
    });
    let errors = &answers.errors;
    out.require(errors.is_empty(), || format!("errors: {errors:?}"));
    out.require_clean(unclean, "replicas");
    out
}

/// Up to `slots` of the failed slots from `from` on, chosen at random.
fn failed_slots(sc: &mut Sc, from: DateTime<Utc>, slots: usize) -> Vec<DateTime<Utc>> {
    let (runs, _) = sc.runs();
    let mut failed: Vec<DateTime<Utc>> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Failed && r.key.scheduled_at >= from)
        .map(|r| r.key.scheduled_at)
        .collect();
    let mut chosen = Vec::new();
    while chosen.len() < slots && !failed.is_empty() {
        let i = sc.rng.below(failed.len());
        chosen.push(failed.remove(i));
    }
    chosen
}

/// For each slot in turn, [`CALLERS`] `Admin::retry` calls at once (each on a connection of its
/// own, released together by a barrier).
fn retry_all(sc: &Sc, chosen: &[DateTime<Utc>]) -> Answers {
    let backends: Vec<_> = (0..CALLERS).map(|_| sc.backend(1)).collect();
    let mut answers = Answers::default();
    for slot in chosen {
        let got = sc.h.rt.block_on(async {
            let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(CALLERS));
            let tasks: Vec<_> = backends
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let admin = Admin::new(b.clone());
                    let barrier = std::sync::Arc::clone(&barrier);
                    let slot = *slot;
                    tokio::spawn(async move {
                        barrier.wait().await;
                        let request = ChangeRequest::new(format!("sg-faults-{i}"), "retry race");
                        admin.retry("job000", slot, "", &request).await
                    })
                })
                .collect();
            let mut got = Vec::new();
            for t in tasks {
                got.push(t.await.expect("retry task"));
            }
            got
        });
        let ok = got.iter().filter(|a| a.is_ok()).count();
        answers.per_slot_accepted.push(ok);
        answers.accepted += ok;
        for a in &got {
            match a {
                Ok(_) => {}
                Err(AdminError::Refused { .. }) => answers.refused += 1,
                Err(e) => answers.errors.push(e.to_string()),
            }
        }
    }
    for b in &backends {
        sc.h.rt.block_on(b.close());
    }
    answers
}

/// Each accepted retry is claimed within one recovery poll: waits up to 15 s for every retried slot
/// to succeed, and answers how long that took.
fn await_succeeded(sc: &Sc, out: &mut Outcome, retried: &BTreeSet<String>) -> Duration {
    let deadline = Instant::now() + secs(15);
    let started = Instant::now();
    loop {
        let (runs, _) = sc.runs();
        let done = runs
            .iter()
            .filter(|r| retried.contains(&slot_name(r.key.scheduled_at)))
            .filter(|r| r.status == RunStatus::Succeeded)
            .count();
        if done == retried.len() {
            return started.elapsed();
        }
        if Instant::now() > deadline {
            out.failures.push(format!(
                "only {done} of {} retried slots succeeded",
                retried.len()
            ));
            return Duration::ZERO;
        }
        sleep(Duration::from_millis(100));
    }
}
