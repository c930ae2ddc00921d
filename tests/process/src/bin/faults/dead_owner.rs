//! `deadowner` (issue 27, point 3): after `kill -9` of the replica running the jobs' bodies, how
//! many ticks of each job are recorded `skipped` by overlap behind the dead process's run, and how
//! long until the job runs again. The set-up of `busykill`: 3 replicas, 5 jobs every second at
//! `slot`, overlap `skip`, bodies of 960 ms, stale 3 s, recovery poll 0.5 s. Before the backend
//! noticed gone owners (presence, `backends/postgres/src/presence.rs`) the job waited out the stale
//! threshold: 2-3 ticks skipped per kill and job. Required now: never 3 (no kill-job waits out the
//! threshold); the goal, at most one, is reported (a `note:`).

use slotguard::store::AttemptRecord;
use slotguard::store::rules::reason::SKIPPED_OVERLAP;

use crate::busy::{BUSY_STALE_MS, busy_args, busy_rounds};
use crate::prelude::*;

/// How many kills. The scenario runs in the full set only (not marked quick), at one size.
const ROUNDS: usize = 6;

/// One `kill -9` of the busy replica.
struct Kill {
    /// The replica's instance name: the owner of its attempts (its restart keeps the name).
    instance: String,
    /// The killed process.
    pid: u32,
    /// When the signal had been sent (read after it).
    at: DateTime<Utc>,
    /// The heartbeat of every `running` row the instance owned, by fencing token, read right
    /// after the kill (a take-over later writes a new one).
    heartbeats: BTreeMap<i64, Option<DateTime<Utc>>>,
}

/// The attempts the kills interrupted and their later attempts, by fencing token, each with the
/// index of its kill.
struct Who {
    /// The attempts that were running in a killed process.
    dead: BTreeMap<i64, usize>,
    /// The later attempts of their runs (the take-overs).
    retry: BTreeMap<i64, usize>,
}

/// What an overlap skip was recorded behind: the job's attempt that was running (store clock)
/// when the skip was written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Behind {
    /// An attempt of a process killed before the skip, whose slot's instant is after the kill.
    Dead(usize),
    /// A later attempt (the retry) of a run that a kill interrupted; its process was alive.
    Retry(usize),
    /// Any other attempt; its process was alive.
    Live,
    /// No attempt of the job was running then.
    Nothing,
}

/// One job whose attempt a kill interrupted.
struct Pair {
    /// The kill's index.
    kill: usize,
    /// The job.
    job: String,
    /// Slots of the job recorded `skipped` behind the dead attempt.
    dead_skips: usize,
    /// Slots recorded `skipped` behind the interrupted run's later attempts.
    retry_skips: usize,
    /// The dead attempt's heartbeat age at the kill, when it was read.
    heartbeat_age: Option<chrono::Duration>,
    /// From the kill to the job's next ledger `start` (any slot, any replica).
    next_start: Option<chrono::Duration>,
    /// From the kill to the interrupted run's next attempt.
    recovery: Option<chrono::Duration>,
    /// Taken over by a later attempt, or ended for good.
    recovered: bool,
}

/// Most ticks a job may skip behind a dead owner: the tick of the second the kill fell in may find
/// its heartbeat younger than half the threshold, and the next one may race the look for gone
/// owners; waiting out the whole threshold skips [`WAITED_OUT`].
const MOST_SKIPS: usize = 2;

/// The skips per kill and job when the threshold is waited out (stale 3 s, a tick every second).
const WAITED_OUT: usize = 3;

/// [`ROUNDS`] kills of the busy replica on the `busykill` set-up; counts the overlap skips behind
/// each interrupted attempt and times the job's next start, and requires (a)-(e), every
/// interrupted attempt taken over, and at most [`MOST_SKIPS`] skips behind each.
pub(crate) fn deadowner(sc: &mut Sc) -> Outcome {
    let mut out = Outcome::new(
        "each round kill -9 hits the replica that runs job bodies right now, which is restarted (at least half the rounds find one); at least one attempt interrupted; every interrupted attempt taken over by a later attempt; at most 2 ticks per kill and job skipped behind the dead owner (3: the stale threshold waited out); (a)-(e) over every slot of the run. Reported: the goal of issue 27 point 3, at most 1",
    );
    let args = busy_args(960);
    let (mut kills, mut running) = (Vec::new(), Vec::new());
    let busy = busy_rounds(sc, &mut out, ROUNDS, &mut |sc, pool, nodes, i, jobs| {
        running.push(jobs.len());
        kills.push(kill_restart(sc, pool, nodes, i, &args));
        true
    });
    let who = who(&kills, &busy.runs, &busy.effects);
    let skips = overlap_skips(&busy.runs, &busy.expected, &kills, &who);
    let pairs = pairs(&kills, &who, &busy.runs, &busy.effects, &skips);
    out.fig("bodies-running-in-killed-replica", format!("{running:?}"));
    out.fig("interrupted-attempts", who.dead.len());
    figures(&mut out, &pairs, &skips);
    out.invariants(&busy.report);
    out.require(!pairs.is_empty(), || {
        "no kill interrupted an attempt".into()
    });
    out.failures.extend(failures(&kills, &pairs));
    out.notes.push(goal(&pairs));
    out.notes.extend(per_kill(&kills, &pairs));
    out
}

/// What went wrong per kill and job: more than [`MOST_SKIPS`] ticks skipped behind the dead owner,
/// or the interrupted attempt never taken over.
fn failures(kills: &[Kill], pairs: &[Pair]) -> Vec<String> {
    let mut out = Vec::new();
    for p in pairs {
        let kill = &kills[p.kill];
        let at = kill.at.format("%H:%M:%S%.3f");
        let killed = format!("the kill of {} (pid {}) at {at}", kill.instance, kill.pid);
        if p.dead_skips > MOST_SKIPS {
            out.push(format!(
                "{}: {} ticks skipped behind the attempt interrupted by {killed} ({WAITED_OUT}: the stale threshold waited out)",
                p.job, p.dead_skips
            ));
        }
        if !p.recovered {
            out.push(format!(
                "{}: the attempt interrupted by {killed} was never taken over",
                p.job
            ));
        }
    }
    out
}

/// `kill -9` of `nodes[i]`; reads the heartbeats of its `running` rows, starts it again under its
/// name, then waits stale + 1-2 s while newer slots fall due, the killed rows go stale and are
/// taken over.
fn kill_restart(
    sc: &mut Sc,
    pool: &sqlx::PgPool,
    nodes: &mut [Node],
    i: usize,
    args: &[String],
) -> Kill {
    let instance = format!("n{i}");
    let pid = nodes[i].pid();
    let at = sc.kill(pid);
    let sql = format!(
        "SELECT fencing_token, heartbeat_at FROM \"{}\".job_runs \
         WHERE status = 'running' AND owner = $1",
        sc.schema
    );
    let rows: Vec<(i64, Option<DateTime<Utc>>)> =
        sc.h.rt
            .block_on(
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(&instance)
                    .fetch_all(pool),
            )
            .unwrap_or_default();
    nodes[i] = sc.spawn(&instance, args);
    sleep(Duration::from_millis(BUSY_STALE_MS) + sc.rng.ms(1_000, 2_000));
    Kill {
        instance,
        pid,
        at,
        heartbeats: rows.into_iter().collect(),
    }
}

/// The attempts each kill interrupted: the killed instance's attempts that were running at the
/// kill (store clock), started after the instance's previous kill, and whose body, if the ledger
/// has its `start` (under the attempt's token), ran in the killed process. Their runs' later
/// attempts are the retries.
fn who(kills: &[Kill], runs: &[RunRecord], effects: &[Effect]) -> Who {
    let pid_of: BTreeMap<i64, u32> = effects
        .iter()
        .filter(|e| e.kind == "start")
        .map(|e| (e.token, e.pid))
        .collect();
    let mut who = Who {
        dead: BTreeMap::new(),
        retry: BTreeMap::new(),
    };
    for (k, kill) in kills.iter().enumerate() {
        let since = kills[..k]
            .iter()
            .filter(|p| p.instance == kill.instance)
            .map(|p| p.at)
            .max();
        for run in runs {
            for (i, a) in run.attempts.iter().enumerate() {
                let running = running_at(a, kill.at) && since.is_none_or(|s| a.started_at > s);
                let ours = pid_of.get(&a.token).is_none_or(|pid| *pid == kill.pid);
                if a.owner == kill.instance && running && ours {
                    who.dead.insert(a.token, k);
                    let later = run.attempts[i + 1..].iter().map(|b| (b.token, k));
                    who.retry.extend(later);
                }
            }
        }
    }
    who
}

/// Whether attempt `a` was open at `at` (store clock): started, not yet ended.
fn running_at(a: &AttemptRecord, at: DateTime<Utc>) -> bool {
    a.started_at <= at && a.finished_at.is_none_or(|f| f > at)
}

/// The slots of the window recorded `skipped` with the overlap reason, each with what it was
/// recorded behind.
fn overlap_skips<'r>(
    runs: &'r [RunRecord],
    expected: &BTreeSet<(String, String)>,
    kills: &[Kill],
    who: &Who,
) -> Vec<(&'r RunRecord, Behind)> {
    runs.iter()
        .filter(|r| r.status == RunStatus::Skipped)
        .filter(|r| r.error_message.as_deref() == Some(SKIPPED_OVERLAP))
        .filter(|r| expected.contains(&(r.key.job.clone(), slot_name(r.key.scheduled_at))))
        .map(|r| (r, behind(r, runs, kills, who)))
        .collect()
}

/// What `skip` was recorded behind: the attempts of its job and partition open when the row was
/// written (`created_at`, the claim statement's time). A dead one wins over a live one.
fn behind(skip: &RunRecord, runs: &[RunRecord], kills: &[Kill], who: &Who) -> Behind {
    let at = skip.created_at;
    let open = runs
        .iter()
        .filter(|r| r.id != skip.id && r.key.job == skip.key.job)
        .filter(|r| r.key.partition == skip.key.partition)
        .flat_map(|r| &r.attempts)
        .filter(|a| running_at(a, at));
    let mut found = Behind::Nothing;
    for a in open {
        let dead = who.dead.get(&a.token).copied();
        if let Some(k) = dead.filter(|k| kills[*k].at <= at && kills[*k].at < skip.key.scheduled_at)
        {
            return Behind::Dead(k);
        }
        found = match (who.retry.get(&a.token), found) {
            (Some(k), _) => Behind::Retry(*k),
            (None, Behind::Nothing) => Behind::Live,
            (None, other) => other,
        };
    }
    found
}

/// One [`Pair`] per attempt a kill interrupted, with the skips behind it and its timings.
fn pairs(
    kills: &[Kill],
    who: &Who,
    runs: &[RunRecord],
    effects: &[Effect],
    skips: &[(&RunRecord, Behind)],
) -> Vec<Pair> {
    let mut out = Vec::new();
    for run in runs {
        for (i, a) in run.attempts.iter().enumerate() {
            let Some(&k) = who.dead.get(&a.token) else {
                continue;
            };
            let kill = &kills[k];
            let job = &run.key.job;
            let count = |b: Behind| {
                let of_job = skips.iter().filter(|(r, x)| r.key.job == *job && *x == b);
                of_job.count()
            };
            let next = run.attempts.get(i + 1);
            out.push(Pair {
                kill: k,
                job: job.clone(),
                dead_skips: count(Behind::Dead(k)),
                retry_skips: count(Behind::Retry(k)),
                heartbeat_age: kill
                    .heartbeats
                    .get(&a.token)
                    .copied()
                    .flatten()
                    .map(|h| kill.at - h),
                next_start: next_start(effects, job, kill.at).map(|s| s - kill.at),
                recovery: next.map(|n| n.started_at - kill.at),
                recovered: next.is_some()
                    || a.status == RunStatus::Succeeded
                    || run.status == RunStatus::Dead,
            });
        }
    }
    out.sort_by(|x, y| (x.kill, &x.job).cmp(&(y.kill, &y.job)));
    out
}

/// The first ledger `start` of `job` after `at` (any slot, any replica).
fn next_start(effects: &[Effect], job: &str, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    effects
        .iter()
        .filter(|e| e.kind == "start" && e.job == job)
        .filter_map(|e| e.at)
        .filter(|t| *t > at)
        .min()
}

/// The result line's figures: skips per kill and job by what they were behind, and where the time
/// from a kill to the job's next start went.
fn figures(out: &mut Outcome, pairs: &[Pair], skips: &[(&RunRecord, Behind)]) {
    let count = |f: fn(&Behind) -> bool| skips.iter().filter(|(_, b)| f(b)).count();
    out.fig("overlap-skips", skips.len());
    out.fig("behind-dead-owner", count(|b| matches!(b, Behind::Dead(_))));
    out.fig("behind-retry", count(|b| matches!(b, Behind::Retry(_))));
    out.fig("behind-live-owner", count(|b| *b == Behind::Live));
    out.fig("behind-nothing", count(|b| *b == Behind::Nothing));
    out.fig("kill-jobs", pairs.len());
    let dead: Vec<usize> = pairs.iter().map(|p| p.dead_skips).collect();
    out.fig("dead-owner-skips-per-kill-job", histogram(&dead));
    counts(out, "dead-owner-skips-per-kill-job", &dead);
    let retry: Vec<usize> = pairs.iter().map(|p| p.retry_skips).collect();
    counts(out, "retry-skips-per-kill-job", &retry);
    let age: Vec<_> = pairs.iter().filter_map(|p| p.heartbeat_age).collect();
    durations(out, "heartbeat-age-at-kill", &age);
    let next: Vec<_> = pairs.iter().filter_map(|p| p.next_start).collect();
    durations(out, "kill-to-next-start", &next);
    let stale = chrono_ms(BUSY_STALE_MS as i64);
    let after_stale: Vec<_> = pairs
        .iter()
        .filter_map(|p| Some(p.next_start? - (stale - p.heartbeat_age?)))
        .collect();
    durations(out, "stale-to-next-start", &after_stale);
    let recovery: Vec<_> = pairs.iter().filter_map(|p| p.recovery).collect();
    durations(out, "kill-to-recovery", &recovery);
}

/// How many of `values` there are of each value: `value:times,...`.
fn histogram(values: &[usize]) -> String {
    let mut times: BTreeMap<usize, usize> = BTreeMap::new();
    for v in values {
        *times.entry(*v).or_default() += 1;
    }
    let parts: Vec<String> = times.iter().map(|(v, n)| format!("{v}:{n}")).collect();
    parts.join(",")
}

/// Figures `<name>-max` and `<name>-mean` of `values`.
fn counts(out: &mut Outcome, name: &str, values: &[usize]) {
    let sum: usize = values.iter().sum();
    out.fig(&format!("{name}-max"), values.iter().max().unwrap_or(&0));
    out.fig(
        &format!("{name}-mean"),
        format!("{:.2}", sum as f64 / values.len().max(1) as f64),
    );
}

/// Figures `<name>-max` and `<name>-mean` of `values`, in seconds (`-` when there are none).
fn durations(out: &mut Outcome, name: &str, values: &[chrono::Duration]) {
    let max = values.iter().max().map_or("-".into(), |d| secs_f(*d));
    let sum: chrono::Duration = values.iter().copied().sum();
    let mean = sum
        .checked_div(values.len() as i32)
        .map_or("-".into(), secs_f);
    out.fig(&format!("{name}-max"), max);
    out.fig(&format!("{name}-mean"), mean);
}

/// The `note:` on the goal: at most one tick per job skipped behind a dead owner.
fn goal(pairs: &[Pair]) -> String {
    let worst = pairs.iter().map(|p| p.dead_skips).max().unwrap_or(0);
    let above = pairs.iter().filter(|p| p.dead_skips > 1).count();
    format!(
        "goal of issue 27 point 3, at most 1 tick per job skipped behind a dead owner after a kill -9: {} (max {worst}; {above} of {} kill-jobs above 1)",
        if worst <= 1 { "met" } else { "NOT met" },
        pairs.len()
    )
}

/// One `note:` per kill: the replica, and per job the heartbeat age at the kill, the skips behind
/// the dead attempt and behind its retry, and when the job started again.
fn per_kill(kills: &[Kill], pairs: &[Pair]) -> Vec<String> {
    let opt = |d: Option<chrono::Duration>| d.map_or("-".into(), secs_f);
    kills
        .iter()
        .enumerate()
        .map(|(k, kill)| {
            let jobs: Vec<String> = pairs
                .iter()
                .filter(|p| p.kill == k)
                .map(|p| {
                    format!(
                        "{} hb {} skipped {}+{} next +{} retry +{}",
                        p.job,
                        opt(p.heartbeat_age),
                        p.dead_skips,
                        p.retry_skips,
                        opt(p.next_start),
                        opt(p.recovery)
                    )
                })
                .collect();
            format!(
                "kill {} of {} (pid {}) at {}: {}",
                k + 1,
                kill.instance,
                kill.pid,
                kill.at.format("%H:%M:%S%.3f"),
                if jobs.is_empty() {
                    "no attempt interrupted".into()
                } else {
                    jobs.join("; ")
                }
            )
        })
        .collect()
}
