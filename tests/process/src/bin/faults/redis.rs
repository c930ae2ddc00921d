//! `redisrows`, `redislock` and `redisrestart`: the jobs' locks in Redis (`slotguard-redis`, a
//! throwaway `redis-server` of the scenario's own, nothing on disk). The first two aim faults at the
//! replica that is running the jobs right now: `kill -9` (then restarted) and `SIGSTOP` past the
//! lease's TTL, in turn; the third kills Redis.
//!
//! - `redisrows`: Redis in front of the PostgreSQL slot rows (level `slot`), the `busy*` set-up;
//!   checked with (a)-(e) over the rows, as without Redis.
//! - `redislock`: Redis alone (level `lock`, no rows, the lease's token in the ledger); checked with
//!   the lease invariants of `slotguard_process_tests::lease` (one execution of a job at a time
//!   unless the earlier holder was stopped and the later one has a higher token; tokens rise), and
//!   every job the faulted replica ran starts again within the lease TTL + 2 s.
//! - `redisrestart`: Redis alone, and the Redis itself killed with `-9` and started again empty after
//!   more than the lease; the same lease invariants, nothing started while it is down, runs resume.

use slotguard_process_tests::lease::{self, Frozen};
use slotguard_process_tests::redis::RedisServer;

use crate::busy::{BUSY_JOBS, BUSY_STALE_MS, blocked_for, busy_args, busy_rounds_on, stop_busy};
use crate::prelude::*;

/// The Redis lease's time to live in these scenarios.
const LEASE_MS: u64 = 1_500;

/// `--lock-store` and `--lease-ms` for `redis`.
fn redis_args(redis: &RedisServer) -> Vec<String> {
    strings(&[
        "--lock-store",
        &format!("redis:{}", redis.url()),
        "--lease-ms",
        &LEASE_MS.to_string(),
    ])
}

pub(crate) fn redisrows(sc: &mut Sc) -> Outcome {
    let rounds = if sc.h.quick { 2 } else { 10 };
    let mut out = Outcome::new(
        "Redis locks in front of PostgreSQL rows (lease 1.5 s, stale 3 s; one fence counter per job in Redis); rounds alternate kill -9 (restarted) and SIGSTOP 5-5.5 s of the replica running job bodies right now (at least half the rounds find one); (a)-(e) over every slot of the run: one execution of a job at a time, at most one accepted completion per slot, every slot recorded",
    );
    let redis = RedisServer::start();
    let mut args = busy_args(960);
    args.extend(redis_args(&redis));
    let (mut kills, mut freezes, mut round) = (Vec::new(), Vec::new(), 0);
    let busy = busy_rounds_on(sc, &mut out, rounds, &args, &mut |sc, _, nodes, i, jobs| {
        let pid = nodes[i].pid();
        round += 1;
        if round % 2 == 1 {
            kills.push((pid, sc.kill(pid)));
            nodes[i] = sc.spawn(&format!("n{i}"), &args);
            sleep(Duration::from_millis(BUSY_STALE_MS) + sc.rng.ms(1_000, 2_000));
        } else {
            freezes.push(stop_busy(sc, pid, jobs));
        }
        true
    });
    let interrupted = interrupted_by(&kills, &busy.runs, &busy.effects);
    let worst = blocked_for(&freezes, &busy.effects)
        .into_iter()
        .map(|(_, g)| g)
        .max();
    out.fig("kills", kills.len());
    out.fig("stops", freezes.len());
    out.fig("interrupted-executions", interrupted.count);
    out.fig("taken-over", interrupted.latencies.len());
    out.fig(
        "stopped-longest-without-a-start",
        worst.map_or("-".into(), secs_f),
    );
    out.invariants(&busy.report);
    out.require(interrupted.unrecovered == 0, || {
        format!(
            "{} interrupted attempts never taken over",
            interrupted.unrecovered
        )
    });
    redis_was_used(&mut out, &redis, BUSY_JOBS);
    out
}

/// `sg-node`'s arguments for Redis alone: no slot store, 5 jobs every second at level `lock`, overlap
/// `skip`, bodies of `work_ms`, one attempt (retries need rows).
fn alone_args(redis: &RedisServer, work_ms: u64) -> Vec<String> {
    let mut args = strings(&[
        "--store",
        "none",
        "--guard",
        "lock",
        "--jobs",
        "5",
        "--cron",
        "* * * * * *",
        "--overlap",
        "skip",
        "--work-ms",
        &work_ms.to_string(),
        "--grace-ms",
        "1000",
        "--max-attempts",
        "1",
    ]);
    args.extend(redis_args(redis));
    args
}

/// Checks that the jobs' locks were Redis's: one fence counter per job.
fn redis_was_used(out: &mut Outcome, redis: &RedisServer, jobs: usize) {
    let counters = redis.count_keys("{slotguard:*}:fence");
    out.fig("redis-fence-counters", counters);
    out.require(counters == jobs, || {
        format!("{counters} fence counters in Redis for {jobs} jobs")
    });
}

/// The jobs a replica of `nodes` is running right now by the ledger (a `start` of the last 1.5 s with
/// no line ending it), by its index, with each job's token; the one running the most.
fn busy_by_ledger(sc: &Sc, nodes: &[Node]) -> Option<(usize, Vec<(String, i64)>)> {
    let effects = read_ledger(&sc.ledger);
    let recent = Utc::now() - chrono_ms(LEASE_MS as i64);
    let ended: BTreeSet<(i64, u32)> = effects
        .iter()
        .filter(|e| e.kind != "start")
        .map(|e| (e.token, e.pid))
        .collect();
    let mut per_node: BTreeMap<usize, Vec<(String, i64)>> = BTreeMap::new();
    for e in effects.iter().filter(|e| e.kind == "start") {
        let open = !ended.contains(&(e.token, e.pid)) && e.at.is_some_and(|at| at > recent);
        if let Some(i) = nodes.iter().position(|n| n.pid() == e.pid).filter(|_| open) {
            per_node
                .entry(i)
                .or_default()
                .push((e.job.clone(), e.token));
        }
    }
    per_node.into_iter().max_by_key(|(_, jobs)| jobs.len())
}

/// A fault of `redislock`: when, and the jobs the replica was running under which tokens.
struct Hit {
    at: DateTime<Utc>,
    jobs: Vec<(String, i64)>,
}

pub(crate) fn redislock(sc: &mut Sc) -> Outcome {
    let rounds = if sc.h.quick { 4 } else { 12 };
    let limit = chrono_ms(LEASE_MS as i64 + 2_000);
    let mut out = Outcome::new(
        "Redis alone (level lock, lease 1.5 s, no rows; one fence counter per job in Redis); rounds alternate kill -9 (restarted) and SIGSTOP 2.5-3 s of the replica running job bodies right now (at least half the rounds find one); every job it ran starts again, with a higher token, within the lease + 2 s; one execution of a job at a time, except a stopped holder overlapped by a higher token (fenced); tokens rise",
    );
    let redis = RedisServer::start();
    let args = alone_args(&redis, 960);
    let (hits, frozen, unclean) = lock_rounds(sc, rounds, &args);
    redis_was_used(&mut out, &redis, 5);

    let effects = read_ledger(&sc.ledger);
    let mut report = Report::default();
    let fenced = lease::check(&mut report, &effects, &sc.killed, &frozen, Utc::now());
    let takeovers = taken_over(&hits, &effects);
    let worst = takeovers.iter().filter_map(|t| *t).max();
    let woken = woken_endings(&frozen, &effects);
    out.fig("rounds", rounds);
    out.fig("kills", sc.killed.len());
    out.fig("stops", frozen.len());
    out.fig("executions", report.executions);
    out.fig("jobs-hit", takeovers.len());
    out.fig("takeover-max", worst.map_or("-".into(), secs_f));
    out.fig("overlaps-fenced-while-stopped", fenced.while_frozen);
    out.fig("woken-told-lost", woken.get("lost").copied().unwrap_or(0));
    out.fig(
        "woken-ended-unaware",
        woken.get("end").copied().unwrap_or(0),
    );
    out.fig("overlapping", report.overlapping);
    out.fig("violations", report.violations.len());
    out.failures.extend(report.violations.iter().cloned());
    out.require(hits.len() * 2 >= rounds, || {
        format!(
            "only {} of {rounds} rounds found a busy replica",
            hits.len()
        )
    });
    let never = takeovers.iter().filter(|t| t.is_none()).count();
    out.require(never == 0, || {
        format!("{never} jobs of a faulted replica never ran again")
    });
    out.require(worst.is_none_or(|w| w <= limit), || {
        format!("a take-over took {}", worst.map_or("-".into(), secs_f))
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

/// Three replicas on `args`; `rounds` times, the busy replica is killed (even rounds, then started
/// again) or stopped for the lease + 1-1.5 s (odd rounds). Answers the faults that hit, the stops,
/// and how many replicas did not exit cleanly at the end.
fn lock_rounds(sc: &mut Sc, rounds: usize, args: &[String]) -> (Vec<Hit>, Vec<Frozen>, usize) {
    let mut nodes = sc.spawn_many(3, args);
    let (mut hits, mut frozen) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let busy = (0..3).find_map(|_| {
            sleep_until(
                next_second(Utc::now())
                    + chrono::Duration::from_std(sc.rng.ms(150, 700)).expect("small"),
            );
            busy_by_ledger(sc, &nodes)
        });
        let Some((i, jobs)) = busy else { continue };
        let pid = nodes[i].pid();
        if round % 2 == 0 {
            let at = sc.kill(pid);
            nodes[i] = sc.spawn(&format!("n{i}"), args);
            hits.push(Hit { at, jobs });
        } else {
            signal(pid, "STOP");
            let from = Utc::now();
            sleep(Duration::from_millis(LEASE_MS + 1_000) + sc.rng.ms(0, 500));
            let to = Utc::now();
            signal(pid, "CONT");
            frozen.push(Frozen { pid, from, to });
            hits.push(Hit { at: from, jobs });
        }
        sleep(Duration::from_millis(LEASE_MS) + secs(1));
    }
    sleep(secs(1));
    let unclean = stop_all(nodes);
    (hits, frozen, unclean)
}

/// For each job a faulted replica ran: how long after the fault the job started again under a
/// higher token (any replica); `None` when it never did.
fn taken_over(hits: &[Hit], effects: &[Effect]) -> Vec<Option<chrono::Duration>> {
    hits.iter()
        .flat_map(|h| h.jobs.iter().map(move |j| (h.at, j)))
        .map(|(at, (job, token))| {
            effects
                .iter()
                .filter(|e| e.kind == "start" && e.job == *job && e.token > *token)
                .filter_map(|e| e.at)
                .filter(|t| *t > at)
                .min()
                .map(|t| t - at)
        })
        .collect()
}

/// How the executions that a stop froze ended once woken, by the kind of their ending line.
fn woken_endings(frozen: &[Frozen], effects: &[Effect]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for f in frozen {
        let open: BTreeSet<i64> = effects
            .iter()
            .filter(|e| e.pid == f.pid && e.kind == "start" && e.at.is_some_and(|at| at <= f.from))
            .map(|e| e.token)
            .collect();
        for e in effects
            .iter()
            .filter(|e| e.pid == f.pid && e.kind != "start")
        {
            if open.contains(&e.token) && e.at.is_some_and(|at| at >= f.to) {
                *out.entry(e.kind.clone()).or_insert(0) += 1;
            }
        }
    }
    out
}

pub(crate) fn redisrestart(sc: &mut Sc) -> Outcome {
    let rounds = if sc.h.quick { 2 } else { 5 };
    let resume_limit = chrono_ms(3_000);
    let mut out = Outcome::new(
        "Redis alone (level lock, lease 1.5 s, bodies of 2.5 s), the Redis (nothing on disk) killed with -9 every 3-4 s and started again empty after the lease + 0.5-1.5 s; no body starts while it is down; the jobs run again within 3 s of its return; one execution of a job at a time; tokens rise across the restarts",
    );
    let mut redis = RedisServer::start();
    // Bodies longer than the tick interval: the lock is held across ticks, so a lock Redis forgot
    // while its holder still works would let another replica in at the next tick.
    let args = alone_args(&redis, 2_500);
    let nodes = sc.spawn_many(3, &args);
    let mut outages = Vec::new();
    for _ in 0..rounds {
        sleep(secs(3) + sc.rng.ms(0, 1_000));
        let down = Utc::now();
        redis.kill9();
        // Down longer than the lease: every holder has been told `lost` before the locks, which the
        // restart forgets, are free again.
        sleep(Duration::from_millis(LEASE_MS + 500) + sc.rng.ms(0, 1_000));
        // Read before the server is started: it can answer no earlier.
        let back = Utc::now();
        redis.restart();
        outages.push((down, back));
    }
    sleep(secs(4));
    let unclean = stop_all(nodes);
    redis_was_used(&mut out, &redis, 5);

    let effects = read_ledger(&sc.ledger);
    let mut report = Report::default();
    lease::check(&mut report, &effects, &BTreeMap::new(), &[], Utc::now());
    let resumed = outage_starts(&mut out, &effects, &outages);
    let worst = resumed
        .iter()
        .map(|r| r.unwrap_or(chrono::Duration::MAX))
        .max();
    out.fig("restarts", outages.len());
    out.fig(
        "down",
        outages
            .iter()
            .map(|(d, u)| secs_f(*u - *d))
            .collect::<Vec<_>>()
            .join("/"),
    );
    out.fig(
        "resumed-after",
        resumed
            .iter()
            .map(|r| r.map_or("never".into(), secs_f))
            .collect::<Vec<_>>()
            .join("/"),
    );
    out.fig("executions", report.executions);
    out.fig("overlapping", report.overlapping);
    out.fig("violations", report.violations.len());
    out.failures.extend(report.violations.iter().cloned());
    out.require(worst.is_some_and(|w| w <= resume_limit), || {
        format!(
            "the jobs did not run again within {} of a restart",
            secs_f(resume_limit)
        )
    });
    out.require(unclean == 0, || {
        format!("{unclean} replicas exited uncleanly")
    });
    out
}

/// Requires that no body of `effects` started during an outage `(down, back)` of Redis (from 100 ms
/// after the kill: a lock granted just before it may start its body a moment after); answers, per
/// outage, how long after `back` the first body started.
fn outage_starts(
    out: &mut Outcome,
    effects: &[Effect],
    outages: &[(DateTime<Utc>, DateTime<Utc>)],
) -> Vec<Option<chrono::Duration>> {
    let starts: Vec<&Effect> = effects.iter().filter(|e| e.kind == "start").collect();
    let mut resumed = Vec::new();
    for (down, up) in outages {
        for e in &starts {
            out.require(
                e.at.is_none_or(|t| t <= *down + chrono_ms(100) || t >= *up),
                || {
                    format!(
                        "{} {} (pid {}, token {}) started {} after Redis went down, {} before it was back",
                        e.job,
                        e.slot,
                        e.pid,
                        e.token,
                        e.at.map_or("-".into(), |t| secs_f(t - *down)),
                        e.at.map_or("-".into(), |t| secs_f(*up - t)),
                    )
                },
            );
        }
        let first = starts.iter().filter_map(|e| e.at).filter(|t| t >= up).min();
        resumed.push(first.map(|t| t - *up));
    }
    resumed
}
