//! `busykill`, `busystop` and `spread`: three replicas, five jobs every second at level `slot`,
//! overlap `skip`, bodies of 960 ms, stale threshold 3 s. Faults aim at the replica that is running
//! the jobs right now, while newer slots of the same jobs keep falling due.

use crate::prelude::*;

/// The stale threshold of these scenarios.
pub(crate) const BUSY_STALE_MS: u64 = 3_000;
/// Their recovery poll.
pub(crate) const BUSY_POLL_MS: u64 = 500;
/// How many jobs, every second.
pub(crate) const BUSY_JOBS: usize = 5;

/// The replicas' arguments: [`BUSY_JOBS`] jobs every second at `slot`, overlap `skip`, bodies of
/// `work_ms`, stale [`BUSY_STALE_MS`], recovery poll [`BUSY_POLL_MS`].
pub(crate) fn busy_args(work_ms: u64) -> Vec<String> {
    strings(&[
        "--jobs",
        &BUSY_JOBS.to_string(),
        "--cron",
        "* * * * * *",
        "--guard",
        "slot",
        "--overlap",
        "skip",
        "--work-ms",
        &work_ms.to_string(),
        "--stale-ms",
        &BUSY_STALE_MS.to_string(),
        "--recovery-ms",
        &BUSY_POLL_MS.to_string(),
        "--grace-ms",
        "1000",
    ])
}

/// The replica running the most job bodies right now, by its index in `nodes`, with the jobs it
/// runs (see [`bodies_per_replica`]).
fn busy_replica(sc: &Sc, pool: &sqlx::PgPool, nodes: &[Node]) -> Option<(usize, Vec<String>)> {
    bodies_per_replica(sc, pool, nodes)?
        .into_iter()
        .max_by_key(|(_, jobs)| jobs.len())
}

/// The job bodies each replica runs right now, by its index in `nodes` (those running none left
/// out); `None` when the runs table could not be read. A body runs where the runs table has its
/// row `running` with a fresh heartbeat (database clock) and the ledger has a `start` under the
/// row's token and nothing after it; the `start` names the process, which must be one of `nodes`
/// (not a killed one whose rows are not yet stale).
pub(crate) fn bodies_per_replica(
    sc: &Sc,
    pool: &sqlx::PgPool,
    nodes: &[Node],
) -> Option<BTreeMap<usize, Vec<String>>> {
    let sql = format!(
        "SELECT job_name, fencing_token FROM \"{}\".job_runs \
         WHERE status = 'running' AND heartbeat_at + stale_after >= now()",
        sc.schema
    );
    let rows: Vec<(String, i64)> =
        sc.h.rt
            .block_on(sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_all(pool))
            .ok()?;
    let effects = read_ledger(&sc.ledger);
    let started: BTreeMap<i64, u32> = running_starts(&effects)
        .into_iter()
        .map(|e| (e.token, e.pid))
        .collect();
    let mut per_node: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (job, token) in rows {
        let node = started
            .get(&token)
            .and_then(|pid| nodes.iter().position(|n| n.pid() == *pid));
        if let Some(i) = node {
            per_node.entry(i).or_default().push(job);
        }
    }
    Some(per_node)
}

/// Waits for the next whole second plus 150 to 700 ms (seeded), when the bodies of that second's
/// slots run, and answers the replica running the most of them.
fn next_busy(sc: &mut Sc, pool: &sqlx::PgPool, nodes: &[Node]) -> Option<(usize, Vec<String>)> {
    let offset = chrono::Duration::from_std(sc.rng.ms(150, 700)).expect("small");
    sleep_until(next_second(Utc::now()) + offset);
    busy_replica(sc, pool, nodes)
}

/// A fault aimed at replica `nodes[i]` while it runs the bodies of `jobs`; it returns once the
/// effects of the fault have had time to show, and answers whether it was carried out.
pub(crate) type AtBusy<'f> =
    dyn FnMut(&mut Sc, &sqlx::PgPool, &mut Vec<Node>, usize, Vec<String>) -> bool + 'f;

/// What [`busy_rounds`] found.
pub(crate) struct Busy {
    pub(crate) report: Report,
    pub(crate) runs: Vec<RunRecord>,
    pub(crate) effects: Vec<Effect>,
    /// The `(job, slot)` pairs (d) was checked over.
    pub(crate) expected: BTreeSet<(String, String)>,
}

/// Three replicas on [`busy_args`] (960 ms bodies); `rounds` times, `fault` is aimed at the replica
/// running job bodies at that moment. Then the replicas are stopped and the run checked, (a)-(e) over
/// every slot of the jobs from 1 s after the start to 1 s before the last round ended. The round
/// count, how many found a busy replica (at least half must), and a clean exit are checked here.
pub(crate) fn busy_rounds(
    sc: &mut Sc,
    out: &mut Outcome,
    rounds: usize,
    fault: &mut AtBusy,
) -> Busy {
    busy_rounds_on(sc, out, rounds, &busy_args(960), fault)
}

/// [`busy_rounds`] with the replicas started on `args` (which must run [`BUSY_JOBS`] jobs every
/// second at `slot`, as [`busy_args`] does).
pub(crate) fn busy_rounds_on(
    sc: &mut Sc,
    out: &mut Outcome,
    rounds: usize,
    args: &[String],
    fault: &mut AtBusy,
) -> Busy {
    let nodes = sc.spawn_many(3, args);
    busy_rounds_among(sc, out, rounds, nodes, Vec::new(), fault)
}

/// [`busy_rounds`] over processes already started: `nodes` run the job bodies and `fault` aims at
/// them; `others` (schedulers that run no body) run beside them and are stopped with them.
pub(crate) fn busy_rounds_among(
    sc: &mut Sc,
    out: &mut Outcome,
    rounds: usize,
    mut nodes: Vec<Node>,
    others: Vec<Node>,
    fault: &mut AtBusy,
) -> Busy {
    let pool = sc.pool();
    let from = Utc::now() + chrono_ms(1_000);
    let mut hit = 0;
    for _ in 0..rounds {
        // A second whose slots were all skipped has no busy replica: try the next two.
        if let Some((i, jobs)) = (0..3).find_map(|_| next_busy(sc, &pool, &nodes)) {
            hit += usize::from(fault(sc, &pool, &mut nodes, i, jobs));
        }
    }
    let to = Utc::now() - chrono_ms(1_000);
    sleep(secs(2));
    nodes.extend(others);
    let unclean = stop_all(nodes);
    sc.h.rt.block_on(pool.close());
    let expected = expect(&job_names(BUSY_JOBS), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);
    out.fig("rounds", rounds);
    out.fig("rounds-that-hit-a-busy-replica", hit);
    out.fig("slots", expected.len());
    out.require(hit * 2 >= rounds, || {
        format!("only {hit} of {rounds} rounds found a busy replica")
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    Busy {
        report,
        runs,
        effects,
        expected,
    }
}

/// The `kill -9`s of a series of rounds.
#[derive(Default)]
pub(crate) struct Kills {
    /// Each killed process and when it was killed.
    pub(crate) kills: Vec<(u32, DateTime<Utc>)>,
    /// How many bodies each ran when killed.
    pub(crate) running: Vec<usize>,
}

impl Kills {
    /// `kill -9` of `nodes[i]`, which runs `running` bodies; starts it again as `name` on `args`,
    /// then waits stale + 1-2 s while newer slots fall due and the killed ones go stale and are
    /// taken over.
    pub(crate) fn kill_restart(
        &mut self,
        sc: &mut Sc,
        nodes: &mut [Node],
        i: usize,
        running: usize,
        name: &str,
        args: &[String],
    ) {
        let pid = nodes[i].pid();
        self.kills.push((pid, sc.kill(pid)));
        self.running.push(running);
        nodes[i] = sc.spawn(name, args);
        sleep(Duration::from_millis(BUSY_STALE_MS) + sc.rng.ms(1_000, 2_000));
    }
}

pub(crate) fn busykill(sc: &mut Sc) -> Outcome {
    let rounds = if sc.h.quick { 4 } else { 12 };
    let mut out = Outcome::new(
        "each round kill -9 hits the replica that runs job bodies right now, which is restarted (at least half the rounds find one); (a)-(e) over every slot of the run: one execution of a job at a time, at most one accepted completion per slot, every slot recorded",
    );
    let args = busy_args(960);
    let mut kills = Kills::default();
    let busy = busy_rounds(sc, &mut out, rounds, &mut |sc, _, nodes, i, jobs| {
        kills.kill_restart(sc, nodes, i, jobs.len(), &format!("n{i}"), &args);
        true
    });
    let interrupted = interrupted_by(&kills.kills, &busy.runs, &busy.effects);
    out.fig(
        "bodies-running-in-killed-replica",
        format!("{:?}", kills.running),
    );
    out.fig("interrupted-executions", interrupted.count);
    out.fig("taken-over", interrupted.latencies.len());
    out.invariants(&busy.report);
    out
}

/// A replica stopped while it ran the bodies of `jobs`.
pub(crate) struct Freeze {
    pub(crate) pid: u32,
    pub(crate) jobs: Vec<String>,
    pub(crate) stopped: DateTime<Utc>,
    pub(crate) resumed: DateTime<Utc>,
}

pub(crate) fn busystop(sc: &mut Sc) -> Outcome {
    let rounds = if sc.h.quick { 3 } else { 8 };
    let mut out = Outcome::new(
        "each round SIGSTOP hits the replica that runs job bodies right now and holds it 5-5.5 s (past stale 3 s), then SIGCONT (at least half the rounds find one); every job it was running starts an execution again within stale (3 s) + one recovery poll (0.5 s) + 1 s of the stop; (a)-(e): one execution of a job at a time (a woken body after a take-over is fenced), at most one accepted completion per slot, every slot recorded",
    );
    stop_rounds(sc, &mut out, rounds, busy_rounds);
    out
}

/// Runs `rounds` rounds of [`stop_busy`] through `run` ([`busy_rounds`] or one like it), then
/// reports how long the stops held and checks (a)-(e) and that every job a stopped process was
/// running started again within stale + one recovery poll + 1 s of the stop. Answers what the
/// rounds found.
pub(crate) fn stop_rounds(
    sc: &mut Sc,
    out: &mut Outcome,
    rounds: usize,
    run: impl FnOnce(&mut Sc, &mut Outcome, usize, &mut AtBusy) -> Busy,
) -> Busy {
    let limit = chrono_ms((BUSY_STALE_MS + BUSY_POLL_MS + 1_000) as i64);
    let mut freezes = Vec::new();
    let busy = run(sc, out, rounds, &mut |sc, _, nodes, i, jobs| {
        freezes.push(stop_busy(sc, nodes[i].pid(), jobs));
        true
    });
    let gaps = blocked_for(&freezes, &busy.effects);
    let worst = gaps.iter().map(|(_, g)| *g).max();
    let held: Vec<String> = freezes
        .iter()
        .map(|f| secs_f(f.resumed - f.stopped))
        .collect();
    out.fig("held", held.join("/"));
    out.fig("frozen-jobs", gaps.len());
    out.fig("longest-without-a-start", worst.map_or("-".into(), secs_f));
    out.invariants(&busy.report);
    for (what, gap) in gaps.iter().filter(|(_, g)| *g > limit) {
        out.failures.push(format!(
            "{what}: no execution started for {} after the stop (limit {})",
            secs_f(*gap),
            secs_f(limit)
        ));
    }
    busy
}

/// `SIGSTOP`s `pid`, which runs the bodies of `jobs`, for 5-5.5 s (past the stale threshold), lets
/// it go on, and waits the stale threshold while the woken bodies end (fenced) and the take-overs
/// finish.
pub(crate) fn stop_busy(sc: &mut Sc, pid: u32, jobs: Vec<String>) -> Freeze {
    signal(pid, "STOP");
    let stopped = Utc::now();
    sleep(secs(5) + sc.rng.ms(0, 500));
    signal(pid, "CONT");
    let resumed = Utc::now();
    sleep(Duration::from_millis(BUSY_STALE_MS));
    Freeze {
        pid,
        jobs,
        stopped,
        resumed,
    }
}

/// For each job a frozen replica was running: how long after the stop the job's next execution
/// started (any process, any slot); until the end of the ledger when none did.
pub(crate) fn blocked_for(
    freezes: &[Freeze],
    effects: &[Effect],
) -> Vec<(String, chrono::Duration)> {
    let last = effects
        .iter()
        .filter_map(|e| e.at)
        .max()
        .unwrap_or_else(Utc::now);
    let mut out = Vec::new();
    for f in freezes {
        for job in &f.jobs {
            let next = effects
                .iter()
                .filter(|e| e.kind == "start" && e.job == *job)
                .filter_map(|e| e.at)
                .filter(|at| *at > f.stopped)
                .min();
            let what = format!(
                "{job} (pid {} stopped at {})",
                f.pid,
                f.stopped.format("%H:%M:%S%.3f")
            );
            out.push((what, next.unwrap_or(last) - f.stopped));
        }
    }
    out
}

pub(crate) fn spread(sc: &mut Sc) -> Outcome {
    let run_for = if sc.h.quick { 20 } else { 60 };
    let mut out = Outcome::new(
        "no faults: every replica runs at least 15% of the executions of the window; (a)-(e)",
    );
    let Steady {
        expected,
        pids,
        unclean,
    } = steady(sc, 3, &busy_args(960), BUSY_JOBS, run_for);
    let (report, _, effects) = sc.check(&expected);
    let window: BTreeSet<String> = expected.iter().map(|(_, s)| s.clone()).collect();
    let ran: Vec<&Effect> = effects
        .iter()
        .filter(|e| e.kind == "start" && window.contains(&e.slot))
        .collect();
    let total = ran.len().max(1);
    let mut shares = Vec::new();
    for (i, pid) in pids.iter().enumerate() {
        let n = ran.iter().filter(|e| e.pid == *pid).count();
        shares.push(format!("n{i}:{n}({:.0}%)", n as f64 * 100.0 / total as f64));
        out.require(n * 100 >= total * 15, || {
            format!("n{i} ran {n} of {total} executions (under 15%)")
        });
    }
    // Claims go in one batch per tick: a replica that wins the batch runs every job of that second.
    let mut by_second: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for e in &ran {
        by_second.entry(e.slot.as_str()).or_default().insert(e.pid);
    }
    let whole = by_second.values().filter(|p| p.len() == 1).count();
    out.fig("seconds", run_for);
    out.fig("executions", ran.len());
    out.fig("per-replica", shares.join(","));
    out.fig(
        "seconds-run-by-one-replica",
        format!("{whole}/{}", by_second.len()),
    );
    out.invariants(&report);
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}
