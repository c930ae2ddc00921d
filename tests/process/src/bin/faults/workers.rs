//! `workerkill`, `workerstop`, `schedkill`, `workerscale` and `workerrestart`: the trigger apart
//! from the execution. Scheduler processes (`sg-node --role scheduler`) enqueue each slot as a
//! `pending` row; worker processes (`--role worker --max-runs 4`) claim and run them. The jobs are
//! the busy set-up's ([`busy_args`]: 5 jobs every second at `slot`, overlap `skip`, stale 3 s).

use crate::busy::{
    AtBusy, BUSY_JOBS, BUSY_STALE_MS, Busy, Kills, busy_args, busy_rounds_among, stop_rounds,
};
use crate::prelude::*;

/// The bodies one worker runs at once.
const WORKER_RUNS: usize = 4;

/// `args` for a scheduler process.
fn scheduler(args: &[String]) -> Vec<String> {
    let mut v = args.to_vec();
    v.extend(strings(&["--role", "scheduler"]));
    v
}

/// `args` for a worker process, with room for [`WORKER_RUNS`] bodies.
fn worker(args: &[String]) -> Vec<String> {
    let mut v = args.to_vec();
    v.extend(strings(&["--role", "worker", "--max-runs"]));
    v.push(WORKER_RUNS.to_string());
    v
}

fn named(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

/// Starts `schedulers` scheduler processes `s0`, `s1`, ... and `workers` worker processes `w0`,
/// `w1`, ... on `args`, and answers them in that order once all are ready.
fn split(sc: &Sc, schedulers: usize, workers: usize, args: &[String]) -> (Vec<Node>, Vec<Node>) {
    let s = sc.spawn_named(&named("s", 0..schedulers), &scheduler(args));
    let w = sc.spawn_named(&named("w", 0..workers), &worker(args));
    (s, w)
}

/// The expected slots whose row did not end `succeeded` or `skipped` (still queued, abandoned,
/// failed, dead or running), with their status; `None` for a slot without a row.
fn unfinished(
    runs: &[RunRecord],
    expected: &BTreeSet<(String, String)>,
) -> Vec<(String, String, Option<RunStatus>)> {
    let rows = index(runs);
    expected
        .iter()
        .filter_map(|(job, slot)| match rows.get(&(job.clone(), slot.clone())) {
            Some(r) if matches!(r.status, RunStatus::Succeeded | RunStatus::Skipped) => None,
            Some(r) => Some((job.clone(), slot.clone(), Some(r.status))),
            None => Some((job.clone(), slot.clone(), None)),
        })
        .collect()
}

/// Requires every expected slot to have ended `succeeded` or `skipped` (nothing lost in the queue)
/// and no row to share its key with another (nothing enqueued twice); reports both.
fn require_drained(out: &mut Outcome, runs: &[RunRecord], expected: &BTreeSet<(String, String)>) {
    let left = unfinished(runs, expected);
    let keys: BTreeSet<_> = runs
        .iter()
        .map(|r| (&r.key.job, r.key.scheduled_at, &r.key.partition))
        .collect();
    let duplicates = runs.len() - keys.len();
    out.fig("slots-not-finished", left.len());
    out.fig("duplicate-rows", duplicates);
    for (job, slot, status) in left.iter().take(10) {
        out.failures.push(format!(
            "{job} {slot}: {} at the end (not succeeded or skipped)",
            status.map_or("no row".to_owned(), |s| s.to_string())
        ));
    }
    out.require(duplicates == 0, || {
        format!("{duplicates} rows share a slot key with another")
    });
}

/// The slots executed more than once (ledger `start`s), none expected without worker faults.
fn require_once(out: &mut Outcome, effects: &[Effect]) {
    let twice: Vec<_> = executions(effects)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    out.fig("slots-executed-twice", twice.len());
    for ((job, slot), n) in twice.iter().take(10) {
        out.failures.push(format!(
            "{job} {slot}: executed {n} times, no worker was faulted"
        ));
    }
}

/// The bodies of `workerkill` and `workerstop`, in ms.
const BODY_MS: u64 = 700;

/// [`busy_rounds_among`] over 2 schedulers and 3 workers on [`busy_args`] with bodies of
/// [`BODY_MS`]: `fault` aims at the worker running the most bodies.
fn worker_rounds(sc: &mut Sc, out: &mut Outcome, rounds: usize, fault: &mut AtBusy) -> Busy {
    let (schedulers, workers) = split(sc, 2, 3, &busy_args(BODY_MS));
    busy_rounds_among(sc, out, rounds, workers, schedulers, fault)
}

pub(crate) fn workerkill(sc: &mut Sc) -> Outcome {
    let rounds = if sc.h.quick { 4 } else { 12 };
    let mut out = Outcome::new(
        "2 schedulers, 3 workers (room 4 each), bodies of 700 ms; each round kill -9 hits the worker that runs job bodies right now, which is restarted (at least half the rounds find one); every interrupted attempt taken over (or the run dead) within stale (3 s) + 2 s of the kill; every slot ended succeeded or skipped; (a)-(e)",
    );
    let again = worker(&busy_args(BODY_MS));
    let mut kills = Kills::default();
    let busy = worker_rounds(sc, &mut out, rounds, &mut |sc, _, nodes, i, jobs| {
        kills.kill_restart(sc, nodes, i, jobs.len(), &format!("w{i}"), &again);
        true
    });
    let interrupted = interrupted_by(&kills.kills, &busy.runs, &busy.effects);
    let worst = interrupted.latencies.iter().max().copied();
    out.fig(
        "bodies-running-in-killed-worker",
        format!("{:?}", kills.running),
    );
    out.fig("interrupted-executions", interrupted.count);
    out.fig("taken-over", interrupted.latencies.len());
    out.fig("take-over-max", worst.map_or("-".into(), secs_f));
    out.invariants(&busy.report);
    require_drained(&mut out, &busy.runs, &busy.expected);
    let limit = chrono_ms(BUSY_STALE_MS as i64 + 2_000);
    out.require(worst.is_none_or(|w| w <= limit), || {
        format!(
            "a take-over came {} after the kill (limit stale + 2 s)",
            worst.map_or("-".into(), secs_f)
        )
    });
    out.require(interrupted.unrecovered == 0, || {
        format!(
            "{} interrupted attempts were never taken over",
            interrupted.unrecovered
        )
    });
    out
}

pub(crate) fn workerstop(sc: &mut Sc) -> Outcome {
    let rounds = if sc.h.quick { 3 } else { 8 };
    let mut out = Outcome::new(
        "2 schedulers, 3 workers (room 4 each), bodies of 700 ms; each round SIGSTOP hits the worker that runs job bodies right now and holds it 5-5.5 s (past stale 3 s), then SIGCONT (at least half the rounds find one); every job it was running starts an execution again within stale (3 s) + one recovery poll (0.5 s) + 1 s of the stop; every slot ended succeeded or skipped; (a)-(e): a woken body after a take-over is a fenced tail",
    );
    let busy = stop_rounds(sc, &mut out, rounds, worker_rounds);
    require_drained(&mut out, &busy.runs, &busy.expected);
    out
}

pub(crate) fn schedkill(sc: &mut Sc) -> Outcome {
    let rounds = if sc.h.quick { 4 } else { 12 };
    let mut out = Outcome::new(
        "2 schedulers, 2 workers (room 4 each), bodies of 300 ms; each round kill -9 one scheduler (the two in turn) and start it again after 1-3 s, then wait 1-2 s with both up; every slot of the run has one row that ended succeeded or skipped (0 missed), no row twice, no slot executed twice; (a)-(e)",
    );
    let args = busy_args(300);
    let (mut schedulers, workers) = split(sc, 2, 2, &args);
    let again = scheduler(&args);
    let from = Utc::now() + chrono_ms(1_000);
    let mut alone = chrono::Duration::zero();
    let (mut killed, first) = (Vec::new(), sc.rng.below(2));
    for round in 0..rounds {
        sleep(sc.rng.ms(0, 1_000));
        // Each of the two in turn.
        let i = (first + round) % 2;
        let at = sc.kill(schedulers[i].pid());
        killed.push(format!("s{i}"));
        sleep(sc.rng.ms(1_000, 3_000));
        schedulers[i] = sc.spawn(&format!("s{i}"), &again);
        alone += Utc::now() - at;
        sleep(sc.rng.ms(1_000, 2_000));
    }
    let to = Utc::now() - chrono_ms(1_000);
    sleep(secs(2));
    schedulers.extend(workers);
    let unclean = stop_all(schedulers);
    let expected = expect(&job_names(BUSY_JOBS), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);
    out.fig("kills", killed.join(","));
    out.fig("one-scheduler-up-for", secs_f(alone));
    out.fig("slots", expected.len());
    out.invariants(&report);
    require_drained(&mut out, &runs, &expected);
    require_once(&mut out, &effects);
    out.require(unclean == 0, || {
        format!("{unclean} processes exited uncleanly")
    });
    out
}

/// Jobs in `workerscale`: 8 every second, bodies of 300 ms.
const SCALE_JOBS: usize = 8;

/// The arguments of `workerscale`'s processes: [`SCALE_JOBS`] jobs every second at `slot`, overlap
/// `skip`, bodies of 300 ms, a 5 s drain.
fn scale_args() -> Vec<String> {
    let mut args = busy_args(300);
    let jobs = args.iter().position(|a| a == "--jobs").expect("--jobs") + 1;
    args[jobs] = SCALE_JOBS.to_string();
    let grace = args
        .iter()
        .position(|a| a == "--grace-ms")
        .expect("--grace-ms")
        + 1;
    args[grace] = "5000".into();
    args
}

/// What a worker's graceful stop reported: `(in_flight, abandoned)` from its `stopped` line.
fn drained(lines: &[String]) -> Option<(usize, usize)> {
    let line = lines.iter().find(|l| l.starts_with("stopped "))?;
    let field = |name: &str| {
        line.split(' ')
            .find_map(|f| f.strip_prefix(name))
            .and_then(|v| v.parse().ok())
    };
    Some((field("in_flight=")?, field("abandoned=")?))
}

/// How many whole seconds `workerscale` waits at most for one in which a worker it drains runs a body.
const DRAIN_TRIES: usize = 10;

/// Sleeps until 50-150 ms after a whole second in which one of `gone` started a body (bodies last
/// 300 ms, so it still runs), so that the drain has a body to finish; workers claim up to their room
/// at once, so in a given second the 8 bodies may all sit on the 2 workers that stay. Gives up after
/// [`DRAIN_TRIES`] seconds (the scenario then fails on `drained-in-flight`).
fn drain_moment(sc: &mut Sc, gone: &[Node]) -> DateTime<Utc> {
    let pids: BTreeSet<u32> = gone.iter().map(Node::pid).collect();
    for _ in 0..DRAIN_TRIES {
        let second = next_second(Utc::now());
        let offset = chrono::Duration::from_std(sc.rng.ms(50, 150)).expect("small");
        sleep_until(second + offset);
        let running = read_ledger(&sc.ledger).iter().any(|e| {
            e.kind == "start" && pids.contains(&e.pid) && e.at.is_some_and(|t| t >= second)
        });
        if running {
            break;
        }
    }
    Utc::now()
}

pub(crate) fn workerscale(sc: &mut Sc) -> Outcome {
    let phase = secs(if sc.h.quick { 6 } else { 20 });
    let mut out = Outcome::new(&format!(
        "1 scheduler; 8 jobs every second, bodies of 300 ms; workers (room 4 each) scaled 1 -> 8 -> 2, {phase:?} each: 7 started together, then 6 sent SIGTERM together 50-150 ms after a whole second in which one of them started a body (graceful drain, grace 5 s); every slot of the run ran once or was recorded skipped (0 lost, 0 left queued, 0 executed twice); the drained workers had bodies running, finish them and exit cleanly with 0 runs abandoned; at 8 workers at least 2 ran bodies; (a)-(e)"
    ));
    let args = scale_args();
    let (schedulers, mut workers) = split(sc, 1, 1, &args);
    let from = Utc::now() + chrono_ms(1_000);
    sleep(phase);
    let up = Utc::now();
    workers.extend(sc.spawn_named(&named("w", 1..8), &worker(&args)));
    sleep(phase);
    let gone: Vec<Node> = workers.drain(2..).collect();
    let down = drain_moment(sc, &gone);
    for node in &gone {
        node.signal("TERM");
    }
    let (mut in_flight, mut abandoned, mut unclean, mut silent) = (0, 0, 0, 0);
    for node in gone {
        let (lines, ok) = node.finish(secs(30));
        unclean += usize::from(!ok);
        match drained(&lines) {
            Some((f, a)) => (in_flight, abandoned) = (in_flight + f, abandoned + a),
            None => silent += 1,
        }
    }
    let drain = Utc::now() - down;
    sleep(phase);
    let to = Utc::now() - chrono_ms(1_000);
    sleep(secs(2));
    workers.extend(schedulers);
    unclean += stop_all(workers);
    let expected = expect(&job_names(SCALE_JOBS), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);
    let phases = [(from, up), (up, down), (down, to)];
    let ran: Vec<String> = phases
        .iter()
        .map(|(a, b)| {
            let starts: Vec<u32> = effects
                .iter()
                .filter(|e| e.kind == "start" && e.at.is_some_and(|t| t >= *a && t < *b))
                .map(|e| e.pid)
                .collect();
            let pids: BTreeSet<u32> = starts.iter().copied().collect();
            format!("{}/{}", starts.len(), pids.len())
        })
        .collect();
    let at_eight: usize = ran[1]
        .split('/')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    out.fig("executions/workers-per-phase(1,8,2)", ran.join(","));
    out.fig("drain", secs_f(drain));
    out.fig("drained-in-flight", in_flight);
    out.fig("drained-abandoned", abandoned);
    out.fig("slots", expected.len());
    out.invariants(&report);
    require_drained(&mut out, &runs, &expected);
    require_once(&mut out, &effects);
    out.require(in_flight > 0, || {
        "the drained workers had no body running when told to stop".into()
    });
    out.require(abandoned == 0 && silent == 0, || {
        format!("the drained workers abandoned {abandoned} runs ({silent} reported no drain)")
    });
    out.require(at_eight >= 2, || {
        format!("at 8 workers only {at_eight} ran bodies")
    });
    out.require(unclean == 0, || {
        format!("{unclean} processes exited uncleanly")
    });
    out
}

pub(crate) fn workerrestart(sc: &mut Sc) -> Outcome {
    let (schedulers, mut workers) = split(sc, 1, 2, &busy_args(300));
    workers.extend(schedulers);
    let setup = "1 scheduler, 2 workers (room 4 each), bodies of 300 ms; every slot ended succeeded or skipped (none left queued); ";
    let (mut out, runs, expected) = crate::tick_restart::restart_rounds(sc, workers, setup);
    require_drained(&mut out, &runs, &expected);
    out
}
