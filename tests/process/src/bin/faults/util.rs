//! What the scenarios share: the replicas' default settings, small helpers for time and arguments,
//! and the set-ups and measures that several scenarios use (a steady run, a full outage, the
//! executions a `kill -9` interrupted).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use slotguard::store::{RunRecord, RunStatus};
use slotguard_process_tests::invariants::{every, expect, slot_name};
use slotguard_process_tests::{Effect, Node, read_ledger};

use crate::sc::Sc;

/// Settings every replica gets unless a scenario says otherwise.
pub(crate) const STALE_MS: u64 = 2_000;
pub(crate) const COMMON: &[&str] = &[
    "--stale-ms",
    "2000",
    "--recovery-ms",
    "300",
    "--grace-ms",
    "1000",
];
/// How far past its stale threshold a `running` row may be when checked.
pub(crate) const GRACE: Duration = Duration::from_secs(3);

pub(crate) fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

pub(crate) fn with_common(args: &[&str]) -> Vec<String> {
    let mut v = strings(args);
    v.extend(strings(COMMON));
    v
}

pub(crate) fn job_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("job{i:03}")).collect()
}

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub(crate) fn sleep(d: Duration) {
    std::thread::sleep(d);
}

pub(crate) fn sleep_until(at: DateTime<Utc>) {
    if let Ok(d) = (at - Utc::now()).to_std() {
        sleep(d);
    }
}

pub(crate) fn chrono_ms(ms: i64) -> chrono::Duration {
    chrono::Duration::milliseconds(ms)
}

/// The first whole second after `t`.
pub(crate) fn next_second(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(t.timestamp() + 1, 0).expect("in range")
}

/// Sends SIGTERM to every replica and waits for each; answers how many did not exit cleanly.
pub(crate) fn stop_all(nodes: Vec<Node>) -> usize {
    for node in &nodes {
        node.signal("TERM");
    }
    nodes
        .into_iter()
        .map(|n| n.finish(secs(30)))
        .filter(|(_, ok)| !ok)
        .count()
}

pub(crate) fn wait_effect(
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

/// The `start`s of the ledger `effects` with nothing after them (no `end`, `lost`, `cancelled` or
/// `failed` under the same token): the bodies running now, unless their process died.
pub(crate) fn running_starts(effects: &[Effect]) -> Vec<&Effect> {
    let ended: BTreeSet<i64> = effects
        .iter()
        .filter(|e| e.kind != "start")
        .map(|e| e.token)
        .collect();
    effects
        .iter()
        .filter(|e| e.kind == "start" && !ended.contains(&e.token))
        .collect()
}

pub(crate) fn index(runs: &[RunRecord]) -> BTreeMap<(String, String), &RunRecord> {
    runs.iter()
        .map(|r| ((r.key.job.clone(), slot_name(r.key.scheduled_at)), r))
        .collect()
}

/// The most attempt intervals of `runs` open at one instant (half-open; open attempts end at `now`).
pub(crate) fn max_concurrency<'a>(
    runs: impl Iterator<Item = &'a RunRecord>,
    now: DateTime<Utc>,
) -> usize {
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

pub(crate) fn secs_f(d: chrono::Duration) -> String {
    format!("{:.2}s", d.num_milliseconds() as f64 / 1000.0)
}

/// A run without faults.
pub(crate) struct Steady {
    /// The slots of the jobs, every second, over the steady window: from 1 s after every replica
    /// was ready to 1 s before they were stopped.
    pub(crate) expected: BTreeSet<(String, String)>,
    /// The replicas' process ids, in the order of their instances `n0`, `n1`, ...
    pub(crate) pids: Vec<u32>,
    /// Replicas that did not exit cleanly when stopped.
    pub(crate) unclean: usize,
}

/// `n` replicas on `args` (with `jobs` jobs every second) for `run_for` seconds, then stopped.
pub(crate) fn steady(sc: &Sc, n: usize, args: &[String], jobs: usize, run_for: u64) -> Steady {
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

/// What `kill -9` did to executions: those of the killed processes whose attempt was not accepted.
pub(crate) struct Interrupted {
    pub(crate) count: usize,
    /// Killed after the body ended, before its completion was written.
    pub(crate) after_end: usize,
    /// Never taken over by another attempt (and the run is not `dead`).
    pub(crate) unrecovered: usize,
    /// From each kill to the next attempt of the interrupted run.
    pub(crate) latencies: Vec<chrono::Duration>,
    /// For each of `latencies`: how many other interrupted attempts of the same job started
    /// between the kill and that next attempt. A run waits while another run of its job is
    /// `running` with a fresh heartbeat, so each of them can hold the take-over back until it
    /// goes stale in turn.
    pub(crate) behind: Vec<usize>,
}

impl Interrupted {
    /// The take-overs slower than `stale + 5 s`, plus `stale + 2 s` for each interrupted attempt of
    /// the job it waited behind, as (latency, allowance).
    pub(crate) fn late(
        &self,
        stale: chrono::Duration,
    ) -> Vec<(chrono::Duration, chrono::Duration)> {
        let alone = stale + chrono::Duration::seconds(5);
        let per_wait = stale + chrono::Duration::seconds(2);
        self.latencies
            .iter()
            .zip(&self.behind)
            .map(|(latency, behind)| (*latency, alone + per_wait * (*behind as i32)))
            .filter(|(latency, allowed)| latency > allowed)
            .collect()
    }

    /// The slowest take-over of an attempt that waited behind no other interrupted attempt.
    pub(crate) fn worst_alone(&self) -> chrono::Duration {
        self.latencies
            .iter()
            .zip(&self.behind)
            .filter(|(_, behind)| **behind == 0)
            .map(|(latency, _)| *latency)
            .max()
            .unwrap_or_default()
    }
}

pub(crate) fn interrupted_by(
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
        behind: Vec::new(),
    };
    // (job, when its attempt started) of every interrupted attempt, and (job, kill, next start)
    // of every one taken over.
    let mut started: Vec<(&str, DateTime<Utc>)> = Vec::new();
    let mut taken_over: Vec<(&str, DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    for e in effects.iter().filter(|e| e.kind == "start") {
        let (Some(at), Some((run, i))) = (killed_at.get(&e.pid), by_token.get(&e.token)) else {
            continue;
        };
        if run.attempts[*i].status == RunStatus::Succeeded {
            continue;
        }
        out.count += 1;
        started.push((&run.key.job, run.attempts[*i].started_at));
        if effects
            .iter()
            .any(|x| x.kind == "end" && x.token == e.token)
        {
            out.after_end += 1;
        }
        match run.attempts.get(i + 1) {
            Some(next) => {
                out.latencies.push(next.started_at - *at);
                taken_over.push((&run.key.job, *at, next.started_at));
            }
            None if run.status == RunStatus::Dead => {}
            None => out.unrecovered += 1,
        }
    }
    out.behind = taken_over
        .iter()
        .map(|(job, killed, next)| {
            started
                .iter()
                .filter(|(j, at)| j == job && at > killed && at < next)
                .count()
        })
        .collect();
    out
}

/// A cluster that ran 3 s, was stopped whole for `down_for` seconds and started again.
pub(crate) struct Outage {
    /// The first whole second of the run worth checking.
    pub(crate) from: DateTime<Utc>,
    /// When the last replica had stopped.
    pub(crate) down: DateTime<Utc>,
    /// The replicas started after the outage, ready.
    pub(crate) nodes: Vec<Node>,
    /// Replicas that did not exit cleanly when stopped.
    pub(crate) unclean: usize,
}

/// Three replicas on `args` for 3 s, all stopped (SIGTERM) for `down_for` seconds, three started
/// again.
pub(crate) fn full_outage(sc: &Sc, args: &[String], down_for: u64) -> Outage {
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
