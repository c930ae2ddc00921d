//! `sg-faults`: the fault-injection harness. It starts one throwaway PostgreSQL cluster on loopback
//! (and a throwaway `redis-server` for each Redis scenario), runs each scenario in a schema of its
//! own with `sg-node` replica processes, injects faults by process id (`kill -9`, `SIGSTOP`), by SQL
//! (`pg_terminate_backend`), by server restart and through a TCP fault proxy, and checks the
//! invariants of [`invariants`] over the effects ledger and the runs table. One result line per
//! scenario; exits 1 when any scenario fails, 2 when it cannot run.
//!
//! ```text
//! cargo run -p slotguard-process-tests --bin sg-faults -- --scenario all --seed 1 [--quick]
//! cargo run -p slotguard-process-tests --bin sg-faults -- --scenario kill9,sigstop --seed 7
//! ```
//!
//! Every random choice (which replica, when, how long) comes from `--seed` and the scenario's name, so
//! a scenario picks the same faults whether it runs alone or in `all`; the timing of the processes
//! themselves is the machine's.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use clap::Parser;
use slotguard::admin::{Admin, AdminError, ChangeRequest};
use slotguard::store::{RunRecord, RunStatus, Trigger};
use slotguard_process_tests::invariants::{self, Exclusion, Report, every, expect, slot_name};
use slotguard_process_tests::proxy::{Mode, Proxy};
use slotguard_process_tests::{Cluster, Effect, Node, executions, ledger_in, read_ledger, signal};

// The crate root's modules resolve next to it: these live in `faults/`.
#[path = "faults/busy.rs"]
mod busy;
#[path = "faults/catchup_kill.rs"]
mod catchup_kill;
#[path = "faults/dst.rs"]
mod dst;
#[path = "faults/lock_session.rs"]
mod lock_session;
#[path = "faults/redis.rs"]
mod redis;
#[path = "faults/rolling.rs"]
mod rolling;
#[path = "faults/tick_restart.rs"]
mod tick_restart;

/// The scenarios, in the order `all` runs them.
const SCENARIOS: &[(&str, &str)] = &[
    ("race", "replicas race on 1,000+ slots; each runs once"),
    (
        "kill9",
        "kill -9 a random replica at a random point of claim/run/complete, restart it",
    ),
    (
        "sigstop",
        "SIGSTOP the owner past its stale threshold, SIGCONT after the take-over",
    ),
    (
        "terminate",
        "pg_terminate_backend on a random replica's backends",
    ),
    ("restart", "the database restarts mid-run"),
    (
        "overrun",
        "work 2.5x the interval under skip, allow, buffer_one, replace",
    ),
    (
        "retries",
        "8 concurrent Admin::retry calls on one failed slot",
    ),
    (
        "catchup",
        "every replica down for a while; restart with catch-up all, latest, skip",
    ),
    ("skew", "one replica's clock +90 s, another's -90 s"),
    (
        "catchupkill",
        "kill -9 replicas while the cluster drains catch-up runs",
    ),
    (
        "clockjump",
        "one replica's clock steps an hour ahead, another's an hour back, mid-run",
    ),
    (
        "proxy",
        "latency, blackhole and resets between one replica and the database",
    ),
    (
        "pool",
        "a one-connection pool under many long runs: heartbeats must not starve",
    ),
    (
        "dst",
        "injected clocks across 2026 DST transitions, one job per policy; a restart in the repeated hour",
    ),
    (
        "rolling",
        "rolling restart from schedule v1 to v2 of the same job, one replica at a time",
    ),
    (
        "busykill",
        "kill -9 the replica running 5 every-second jobs (960 ms bodies, stale 3 s) while newer slots come",
    ),
    (
        "busystop",
        "SIGSTOP the replica running the jobs for 5 s (past stale 3 s), then SIGCONT",
    ),
    (
        "locksession",
        "pg_terminate_backend of only the busy replica's advisory-lock session",
    ),
    (
        "tickrestart",
        "pg_ctl restart -m immediate landing on a slot's instant, several times",
    ),
    (
        "spread",
        "no faults: each of 3 replicas runs its share of 5 every-second jobs",
    ),
    (
        "redisrows",
        "Redis locks in front of the rows: kill -9 / SIGSTOP (past the lease) the busy replica, in turn",
    ),
    (
        "redislock",
        "Redis alone at level lock: kill -9 / SIGSTOP (past the lease) the busy replica, in turn",
    ),
    (
        "redisrestart",
        "Redis alone at level lock: the Redis killed with -9 and started again empty, twice or more",
    ),
];

/// Settings every replica gets unless a scenario says otherwise.
const STALE_MS: u64 = 2_000;
const COMMON: &[&str] = &[
    "--stale-ms",
    "2000",
    "--recovery-ms",
    "300",
    "--grace-ms",
    "1000",
];
/// How far past its stale threshold a `running` row may be when checked.
const GRACE: Duration = Duration::from_secs(3);

#[derive(Parser, Debug)]
#[command(
    name = "sg-faults",
    about = "Fault-injection harness: replica processes against a throwaway PostgreSQL cluster"
)]
struct Cli {
    /// A scenario, a comma-separated list of them, or `all`.
    #[arg(long, default_value = "all")]
    scenario: String,
    /// Seeds every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Smaller sizes (the CI subset).
    #[arg(long)]
    quick: bool,
    /// Replicas in `race` (the other scenarios use 2 or 3).
    #[arg(long, default_value_t = 8)]
    replicas: usize,
    /// The `sg-node` binary (default: next to this one; built first when run through cargo).
    #[arg(long)]
    node: Option<PathBuf>,
    /// Lists the scenarios and exits.
    #[arg(long)]
    list: bool,
}

/// SplitMix64: small, seedable, good enough to pick faults.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, scenario: &str) -> Rng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for b in scenario.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Rng(h)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.next() % (hi.saturating_sub(lo) + 1))
    }
}

struct Harness {
    rt: tokio::runtime::Runtime,
    cluster: Cluster,
    node: PathBuf,
    quick: bool,
    replicas: usize,
    seed: u64,
}

/// What a scenario measured and whether it passed.
struct Outcome {
    figures: Vec<String>,
    condition: String,
    failures: Vec<String>,
}

impl Outcome {
    fn new(condition: &str) -> Outcome {
        Outcome {
            figures: Vec::new(),
            condition: condition.to_owned(),
            failures: Vec::new(),
        }
    }

    fn fig(&mut self, name: &str, value: impl std::fmt::Display) {
        self.figures.push(format!("{name}={value}"));
    }

    fn require(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }

    fn invariants(&mut self, report: &Report) {
        self.figures.push(report.figures());
        self.failures.extend(report.violations.iter().cloned());
    }
}

/// One scenario's schema, ledger and random choices.
struct Sc<'h> {
    h: &'h Harness,
    schema: String,
    dir: tempfile::TempDir,
    ledger: PathBuf,
    rng: Rng,
    /// Processes sent `kill -9`, and when (for (e)).
    killed: BTreeMap<u32, DateTime<Utc>>,
    /// Jobs some replica runs at overlap `allow`, from the arguments it was started with (for (e)).
    shared: RefCell<BTreeSet<String>>,
}

impl Sc<'_> {
    fn url_via(&self, port: u16, instance: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{port}/postgres?application_name={}",
            self.app(instance)
        )
    }

    /// The `application_name` of a replica's connections.
    fn app(&self, instance: &str) -> String {
        format!("{}_{instance}", self.schema)
    }

    /// `sg-node`'s arguments: the scenario's namespace, the store (this scenario's schema unless
    /// `extra` names one), the instance and the ledger, then `extra`.
    fn args(&self, instance: &str, port: u16, extra: &[String]) -> Vec<String> {
        let mut v: Vec<String> = vec!["--namespace".into(), self.schema.clone()];
        if !extra.iter().any(|a| a == "--store") {
            v.push("--store".into());
            v.push(format!(
                "postgres:{}#{}",
                self.url_via(port, instance),
                self.schema
            ));
        }
        v.extend([
            "--instance".into(),
            instance.into(),
            "--ledger".into(),
            self.ledger.to_string_lossy().into_owned(),
        ]);
        v.extend(extra.iter().cloned());
        v
    }

    fn launch(&self, instance: &str, port: u16, extra: &[String]) -> Node {
        self.note_shared(extra);
        let node = self.h.node.to_str().expect("utf-8 path");
        Node::spawn(node, &self.args(instance, port, extra))
    }

    /// Remembers the jobs that `sg-node` runs at overlap `allow` under `extra`: job `n` gets entry
    /// `n % len` of `--overlap` (default `skip`); `--guard` is `lock` or `slot`, both exclusive.
    fn note_shared(&self, extra: &[String]) {
        let get = |flag: &str| {
            extra
                .iter()
                .position(|a| a == flag)
                .and_then(|i| extra.get(i + 1))
        };
        let names: Vec<String> = match get("--names") {
            Some(list) => list.split(',').map(str::to_owned).collect(),
            None => job_names(get("--jobs").and_then(|n| n.parse().ok()).unwrap_or(1)),
        };
        let overlaps: Vec<&str> = get("--overlap").map_or("skip", |o| o).split(',').collect();
        for (n, name) in names.into_iter().enumerate() {
            if overlaps[n % overlaps.len()] == "allow" {
                self.shared.borrow_mut().insert(name);
            }
        }
    }

    /// Sends `kill -9` to `pid` and remembers when (read after the signal was sent): the process's
    /// executions end then, for (e).
    fn kill(&mut self, pid: u32) -> DateTime<Utc> {
        signal(pid, "KILL");
        let at = Utc::now();
        self.killed.insert(pid, at);
        at
    }

    /// Starts one replica on the database and waits until it is ready.
    fn spawn(&self, instance: &str, extra: &[String]) -> Node {
        self.spawn_via(instance, self.h.cluster.port(), extra)
    }

    /// Starts one replica connecting to `port` (a proxy) and waits until it is ready.
    fn spawn_via(&self, instance: &str, port: u16, extra: &[String]) -> Node {
        let mut node = self.launch(instance, port, extra);
        node.wait_for("ready", Duration::from_secs(60));
        node
    }

    /// Starts `n` replicas `n0`, `n1`, ... together and waits until all are ready.
    fn spawn_many(&self, n: usize, extra: &[String]) -> Vec<Node> {
        let port = self.h.cluster.port();
        let mut nodes: Vec<Node> = (0..n)
            .map(|i| self.launch(&format!("n{i}"), port, extra))
            .collect();
        for node in &mut nodes {
            node.wait_for("ready", Duration::from_secs(60));
        }
        nodes
    }

    fn backend(&self, pool: u32) -> slotguard_postgres::PgBackend {
        self.h
            .rt
            .block_on(
                slotguard_postgres::PgBackend::builder(&self.h.cluster.url())
                    .schema(self.schema.clone())
                    .pool_size(pool)
                    .connect(),
            )
            .expect("connect to the cluster")
    }

    /// Every run with its attempts, and the database's clock when they were read.
    fn runs(&self) -> (Vec<RunRecord>, DateTime<Utc>) {
        let backend = self.backend(1);
        self.h.rt.block_on(async {
            let runs = backend.runs(None).await.expect("runs");
            let now: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
                .fetch_one(backend.pool())
                .await
                .expect("now()");
            backend.close().await;
            (runs, now)
        })
    }

    /// Runs the invariant checker on the ledger and the runs table as they are now.
    fn check(
        &self,
        expected: &BTreeSet<(String, String)>,
    ) -> (Report, Vec<RunRecord>, Vec<Effect>) {
        let effects = read_ledger(&self.ledger);
        let (runs, now) = self.runs();
        let mut report = invariants::check(&effects, &runs, now, expected, GRACE);
        let exclusion = Exclusion {
            shared: self.shared.borrow().clone(),
            killed: self.killed.clone(),
        };
        invariants::check_overlaps(&mut report, &effects, &runs, now, &exclusion);
        (report, runs, effects)
    }

    fn pool(&self) -> sqlx::PgPool {
        let url = format!("{}?application_name=sg-faults", self.h.cluster.url());
        self.h
            .rt
            .block_on(sqlx::PgPool::connect(&url))
            .expect("connect to the cluster")
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

fn with_common(args: &[&str]) -> Vec<String> {
    let mut v = strings(args);
    v.extend(strings(COMMON));
    v
}

fn job_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("job{i:03}")).collect()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn sleep(d: Duration) {
    std::thread::sleep(d);
}

fn sleep_until(at: DateTime<Utc>) {
    if let Ok(d) = (at - Utc::now()).to_std() {
        sleep(d);
    }
}

fn chrono_ms(ms: i64) -> chrono::Duration {
    chrono::Duration::milliseconds(ms)
}

/// The first whole second after `t`.
fn next_second(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(t.timestamp() + 1, 0).expect("in range")
}

/// Sends SIGTERM to every replica and waits for each; answers how many did not exit cleanly.
fn stop_all(nodes: Vec<Node>) -> usize {
    for node in &nodes {
        node.signal("TERM");
    }
    nodes
        .into_iter()
        .map(|n| n.finish(secs(30)))
        .filter(|(_, ok)| !ok)
        .count()
}

fn wait_effect(
    ledger: &Path,
    limit: Duration,
    what: impl Fn(&Effect) -> bool,
) -> Result<Effect, String> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(e) = read_ledger(ledger).into_iter().find(|e| what(e)) {
            return Ok(e);
        }
        if Instant::now() > deadline {
            return Err(format!("no such ledger line within {limit:?}"));
        }
        sleep(Duration::from_millis(50));
    }
}

fn index(runs: &[RunRecord]) -> BTreeMap<(String, String), &RunRecord> {
    runs.iter()
        .map(|r| ((r.key.job.clone(), slot_name(r.key.scheduled_at)), r))
        .collect()
}

/// The most attempt intervals of `runs` open at one instant (half-open; open attempts end at `now`).
fn max_concurrency<'a>(runs: impl Iterator<Item = &'a RunRecord>, now: DateTime<Utc>) -> usize {
    let mut events: Vec<(DateTime<Utc>, i32)> = Vec::new();
    for run in runs {
        for a in &run.attempts {
            events.push((a.started_at, 1));
            events.push((a.finished_at.unwrap_or(now), -1));
        }
    }
    events.sort();
    let (mut open, mut peak) = (0i32, 0i32);
    for (_, d) in events {
        open += d;
        peak = peak.max(open);
    }
    peak as usize
}

fn secs_f(d: chrono::Duration) -> String {
    format!("{:.2}s", d.num_milliseconds() as f64 / 1000.0)
}

/// A run without faults.
struct Steady {
    /// The slots of the jobs, every second, over the steady window: from 1 s after every replica
    /// was ready to 1 s before they were stopped.
    expected: BTreeSet<(String, String)>,
    /// The replicas' process ids, in the order of their instances `n0`, `n1`, ...
    pids: Vec<u32>,
    /// Replicas that did not exit cleanly when stopped.
    unclean: usize,
}

/// `n` replicas on `args` (with `jobs` jobs every second) for `run_for` seconds, then stopped.
fn steady(sc: &Sc, n: usize, args: &[String], jobs: usize, run_for: u64) -> Steady {
    let nodes = sc.spawn_many(n, args);
    let pids = nodes.iter().map(Node::pid).collect();
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(run_for));
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    Steady {
        expected: expect(&job_names(jobs), &every(from, to, 1)),
        pids,
        unclean,
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------

fn race(sc: &mut Sc) -> Outcome {
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
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

fn kill9(sc: &mut Sc) -> Outcome {
    let n = 3;
    let iterations = if sc.h.quick { 20 } else { 200 };
    let work: u64 = 300;
    let mut out = Outcome::new(
        "(a)-(e) over every slot of the run; each interrupted attempt recovered by another attempt within stale (2 s) + 5 s",
    );
    let args = with_common(&["--jobs", "4", "--work-ms", &work.to_string()]);
    let mut nodes = sc.spawn_many(n, &args);
    let from = Utc::now() + chrono_ms(1_000);
    let mut kills: Vec<(u32, DateTime<Utc>)> = Vec::new();
    for _ in 0..iterations {
        let i = sc.rng.below(n);
        // Slots fall due on whole seconds: claim, run and complete happen in the `work + 150 ms`
        // after one.
        let offset = sc.rng.ms(0, work + 150);
        let at = next_second(Utc::now() + chrono_ms(200))
            + chrono::Duration::from_std(offset).expect("small");
        sleep_until(at);
        let pid = nodes[i].pid();
        kills.push((pid, sc.kill(pid)));
        nodes[i] = sc.spawn(&format!("n{i}"), &args);
    }
    let to = Utc::now() - chrono_ms(1_000);
    // Every interrupted attempt goes stale and is taken over.
    sleep(Duration::from_millis(STALE_MS) + secs(3));
    let unclean = stop_all(nodes);
    let expected = expect(&job_names(4), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);

    let Interrupted {
        count: interrupted,
        after_end,
        unrecovered,
        latencies,
    } = interrupted_by(&kills, &runs, &effects);
    let worst = latencies.iter().max().copied().unwrap_or_default();
    let limit = chrono_ms(STALE_MS as i64 + 5_000);
    out.fig("kills", kills.len());
    out.fig("slots", expected.len());
    out.fig("interrupted-executions", interrupted);
    out.fig("killed-between-end-and-complete", after_end);
    out.fig("recovery-max", secs_f(worst));
    out.fig(
        "recovery-mean",
        secs_f(
            latencies
                .iter()
                .copied()
                .sum::<chrono::Duration>()
                .checked_div(latencies.len().max(1) as i32)
                .unwrap_or_default(),
        ),
    );
    out.invariants(&report);
    out.require(unrecovered == 0, || {
        format!("{unrecovered} interrupted attempts never taken over")
    });
    out.require(worst <= limit, || {
        format!("a recovery took {}", secs_f(worst))
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

/// What `kill -9` did to executions: those of the killed processes whose attempt was not accepted.
struct Interrupted {
    count: usize,
    /// Killed after the body ended, before its completion was written.
    after_end: usize,
    /// Never taken over by another attempt (and the run is not `dead`).
    unrecovered: usize,
    /// From each kill to the next attempt of the interrupted run.
    latencies: Vec<chrono::Duration>,
}

fn interrupted_by(
    kills: &[(u32, DateTime<Utc>)],
    runs: &[RunRecord],
    effects: &[Effect],
) -> Interrupted {
    let killed_at: BTreeMap<u32, DateTime<Utc>> = kills.iter().copied().collect();
    let mut by_token: BTreeMap<i64, (&RunRecord, usize)> = BTreeMap::new();
    for run in runs {
        for (i, a) in run.attempts.iter().enumerate() {
            by_token.insert(a.token, (run, i));
        }
    }
    let mut out = Interrupted {
        count: 0,
        after_end: 0,
        unrecovered: 0,
        latencies: Vec::new(),
    };
    for e in effects.iter().filter(|e| e.kind == "start") {
        let (Some(at), Some((run, i))) = (killed_at.get(&e.pid), by_token.get(&e.token)) else {
            continue;
        };
        if run.attempts[*i].status == RunStatus::Succeeded {
            continue;
        }
        out.count += 1;
        if effects
            .iter()
            .any(|x| x.kind == "end" && x.token == e.token)
        {
            out.after_end += 1;
        }
        match run.attempts.get(i + 1) {
            Some(next) => out.latencies.push(next.started_at - *at),
            None if run.status == RunStatus::Dead => {}
            None => out.unrecovered += 1,
        }
    }
    out
}

fn sigstop(sc: &mut Sc) -> Outcome {
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
    let mut used = BTreeSet::new();
    let mut stopped: Vec<(Effect, Effect)> = Vec::new();
    let (mut takeover_max, mut stopped_max) = (Duration::ZERO, Duration::ZERO);
    let (mut told, mut refused) = (0, 0);
    for _ in 0..cycles {
        let first = match wait_effect(&sc.ledger, secs(25), |e| {
            e.kind == "start" && e.attempt == 1 && !used.contains(&e.slot)
        }) {
            Ok(e) => e,
            Err(e) => {
                out.failures.push(format!("no run to stop: {e}"));
                break;
            }
        };
        used.insert(first.slot.clone());
        sleep(sc.rng.ms(0, 500));
        let stopped_at = Instant::now();
        signal(first.pid, "STOP");
        let taken = wait_effect(&sc.ledger, secs(15), |e| {
            e.kind == "start"
                && e.job == first.job
                && e.slot == first.slot
                && e.token != first.token
        });
        let takeover = stopped_at.elapsed();
        sleep(sc.rng.ms(0, 3_000));
        stopped_max = stopped_max.max(stopped_at.elapsed());
        signal(first.pid, "CONT");
        let Ok(taken) = taken else {
            out.failures.push(format!(
                "slot {} never taken over from a stopped owner",
                first.slot
            ));
            continue;
        };
        takeover_max = takeover_max.max(takeover);
        match wait_effect(&sc.ledger, secs(15), |e| {
            (e.kind == "lost" || e.kind == "end") && e.token == first.token
        }) {
            Ok(e) if e.kind == "lost" => told += 1,
            Ok(_) => refused += 1,
            Err(e) => out.failures.push(format!(
                "the woken owner of {} did nothing: {e}",
                first.slot
            )),
        }
        stopped.push((first, taken));
    }
    if let Some((_, taken)) = stopped.last() {
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
    let rows = index(&runs);
    for (first, _) in &stopped {
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
    let limit = Duration::from_millis(STALE_MS + 5_000);
    out.fig("cycles", stopped.len());
    out.fig(
        "takeover-max",
        format!("{:.2}s", takeover_max.as_secs_f64()),
    );
    out.fig("stopped-max", format!("{:.2}s", stopped_max.as_secs_f64()));
    out.fig("woken-told-lost", told);
    out.fig("woken-completion-refused", refused);
    out.invariants(&report);
    out.require(takeover_max <= limit, || {
        format!("a take-over took {takeover_max:?}")
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

fn terminate(sc: &mut Sc) -> Outcome {
    let n = 3;
    let rounds = if sc.h.quick { 6 } else { 30 };
    let mut out = Outcome::new(
        "every terminated replica has connected again afterwards; (a)-(e) over every slot of the run",
    );
    let nodes = sc.spawn_many(n, &with_common(&["--jobs", "4", "--work-ms", "400"]));
    let pool = sc.pool();
    let from = Utc::now() + chrono_ms(1_000);
    let mut last: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
    let mut terminated = 0usize;
    for _ in 0..rounds {
        // Right after a whole second, when claims, then completions, are on the wire.
        let offset = sc.rng.ms(0, 500);
        let at = next_second(Utc::now() + chrono_ms(sc.rng.ms(0, 1_000).as_millis() as i64))
            + chrono::Duration::from_std(offset).expect("small");
        sleep_until(at);
        let instance = format!("n{}", sc.rng.below(n));
        let app = sc.app(&instance);
        let done: Vec<(bool,)> =
            sc.h.rt
                .block_on(
                    sqlx::query_as(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = $1 OR application_name LIKE $1 || ' (slotguard locks)%'",
                    )
                    .bind(&app)
                    .fetch_all(&pool),
                )
                .expect("terminate");
        terminated += done.iter().filter(|(ok,)| *ok).count();
        last.insert(instance, Utc::now());
    }
    sleep(Duration::from_millis(STALE_MS) + secs(3));
    // Each replica's pool connected again (its claims need a connection every second).
    let mut reconnected = 0;
    for instance in last.keys() {
        let open: i64 =
            sc.h.rt
                .block_on(
                    sqlx::query_scalar(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                    )
                    .bind(sc.app(instance))
                    .fetch_one(&pool),
                )
                .expect("pg_stat_activity");
        if open > 0 {
            reconnected += 1;
        } else {
            out.failures.push(format!(
                "{instance} has no connection after its backends were terminated"
            ));
        }
    }
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    sc.h.rt.block_on(pool.close());
    let expected = expect(&job_names(4), &every(from, to, 1));
    let (report, runs, _) = sc.check(&expected);
    let mut after: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (instance, at) in &last {
        let attempts = runs
            .iter()
            .flat_map(|r| &r.attempts)
            .filter(|a| a.owner == *instance);
        let n = attempts.clone().count();
        let resumed = attempts.filter(|a| a.started_at > *at).count();
        after.insert(instance, (n, resumed));
    }
    out.fig(
        "runs-by-replica(all/after-last-termination)",
        after
            .iter()
            .map(|(i, (n, r))| format!("{i}:{n}/{r}"))
            .collect::<Vec<_>>()
            .join(","),
    );
    out.fig("replicas-reconnected", reconnected);
    out.fig("rounds", rounds);
    out.fig("backends-terminated", terminated);
    out.fig("slots", expected.len());
    out.invariants(&report);
    out.require(terminated >= rounds / 2, || {
        format!("only {terminated} backends found to terminate")
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

fn restart(sc: &mut Sc) -> Outcome {
    let restarts = if sc.h.quick { 1 } else { 3 };
    let mut out = Outcome::new(
        "replicas run slots again within 10 s of the database being back; every slot outside [down - 1 s, back + 5 s] recorded; those inside that were not recorded are listed by Admin::missed; (a)-(e)",
    );
    let nodes = sc.spawn_many(3, &with_common(&["--jobs", "5", "--work-ms", "400"]));
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(4));
    let mut outages = Vec::new();
    for _ in 0..restarts {
        let down_for = sc.rng.ms(1_000, 4_000);
        // While the runs of the last whole second are going.
        let offset = sc.rng.ms(50, 300);
        sleep_until(next_second(Utc::now()) + chrono::Duration::from_std(offset).expect("small"));
        let down = Utc::now();
        sc.h.cluster.stop();
        sleep(down_for);
        sc.h.cluster.restart();
        let back = Utc::now();
        outages.push((down, back));
        sleep(secs(8));
    }
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    let excused = |t: DateTime<Utc>| {
        outages
            .iter()
            .any(|(d, b)| t > *d - chrono_ms(1_000) && t <= *b + chrono_ms(5_000))
    };
    let slots: Vec<_> = every(from, to, 1);
    let kept: Vec<_> = slots.iter().copied().filter(|t| !excused(*t)).collect();
    let expected = expect(&job_names(5), &kept);
    let (report, runs, _) = sc.check(&expected);
    let rows = index(&runs);
    let lost = expect(
        &job_names(5),
        &slots
            .iter()
            .copied()
            .filter(|t| excused(*t))
            .collect::<Vec<_>>(),
    )
    .iter()
    .filter(|k| !rows.contains_key(*k))
    .count();
    // The slots no one could record are those the admin API lists as missed.
    let backend = sc.backend(1);
    let admin = Admin::new(backend.clone());
    let mut listed = 0;
    for job in job_names(5) {
        for (d, b) in &outages {
            listed +=
                sc.h.rt
                    .block_on(admin.missed(&job, *d - chrono_ms(999), *b + chrono_ms(5_001)))
                    .map_or(0, |m| m.len());
        }
    }
    sc.h.rt.block_on(backend.close());
    let mut worst = chrono::Duration::zero();
    for (_, back) in &outages {
        let first = runs
            .iter()
            .flat_map(|r| &r.attempts)
            .map(|a| a.started_at)
            .filter(|t| t > back)
            .min();
        match first {
            Some(t) => worst = worst.max(t - *back),
            None => out
                .failures
                .push("nothing ran after the database came back".into()),
        }
    }
    out.fig("restarts", restarts);
    out.fig(
        "downtime",
        outages
            .iter()
            .map(|(d, b)| secs_f(*b - *d))
            .collect::<Vec<_>>()
            .join("/"),
    );
    out.fig("resumed-max", secs_f(worst));
    out.fig("slots-unrecorded-in-outage", lost);
    out.fig("listed-by-admin-missed", listed);
    out.require(listed == lost, || {
        format!("{lost} slots unrecorded in the outage, {listed} listed by Admin::missed")
    });
    out.fig("slots-checked", expected.len());
    out.invariants(&report);
    out.require(worst <= chrono_ms(10_000), || {
        format!("resumed only after {}", secs_f(worst))
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

fn overrun(sc: &mut Sc) -> Outcome {
    let run_for = if sc.h.quick { 20 } else { 60 };
    let policies = ["skip", "allow", "buffer_one", "replace"];
    let mut out = Outcome::new(
        "skip: one run at a time, overlapping slots recorded skipped; allow: runs overlap, every slot finished before the stop succeeded; buffer_one: one run at a time, at most one waiting, superseded slots skipped; replace: one run at a time, every replaced run told (`lost`) and none accepted; (a)-(e)",
    );
    let nodes = sc.spawn_many(
        2,
        &with_common(&[
            "--jobs",
            "4",
            "--cron",
            "*/2 * * * * *",
            "--work-ms",
            "5000",
            "--overlap",
            &policies.join(","),
        ]),
    );
    let from = Utc::now() + chrono_ms(1_000);
    let pool = sc.pool();
    let sample = format!(
        "SELECT job_name, count(*) FROM \"{}\".job_runs \
         WHERE status = 'pending' AND next_attempt_at IS NULL GROUP BY job_name",
        sc.schema
    );
    let mut waiting: BTreeMap<String, i64> = BTreeMap::new();
    let until = Instant::now() + secs(run_for);
    while Instant::now() < until {
        let rows: Vec<(String, i64)> =
            sc.h.rt
                .block_on(sqlx::query_as(sqlx::AssertSqlSafe(sample.clone())).fetch_all(&pool))
                .expect("sample");
        for (job, n) in rows {
            let max = waiting.entry(job).or_insert(0);
            *max = (*max).max(n);
        }
        sleep(Duration::from_millis(400));
    }
    let stop_at = Utc::now();
    let to = stop_at - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    sc.h.rt.block_on(pool.close());
    let names = job_names(4);
    let expected = expect(&names, &every(from, to, 2));
    let (report, runs, effects) = sc.check(&expected);
    let (_, now) = sc.runs();
    for (job, policy) in names.iter().zip(policies) {
        let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.key.job == *job).collect();
        let concurrency = max_concurrency(mine.iter().copied(), now);
        let count = |f: &dyn Fn(&RunRecord) -> bool| mine.iter().filter(|r| f(r)).count();
        let succeeded = count(&|r| r.status == RunStatus::Succeeded);
        let skipped = count(&|r| r.status == RunStatus::Skipped);
        let replaced = count(&|r| {
            r.status == RunStatus::Abandoned
                && r.error_message.as_deref() == Some("replaced by a newer slot")
        });
        let superseded =
            count(&|r| r.error_message.as_deref() == Some("overlap: superseded by a newer slot"));
        let max_waiting = waiting.get(job).copied().unwrap_or(0);
        out.fig(
            policy,
            format!(
                "rows:{} succeeded:{succeeded} skipped:{skipped} superseded:{superseded} replaced:{replaced} max-concurrent:{concurrency} max-waiting:{max_waiting}",
                mine.len()
            ),
        );
        match policy {
            "allow" => {
                out.require(concurrency >= 2, || {
                    format!("allow: runs never overlapped ({concurrency})")
                });
                let cut = stop_at - chrono_ms(5_000 + 1_500);
                let unfinished = mine
                    .iter()
                    .filter(|r| r.key.scheduled_at < cut && r.key.scheduled_at >= from)
                    .filter(|r| r.status != RunStatus::Succeeded)
                    .count();
                out.require(unfinished == 0, || {
                    format!("allow: {unfinished} slots finished before the stop did not succeed")
                });
            }
            _ => out.require(concurrency == 1, || {
                format!("{policy}: {concurrency} runs at once")
            }),
        }
        match policy {
            "skip" => out.require(skipped >= 1, || "skip: nothing skipped".into()),
            "buffer_one" => {
                out.require(max_waiting <= 1, || {
                    format!("buffer_one: {max_waiting} slots waiting at once")
                });
                out.require(superseded >= 1, || "buffer_one: nothing superseded".into());
            }
            "replace" => {
                out.require(replaced >= 1, || "replace: nothing replaced".into());
                out.require(succeeded == 0, || {
                    format!("replace: {succeeded} runs longer than the interval succeeded")
                });
                for r in mine.iter().filter(|r| {
                    r.status == RunStatus::Abandoned
                        && r.error_message.as_deref() == Some("replaced by a newer slot")
                }) {
                    let token = r.attempts.last().map(|a| a.token).unwrap_or(r.token);
                    let started = effects
                        .iter()
                        .any(|e| e.kind == "start" && e.token == token);
                    let told = effects.iter().any(|e| e.kind == "lost" && e.token == token);
                    out.require(!started || told, || {
                        format!(
                            "replace: the replaced run of {} was never told",
                            slot_name(r.key.scheduled_at)
                        )
                    });
                }
            }
            _ => {}
        }
    }
    out.invariants(&report);
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

fn retries(sc: &mut Sc) -> Outcome {
    let slots = if sc.h.quick { 3 } else { 10 };
    let callers = 8;
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
    out.require(chosen.len() == slots, || {
        format!("only {} failed slots to retry", chosen.len())
    });
    let backends: Vec<_> = (0..callers).map(|_| sc.backend(1)).collect();
    let (mut accepted, mut refused, mut errors) = (0, 0, Vec::new());
    let mut per_slot_accepted = Vec::new();
    for slot in &chosen {
        let answers = sc.h.rt.block_on(async {
            let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(callers));
            let tasks: Vec<_> = backends
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let admin = Admin::new(b.clone());
                    let barrier = std::sync::Arc::clone(&barrier);
                    let slot = *slot;
                    tokio::spawn(async move {
                        barrier.wait().await;
                        admin
                            .retry(
                                "job000",
                                slot,
                                "",
                                &ChangeRequest::new(format!("sg-faults-{i}"), "retry race"),
                            )
                            .await
                    })
                })
                .collect();
            let mut answers = Vec::new();
            for t in tasks {
                answers.push(t.await.expect("retry task"));
            }
            answers
        });
        let ok = answers.iter().filter(|a| a.is_ok()).count();
        per_slot_accepted.push(ok);
        accepted += ok;
        for a in &answers {
            match a {
                Ok(_) => {}
                Err(AdminError::Refused { .. }) => refused += 1,
                Err(e) => errors.push(e.to_string()),
            }
        }
    }
    for b in &backends {
        sc.h.rt.block_on(b.close());
    }
    // Each accepted retry is claimed within one recovery poll.
    let deadline = Instant::now() + secs(15);
    let retried: BTreeSet<String> = chosen.iter().map(|t| slot_name(*t)).collect();
    let mut took = Duration::ZERO;
    let started = Instant::now();
    loop {
        let (runs, _) = sc.runs();
        let done = runs
            .iter()
            .filter(|r| retried.contains(&slot_name(r.key.scheduled_at)))
            .filter(|r| r.status == RunStatus::Succeeded)
            .count();
        if done == chosen.len() {
            took = started.elapsed();
            break;
        }
        if Instant::now() > deadline {
            out.failures.push(format!(
                "only {done} of {} retried slots succeeded",
                chosen.len()
            ));
            break;
        }
        sleep(Duration::from_millis(100));
    }
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
    out.fig("concurrent-calls", callers);
    out.fig("accepted", accepted);
    out.fig("refused", refused);
    out.fig("retry-to-success", format!("{:.2}s", took.as_secs_f64()));
    out.invariants(&report);
    out.require(per_slot_accepted.iter().all(|n| *n == 1), || {
        format!("accepted per slot: {per_slot_accepted:?}")
    });
    out.require(errors.is_empty(), || format!("errors: {errors:?}"));
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

fn catchup(sc: &mut Sc) -> Outcome {
    let down_for = if sc.h.quick { 6 } else { 20 };
    let rate = 20.0;
    let mut out = Outcome::new(
        "all: every missed slot runs once (catch_up) at no more than rate + 1 starts per second; latest: only the newest missed slot runs; skip: none runs and Admin::missed lists them all; (a)-(e)",
    );
    let args = with_common(&[
        "--jobs",
        "3",
        "--work-ms",
        "50",
        "--catch-up",
        "all:600:1000,latest,skip",
        "--catch-up-rate",
        "20",
    ]);
    let Outage {
        from,
        down,
        nodes,
        mut unclean,
    } = full_outage(sc, &args, down_for);
    let back = Utc::now();
    sleep(secs((down_for as f64 / rate) as u64 + 4));
    let to = Utc::now() - chrono_ms(1_000);
    unclean += stop_all(nodes);
    let names = job_names(3);
    let (runs, _) = sc.runs();
    let all = every(from, to, 1);
    let mut expected = BTreeSet::new();
    let mut caught_up_starts: Vec<DateTime<Utc>> = Vec::new();
    let mut gaps = Vec::new();
    for (job, policy) in names.iter().zip(["all", "latest", "skip"]) {
        let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.key.job == *job).collect();
        let watermark = mine
            .iter()
            .filter(|r| r.key.scheduled_at <= down)
            .map(|r| r.key.scheduled_at)
            .max();
        let resumed = mine
            .iter()
            .filter(|r| r.trigger == Trigger::Schedule && r.key.scheduled_at > down)
            .map(|r| r.key.scheduled_at)
            .min();
        let (Some(watermark), Some(resumed)) = (watermark, resumed) else {
            out.failures
                .push(format!("{job}: no rows before or after the outage"));
            continue;
        };
        let gap: Vec<_> = every(watermark + chrono_ms(1_000), resumed - chrono_ms(1_000), 1);
        gaps.push(gap.len());
        let catch_up: Vec<&RunRecord> = mine
            .iter()
            .copied()
            .filter(|r| r.trigger == Trigger::CatchUp)
            .collect();
        let gap_set: BTreeSet<_> = gap.iter().copied().collect();
        match policy {
            "all" => {
                expected.extend(expect(std::slice::from_ref(job), &all));
                let ok = catch_up
                    .iter()
                    .filter(|r| gap_set.contains(&r.key.scheduled_at))
                    .filter(|r| r.status == RunStatus::Succeeded && r.attempt == 1)
                    .count();
                out.require(ok == gap.len() && catch_up.len() == gap.len(), || {
                    format!(
                        "all: {ok} of {} missed slots caught up ({} catch-up rows)",
                        gap.len(),
                        catch_up.len()
                    )
                });
                caught_up_starts.extend(
                    catch_up
                        .iter()
                        .filter_map(|r| r.attempts.first().map(|a| a.started_at)),
                );
                out.fig("all", format!("missed:{} caught-up:{ok}", gap.len()));
            }
            "latest" => {
                let kept: Vec<_> = all
                    .iter()
                    .copied()
                    .filter(|t| !gap_set.contains(t))
                    .collect();
                expected.extend(expect(std::slice::from_ref(job), &kept));
                let newest = gap.last().copied();
                out.require(
                    catch_up.len() == 1
                        && catch_up[0].key.scheduled_at == newest.unwrap_or(watermark)
                        && catch_up[0].status == RunStatus::Succeeded,
                    || {
                        format!(
                            "latest: catch-up rows {:?}, newest missed {newest:?}",
                            catch_up
                                .iter()
                                .map(|r| (r.key.scheduled_at, r.status))
                                .collect::<Vec<_>>()
                        )
                    },
                );
                let others = mine
                    .iter()
                    .filter(|r| gap_set.contains(&r.key.scheduled_at))
                    .count();
                out.require(others == 1, || {
                    format!("latest: {others} rows in the gap (want 1)")
                });
                out.fig(
                    "latest",
                    format!("missed:{} ran:{}", gap.len(), catch_up.len()),
                );
            }
            _ => {
                let kept: Vec<_> = all
                    .iter()
                    .copied()
                    .filter(|t| !gap_set.contains(t))
                    .collect();
                expected.extend(expect(std::slice::from_ref(job), &kept));
                out.require(catch_up.is_empty(), || {
                    format!("skip: {} catch-up rows", catch_up.len())
                });
                let backend = sc.backend(1);
                let listed =
                    sc.h.rt
                        .block_on(Admin::new(backend.clone()).missed(
                            job,
                            watermark + chrono_ms(1),
                            resumed,
                        ))
                        .map(|m| m.len());
                sc.h.rt.block_on(backend.close());
                out.require(listed.as_ref().is_ok_and(|n| *n == gap.len()), || {
                    format!(
                        "skip: Admin::missed listed {listed:?} of {} missed slots",
                        gap.len()
                    )
                });
                out.fig(
                    "skip",
                    format!(
                        "missed:{} ran:{} listed-by-missed:{}",
                        gap.len(),
                        catch_up.len(),
                        listed.unwrap_or(0)
                    ),
                );
            }
        }
    }
    caught_up_starts.sort();
    let mut burst = 0;
    for (i, t) in caught_up_starts.iter().enumerate() {
        let n = caught_up_starts[i..]
            .iter()
            .take_while(|u| **u < *t + chrono_ms(1_000))
            .count();
        burst = burst.max(n);
    }
    let span = match (caught_up_starts.first(), caught_up_starts.last()) {
        (Some(_), Some(last)) => *last - back,
        _ => chrono::Duration::zero(),
    };
    let (report, _, _) = sc.check(&expected);
    out.fig("downtime", format!("{down_for}s"));
    out.fig("catch-up-done-after-restart", secs_f(span));
    out.fig("catch-up-max-starts-per-1s", burst);
    out.invariants(&report);
    out.require(burst <= rate as usize + 1, || {
        format!("{burst} catch-up starts within one second at rate {rate}")
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

/// A cluster that ran 3 s, was stopped whole for `down_for` seconds and started again.
struct Outage {
    /// The first whole second of the run worth checking.
    from: DateTime<Utc>,
    /// When the last replica had stopped.
    down: DateTime<Utc>,
    /// The replicas started after the outage, ready.
    nodes: Vec<Node>,
    /// Replicas that did not exit cleanly when stopped.
    unclean: usize,
}

/// Three replicas on `args` for 3 s, all stopped (SIGTERM) for `down_for` seconds, three started
/// again.
fn full_outage(sc: &Sc, args: &[String], down_for: u64) -> Outage {
    let nodes = sc.spawn_many(3, args);
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(3));
    let unclean = stop_all(nodes);
    let down = Utc::now();
    sleep(secs(down_for));
    let nodes = sc.spawn_many(3, args);
    Outage {
        from,
        down,
        nodes,
        unclean,
    }
}

fn skew(sc: &mut Sc) -> Outcome {
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

fn clockjump(sc: &mut Sc) -> Outcome {
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
    let mut by_owner: BTreeMap<String, (usize, chrono::Duration)> = BTreeMap::new();
    let mut off_time = 0;
    for run in &runs {
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
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

fn proxied(sc: &mut Sc) -> Outcome {
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
    let proxy = &proxies[0];
    let pid = nodes[0].pid();
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(2));
    let latency = sc.rng.ms(100, 250);
    let since = slot_name(Utc::now());
    if let Err(e) = wait_effect(&sc.ledger, secs(30), |e| {
        e.kind == "start" && e.pid == pid && e.slot > since
    }) {
        out.failures.push(format!("px never won a tick: {e}"));
    }
    let latency_from = Utc::now();
    proxy.set(Mode::Latency(latency));
    sleep(secs(4));
    proxy.set(Mode::Pass);
    let latency_to = Utc::now();
    sleep(secs(2));
    let blackhole = Duration::from_millis(STALE_MS) + sc.rng.ms(1_000, 2_500);
    // While `px` runs slots: claims go in one batch per tick, so it holds a whole tick or none.
    let since = slot_name(Utc::now());
    if let Err(e) = wait_effect(&sc.ledger, secs(30), |e| {
        e.kind == "start" && e.pid == pid && e.slot > since
    }) {
        out.failures.push(format!("px never won a tick: {e}"));
    }
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
    let healed = Utc::now();
    // It wins a tick again (a third of them, on average) once its connections are back.
    let since = slot_name(healed);
    let resumed = wait_effect(&sc.ledger, secs(30), |e| {
        e.kind == "start" && e.pid == pid && e.slot > since
    })
    .ok()
    .map(|_| Utc::now() - healed);
    sleep(Duration::from_millis(STALE_MS) + secs(2));
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    let resets = proxy.resets();
    drop(proxies);
    let expected = expect(&job_names(4), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);
    let mine: Vec<_> = runs
        .iter()
        .flat_map(|r| r.attempts.iter().map(move |a| (r, a)))
        .filter(|(_, a)| a.owner == "px")
        .collect();
    let in_window = |a: DateTime<Utc>, b: DateTime<Utc>| {
        mine.iter()
            .filter(|(_, x)| x.started_at >= a && x.started_at < b)
            .count()
    };
    let taken = mine
        .iter()
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
    let after = in_window(healed, Utc::now());
    let completed_under_latency = mine
        .iter()
        .filter(|(_, a)| a.status == RunStatus::Succeeded)
        .filter(|(_, a)| {
            a.finished_at
                .is_some_and(|f| f >= latency_from && f < latency_to)
        })
        .count();
    out.fig("latency", format!("{}ms", latency.as_millis()));
    out.fig(
        "runs-started-under-latency",
        in_window(latency_from, latency_to),
    );
    out.fig("completed-under-latency", completed_under_latency);
    out.fig("blackhole", format!("{:.2}s", blackhole.as_secs_f64()));
    out.fig("runs-started-in-blackhole", in_window(hole_from, hole_to));
    out.fig("attempts-taken-over", taken);
    let told = effects
        .iter()
        .filter(|e| e.kind == "lost" && e.pid == pid)
        .count();
    out.fig("told-lost", told);
    out.fig("late-completions-refused", refused);
    out.fig("connections-reset", resets);
    out.fig("runs-after-healing", after);
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
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

fn pool(sc: &mut Sc) -> Outcome {
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
    // Then every connection slot of the server is taken for longer than the stale threshold: the
    // replicas have only the connection their pool already holds.
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
    sleep(Duration::from_millis(STALE_MS) + secs(2));
    sc.h.rt.block_on(async {
        use sqlx::Connection;
        for c in hogs {
            let _ = c.close().await;
        }
    });
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
    let peak = ["n0", "n1"]
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
        .unwrap_or(0);
    out.fig("slots", expected.len());
    out.fig("server-connections-hogged", hogged);
    out.fig(
        "hogged-for",
        format!(
            "{:.1}s",
            (Duration::from_millis(STALE_MS) + secs(2)).as_secs_f64()
        ),
    );
    let slowest = runs
        .iter()
        .flat_map(|r| &r.attempts)
        .filter(|a| a.status == RunStatus::Succeeded)
        .filter_map(|a| a.finished_at.map(|f| f - a.started_at))
        .max()
        .unwrap_or_default();
    out.fig("peak-open-attempts-per-replica", peak);
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
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

// ---------------------------------------------------------------------------------------------

fn run_scenario(h: &Harness, name: &str) -> Outcome {
    let schema = format!("sgf_{name}");
    let dir = tempfile::Builder::new()
        .prefix(&format!("sg-faults-{name}-"))
        .tempdir()
        .expect("tempdir");
    let ledger = ledger_in(dir.path());
    let mut sc = Sc {
        h,
        schema,
        dir,
        ledger,
        rng: Rng::new(h.seed, name),
        killed: BTreeMap::new(),
        shared: RefCell::default(),
    };
    match name {
        "race" => race(&mut sc),
        "kill9" => kill9(&mut sc),
        "sigstop" => sigstop(&mut sc),
        "terminate" => terminate(&mut sc),
        "restart" => restart(&mut sc),
        "overrun" => overrun(&mut sc),
        "retries" => retries(&mut sc),
        "catchup" => catchup(&mut sc),
        "skew" => skew(&mut sc),
        "clockjump" => clockjump(&mut sc),
        "catchupkill" => catchup_kill::catchupkill(&mut sc),
        "proxy" => proxied(&mut sc),
        "pool" => pool(&mut sc),
        "dst" => dst::dst(&mut sc),
        "rolling" => rolling::rolling(&mut sc),
        "busykill" => busy::busykill(&mut sc),
        "busystop" => busy::busystop(&mut sc),
        "locksession" => lock_session::locksession(&mut sc),
        "tickrestart" => tick_restart::tickrestart(&mut sc),
        "spread" => busy::spread(&mut sc),
        "redisrows" => redis::redisrows(&mut sc),
        "redislock" => redis::redislock(&mut sc),
        "redisrestart" => redis::redisrestart(&mut sc),
        other => unreachable!("unknown scenario {other}"),
    }
}

/// `sg-node` next to this binary; rebuilt first when this one was started by cargo.
fn find_node() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let dir = exe.parent().ok_or("no directory for this binary")?;
    let node = dir.join("sg-node");
    if let Ok(cargo) = std::env::var("CARGO") {
        let mut build = Command::new(cargo);
        build.args(["build", "-q", "--bin", "sg-node", "--manifest-path"]);
        build.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"));
        if dir.file_name().is_some_and(|d| d == "release") {
            build.arg("--release");
        }
        let status = build.status().map_err(|e| format!("cargo build: {e}"))?;
        if !status.success() {
            return Err("cargo build --bin sg-node failed".into());
        }
    }
    if node.exists() {
        Ok(node)
    } else {
        Err(format!(
            "{} not found: build it (cargo build -p slotguard-process-tests --bins) or pass --node",
            node.display()
        ))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.list {
        for (name, what) in SCENARIOS {
            println!("{name:<10} {what}");
        }
        return ExitCode::SUCCESS;
    }
    let names: Vec<&str> = if cli.scenario == "all" {
        SCENARIOS.iter().map(|(n, _)| *n).collect()
    } else {
        let mut names = Vec::new();
        for wanted in cli.scenario.split(',').map(str::trim) {
            match SCENARIOS.iter().find(|(n, _)| *n == wanted) {
                Some((n, _)) => names.push(*n),
                None => {
                    eprintln!("sg-faults: unknown scenario `{wanted}`; --list shows them");
                    return ExitCode::from(2);
                }
            }
        }
        names
    };
    let node = match cli.node.clone().map_or_else(find_node, Ok) {
        Ok(node) => node,
        Err(e) => {
            eprintln!("sg-faults: {e}");
            return ExitCode::from(2);
        }
    };
    let cluster = match std::panic::catch_unwind(Cluster::start) {
        Ok(Some(cluster)) => cluster,
        Ok(None) => {
            eprintln!(
                "sg-faults: cannot start a throwaway PostgreSQL cluster: no initdb under /usr/lib/postgresql/*/bin"
            );
            return ExitCode::from(2);
        }
        Err(_) => {
            eprintln!(
                "sg-faults: cannot start a throwaway PostgreSQL cluster: initdb or pg_ctl failed (see above)"
            );
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let h = Harness {
        rt,
        cluster,
        node,
        quick: cli.quick,
        replicas: cli.replicas.clamp(2, 12),
        seed: cli.seed,
    };
    println!(
        "sg-faults seed={} quick={} replicas={} cluster=127.0.0.1:{} scenarios={}",
        h.seed,
        h.quick,
        h.replicas,
        h.cluster.port(),
        names.join(",")
    );
    let started = Instant::now();
    let mut failed = Vec::new();
    for name in &names {
        let t = Instant::now();
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run_scenario(&h, name)))
            .unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_else(|| "panicked".into());
                let mut o = Outcome::new("the scenario runs to the end");
                o.failures.push(format!("panicked: {message}"));
                o
            });
        let pass = outcome.failures.is_empty();
        println!(
            "RESULT {name} | {} | pass if: {} | {} | {:.1}s",
            outcome.figures.join(" "),
            outcome.condition,
            if pass { "PASS" } else { "FAIL" },
            t.elapsed().as_secs_f64()
        );
        for f in outcome.failures.iter().take(20) {
            println!("    {name}: {f}");
        }
        if outcome.failures.len() > 20 {
            println!("    {name}: ... {} more", outcome.failures.len() - 20);
        }
        if !pass {
            failed.push(*name);
        }
    }
    println!(
        "sg-faults: {} scenarios, {} failed{}, {:.1}s in all",
        names.len(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(" ({})", failed.join(","))
        },
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
