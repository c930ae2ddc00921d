//! `proxy`: latency, a blackhole past the stale threshold and connection resets between one replica
//! (`px`) and the database, through a TCP fault proxy; the other two replicas go through proxies
//! that only pass.

use slotguard_process_tests::proxy::{Mode, Proxy};

use crate::prelude::*;

/// When each fault was on, and when they had all healed.
struct Windows {
    latency: Duration,
    latency_from: DateTime<Utc>,
    latency_to: DateTime<Utc>,
    blackhole: Duration,
    hole_from: DateTime<Utc>,
    hole_to: DateTime<Utc>,
    healed: DateTime<Utc>,
}

pub(crate) fn proxy(sc: &mut Sc) -> Outcome {
    let mut out = Outcome::new(
        "the proxied replica's runs in the blackhole are taken over (after stale) and its late writes refused, never accepted; it runs slots again within 30 s of the faults healing; (a)-(e)",
    );
    let upstream: std::net::SocketAddr = ([127, 0, 0, 1], sc.h.cluster.port()).into();
    // Every replica goes through a proxy of its own, so that all pay the same hop and the faulted
    // one wins its share of the claims; only `px`'s proxy injects faults.
    let proxies: Vec<Proxy> = (0..3)
        .map(|_| sc.h.rt.block_on(Proxy::start(upstream)).expect("proxy"))
        .collect();
    let args = with_common(&["--jobs", "4", "--work-ms", "800"]);
    let mut nodes: Vec<Node> = ["px", "n1", "n2"]
        .iter()
        .zip(&proxies)
        .map(|(name, p)| sc.launch(name, p.addr().port(), &args))
        .collect();
    for node in &mut nodes {
        node.wait_for("ready", secs(60));
    }
    let pid = nodes[0].pid();
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(2));
    let w = inject(sc, &mut out, &proxies[0], pid);
    // It wins a tick again (a third of them, on average) once its connections are back.
    let since = slot_name(w.healed);
    let resumed = wait_effect(&sc.ledger, secs(30), |e| {
        e.kind == "start" && e.pid == pid && e.slot > since
    })
    .ok()
    .map(|_| Utc::now() - w.healed);
    sleep(Duration::from_millis(STALE_MS) + secs(2));
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    let resets = proxies[0].resets();
    drop(proxies);
    let expected = expect(&job_names(4), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);
    let taken = measure(&mut out, &w, &runs, &effects, pid);
    out.fig("connections-reset", resets);
    out.fig(
        "runs-after-healing",
        attempts_of_px(&runs)
            .filter(|(_, a)| a.started_at >= w.healed)
            .count(),
    );
    out.fig(
        "first-run-after-healing",
        resumed.map_or_else(|| "never".to_owned(), secs_f),
    );
    out.invariants(&report);
    out.require(resumed.is_some(), || {
        "the proxied replica ran nothing within 30 s of healing".into()
    });
    out.require(taken > 0, || {
        "no attempt of the proxied replica was taken over during the blackhole".into()
    });
    out.require(resets > 0, || "no connection was reset".into());
    out.require_clean(unclean, "replicas");
    out
}

/// Waits until `px` (process `pid`) runs a slot newer than now: claims go in one batch per tick, so
/// it then holds a whole tick.
fn await_px_tick(sc: &Sc, out: &mut Outcome, pid: u32) {
    let since = slot_name(Utc::now());
    if let Err(e) = wait_effect(&sc.ledger, secs(30), |e| {
        e.kind == "start" && e.pid == pid && e.slot > since
    }) {
        out.failures.push(format!("px never won a tick: {e}"));
    }
}

/// The faults on `px`'s proxy, in turn: 4 s of latency, a blackhole past stale while it runs slots,
/// then three connection resets.
fn inject(sc: &mut Sc, out: &mut Outcome, proxy: &Proxy, pid: u32) -> Windows {
    let latency = sc.rng.ms(100, 250);
    await_px_tick(sc, out, pid);
    let latency_from = Utc::now();
    proxy.set(Mode::Latency(latency));
    sleep(secs(4));
    proxy.set(Mode::Pass);
    let latency_to = Utc::now();
    sleep(secs(2));
    let blackhole = Duration::from_millis(STALE_MS) + sc.rng.ms(1_000, 2_500);
    await_px_tick(sc, out, pid);
    let hole_from = Utc::now();
    proxy.set(Mode::Blackhole);
    sleep(blackhole);
    proxy.set(Mode::Pass);
    let hole_to = Utc::now();
    sleep(secs(3));
    for _ in 0..3 {
        proxy.reset();
        sleep(sc.rng.ms(500, 1_500));
    }
    Windows {
        latency,
        latency_from,
        latency_to,
        blackhole,
        hole_from,
        hole_to,
        healed: Utc::now(),
    }
}

/// `px`'s attempts, each with its run.
fn attempts_of_px(
    runs: &[RunRecord],
) -> impl Iterator<Item = (&RunRecord, &slotguard::store::AttemptRecord)> + Clone {
    runs.iter()
        .flat_map(|r| r.attempts.iter().map(move |a| (r, a)))
        .filter(|(_, a)| a.owner == "px")
}

/// The figures of what `px` ran under each fault; answers how many of its attempts were taken over.
fn measure(
    out: &mut Outcome,
    w: &Windows,
    runs: &[RunRecord],
    effects: &[Effect],
    pid: u32,
) -> usize {
    let mine = attempts_of_px(runs);
    let in_window = |a: DateTime<Utc>, b: DateTime<Utc>| {
        mine.clone()
            .filter(|(_, x)| x.started_at >= a && x.started_at < b)
            .count()
    };
    let taken = mine
        .clone()
        .filter(|(r, a)| {
            a.status == RunStatus::Abandoned
                && r.attempts.last().is_some_and(|l| l.token != a.token)
        })
        .count();
    let refused = effects
        .iter()
        .filter(|e| e.kind == "end" && e.pid == pid)
        .filter(|e| {
            !runs.iter().any(|r| {
                r.attempts
                    .iter()
                    .any(|a| a.token == e.token && a.status == RunStatus::Succeeded)
            })
        })
        .count();
    let completed_under_latency = mine
        .clone()
        .filter(|(_, a)| a.status == RunStatus::Succeeded)
        .filter(|(_, a)| {
            a.finished_at
                .is_some_and(|f| f >= w.latency_from && f < w.latency_to)
        })
        .count();
    let told = effects
        .iter()
        .filter(|e| e.kind == "lost" && e.pid == pid)
        .count();
    out.fig("latency", format!("{}ms", w.latency.as_millis()));
    out.fig(
        "runs-started-under-latency",
        in_window(w.latency_from, w.latency_to),
    );
    out.fig("completed-under-latency", completed_under_latency);
    out.fig("blackhole", format!("{:.2}s", w.blackhole.as_secs_f64()));
    out.fig(
        "runs-started-in-blackhole",
        in_window(w.hole_from, w.hole_to),
    );
    out.fig("attempts-taken-over", taken);
    out.fig("told-lost", told);
    out.fig("late-completions-refused", refused);
    taken
}
