//! `pool`: a one-connection pool per replica under many long runs, and every other connection slot
//! of the server taken for a while: heartbeats must not starve.

use crate::prelude::*;

/// How long every free connection slot of the server is held.
fn hog_for() -> Duration {
    Duration::from_millis(STALE_MS) + secs(2)
}

pub(crate) fn pool(sc: &mut Sc) -> Outcome {
    let run_for = if sc.h.quick { 12 } else { 30 };
    let jobs = 30;
    let mut out = Outcome::new(
        "with a pool of 1 connection per replica, ~75 runs of 2.5 s in flight in the cluster, and for stale + 2 s every other connection slot of the server taken: no attempt is taken over and no job told `lost`; every slot succeeded on attempt 1; (a)-(e)",
    );
    let nodes = sc.spawn_many(
        2,
        &with_common(&[
            "--jobs",
            &jobs.to_string(),
            "--work-ms",
            "2500",
            "--overlap",
            "allow",
            "--pool-size",
            "1",
        ]),
    );
    let from = Utc::now() + chrono_ms(1_000);
    let started = Instant::now();
    sleep(secs(run_for / 3));
    let hogged = hog_connections(sc);
    sleep(secs(run_for).saturating_sub(started.elapsed()));
    let to = Utc::now() - chrono_ms(1_000);
    sleep(secs(3));
    let unclean = stop_all(nodes);
    let expected = expect(&job_names(jobs), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);
    let (_, now) = sc.runs();
    let rows = index(&runs);
    let not_first = expected
        .iter()
        .filter(|k| {
            rows.get(*k)
                .is_none_or(|r| r.status != RunStatus::Succeeded || r.attempt != 1)
        })
        .count();
    let taken = runs.iter().filter(|r| r.attempts.len() > 1).count();
    let lost = effects.iter().filter(|e| e.kind == "lost").count();
    out.fig("slots", expected.len());
    out.fig("server-connections-hogged", hogged);
    out.fig("hogged-for", format!("{:.1}s", hog_for().as_secs_f64()));
    let slowest = runs
        .iter()
        .flat_map(|r| &r.attempts)
        .filter(|a| a.status == RunStatus::Succeeded)
        .filter_map(|a| a.finished_at.map(|f| f - a.started_at))
        .max()
        .unwrap_or_default();
    out.fig(
        "peak-open-attempts-per-replica",
        peak_per_replica(&runs, now),
    );
    out.fig("longest-claim-to-completion(work 2.5s)", secs_f(slowest));
    out.fig("taken-over", taken);
    out.fig("told-lost", lost);
    out.fig("not-succeeded-first-attempt", not_first);
    out.invariants(&report);
    out.require(taken == 0 && lost == 0, || {
        format!("{taken} runs taken over, {lost} told lost: heartbeats starved")
    });
    out.require(not_first == 0, || {
        format!("{not_first} slots not succeeded on attempt 1")
    });
    out.require_clean(unclean, "replicas");
    out
}

/// Takes every connection slot of the server for longer than the stale threshold ([`hog_for`]):
/// the replicas have only the connection their pool already holds. Answers how many it took.
fn hog_connections(sc: &Sc) -> usize {
    let url = format!("{}?application_name=sg-faults-hog", sc.h.cluster.url());
    let hogs = sc.h.rt.block_on(async {
        use sqlx::Connection;
        let mut held = Vec::new();
        while held.len() < 400 {
            match sqlx::PgConnection::connect(&url).await {
                Ok(c) => held.push(c),
                Err(_) => break,
            }
        }
        held
    });
    let hogged = hogs.len();
    sleep(hog_for());
    sc.h.rt.block_on(async {
        use sqlx::Connection;
        for c in hogs {
            let _ = c.close().await;
        }
    });
    hogged
}

/// The most attempts one replica had open at once.
fn peak_per_replica(runs: &[RunRecord], now: DateTime<Utc>) -> usize {
    ["n0", "n1"]
        .iter()
        .map(|owner| {
            let theirs: Vec<RunRecord> = runs
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.attempts.retain(|a| a.owner == *owner);
                    r
                })
                .collect();
            max_concurrency(theirs.iter(), now)
        })
        .max()
        .unwrap_or(0)
}
