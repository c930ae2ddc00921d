//! The invariants every fault scenario checks, over the effects ledger (what the job bodies did) and
//! the runs table (what the store accepted). A slot is a job, an instant and a partition (the ledger
//! names the partition of a run that has one, as a stored schedule's runs do); [`schedules`] adds the
//! checks of stored schedules, [`failover`] those of a failover to a standby:
//!
//! - **(a) at most one accepted completion per slot**: of the executions of a slot in the ledger, at
//!   most one ended (`end`) under the token of a `succeeded` attempt; an accepted completion has an
//!   execution behind it; no lease ran two bodies; every execution ran under an attempt of its slot.
//! - **(b) fencing**: a run's attempts have strictly rising numbers and tokens, at most one is
//!   `succeeded`, and it is the last one (the run's current token); an earlier attempt was closed no
//!   later than the next one started (no write accepted below the current token).
//! - **(c) nothing left running**: no row is `running` with a heartbeat older than its stale
//!   threshold plus a grace, by the database clock.
//! - **(d) every expected slot is recorded**: each `(job, slot)` the scenario expects has a row
//!   (run, skipped with a reason, failed, ...), unless the scenario explains its absence.
//! - **(e) one execution of a job at a time**: for a job at level `lock` or `slot` whose overlap
//!   policy is not `allow`, no two executions of the same `(job, partition)` overlap in time. An
//!   execution is `[its ledger start, its end]`, its end the earliest of its ledger line that ends
//!   it (`end`, `lost`, `cancelled`, `failed`), the instant its process was killed (`kill -9`, by
//!   the harness) and the instant the store closed its attempt (`finished_at` in
//!   `job_run_attempts`: taken over, marked abandoned, or its own outcome written). From that last
//!   instant on, the store refuses every write under its fencing token, so a body that wakes from
//!   `SIGSTOP` after a take-over is a fenced tail, not a second execution. With none of the three
//!   the execution is still open when the checker reads the ledger. Ledger times are the replicas'
//!   system clocks, kill times the harness's, attempt times the database server's `now()` (the
//!   start of the writing transaction, so never later than the write): one machine, one kernel
//!   clock, so they differ only by when each was read. [`OVERLAP_TOLERANCE`] (5 ms) absorbs that.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{RunRecord, RunStatus};

use crate::Effect;

pub mod failover;
pub mod schedules;

/// A slot as the ledger writes it.
pub fn slot_name(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The instants `t` in `[from, to]` with `t` a whole number of seconds divisible by `step_s` (the
/// slots of `*/step_s * * * * *` when `step_s` divides 60).
pub fn every(from: DateTime<Utc>, to: DateTime<Utc>, step_s: i64) -> Vec<DateTime<Utc>> {
    let step = step_s.max(1);
    let mut t = from.timestamp().div_euclid(step) * step;
    if t < from.timestamp() || (t == from.timestamp() && from.timestamp_subsec_nanos() > 0) {
        t += step;
    }
    let mut out = Vec::new();
    while t <= to.timestamp() {
        if let Some(at) = DateTime::from_timestamp(t, 0) {
            out.push(at);
        }
        t += step;
    }
    out
}

/// `(job, slot)` pairs of `jobs` over `slots`.
pub fn expect(jobs: &[String], slots: &[DateTime<Utc>]) -> BTreeSet<(String, String)> {
    jobs.iter()
        .flat_map(|j| slots.iter().map(move |s| (j.clone(), slot_name(*s))))
        .collect()
}

/// The figures the checker measured, and what it found wrong.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Rows in the runs table.
    pub rows: usize,
    /// Expected `(job, slot)` pairs.
    pub expected: usize,
    /// Executions (ledger `start`s).
    pub executions: usize,
    /// Slots executed more than once (recoveries, retries).
    pub re_executed: usize,
    /// Accepted completions (`succeeded` attempts).
    pub accepted: usize,
    /// Executions whose body ended (`end`) but whose completion the store refused (fenced).
    pub refused: usize,
    /// Attempts beyond the first (recoveries, hand-overs, retries).
    pub extra_attempts: usize,
    /// The highest attempt number.
    pub max_attempt: u32,
    /// Rows per status.
    pub statuses: BTreeMap<&'static str, usize>,
    /// Pairs of executions of one exclusive job that overlapped (e).
    pub overlapping: usize,
    /// The longest such overlap.
    pub overlap_max: chrono::Duration,
    /// Violations, each a sentence naming the slot.
    pub violations: Vec<String>,
}

impl Report {
    /// Whether no invariant was violated.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// The figures on one line.
    pub fn figures(&self) -> String {
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(s, n)| format!("{s}={n}"))
            .collect();
        format!(
            "rows={} expected={} executions={} re-executed={} accepted={} refused={} extra-attempts={} max-attempt={} [{}] overlapping={} overlap-max={}ms violations={}",
            self.rows,
            self.expected,
            self.executions,
            self.re_executed,
            self.accepted,
            self.refused,
            self.extra_attempts,
            self.max_attempt,
            statuses.join(" "),
            self.overlapping,
            self.overlap_max.num_milliseconds(),
            self.violations.len()
        )
    }
}

/// Checks (a)–(d). `db_now` is the database's clock when `runs` was read; `grace` is the slack past
/// a row's stale threshold before a `running` row is a violation; `expected` the `(job, slot)` pairs
/// that must have a row.
pub fn check(
    effects: &[Effect],
    runs: &[RunRecord],
    db_now: DateTime<Utc>,
    expected: &BTreeSet<(String, String)>,
    grace: Duration,
) -> Report {
    let mut report = Report {
        rows: runs.len(),
        expected: expected.len(),
        ..Report::default()
    };
    let mut ledger: BTreeMap<Key, Vec<&Effect>> = BTreeMap::new();
    for e in effects {
        ledger
            .entry(Key::new(&e.job, &e.slot, &e.partition))
            .or_default()
            .push(e);
    }
    let mut rows: BTreeMap<Key, &RunRecord> = BTreeMap::new();
    for run in runs {
        *report.statuses.entry(run.status.as_str()).or_insert(0) += 1;
        let key = Key::of(run);
        if rows.insert(key.clone(), run).is_some() {
            report
                .violations
                .push(format!("{key:?}: two rows for one slot"));
        }
        check_run(run, &key, ledger.get(&key), db_now, grace, &mut report);
    }
    for (key, effects) in &ledger {
        let starts = effects.iter().filter(|e| e.kind == "start").count();
        report.executions += starts;
        if starts > 1 {
            report.re_executed += 1;
        }
        if starts > 0 && !rows.contains_key(key) {
            report
                .violations
                .push(format!("{key:?}: executed {starts}x with no row"));
        }
    }
    for key in expected {
        if !rows.contains_key(&Key::new(&key.0, &key.1, "")) {
            report
                .violations
                .push(format!("{key:?}: expected slot has no row"));
        }
    }
    report
}

/// A slot as the checker names it: job, slot as written, partition. It reads `("job", "slot")`
/// in the violations, with the partition third when there is one.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    job: String,
    slot: String,
    partition: String,
}

impl Key {
    fn new(job: &str, slot: &str, partition: &str) -> Key {
        Key {
            job: job.to_owned(),
            slot: slot.to_owned(),
            partition: partition.to_owned(),
        }
    }

    fn of(run: &RunRecord) -> Key {
        Key::new(
            &run.key.job,
            &slot_name(run.key.scheduled_at),
            &run.key.partition,
        )
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.partition.is_empty() {
            (&self.job, &self.slot).fmt(f)
        } else {
            (&self.job, &self.slot, &self.partition).fmt(f)
        }
    }
}

fn check_run(
    run: &RunRecord,
    key: &Key,
    effects: Option<&Vec<&Effect>>,
    db_now: DateTime<Utc>,
    grace: Duration,
    report: &mut Report,
) {
    let v = &mut report.violations;
    let attempts = &run.attempts;
    report.extra_attempts += attempts.len().saturating_sub(1);
    report.max_attempt = report.max_attempt.max(run.attempt);
    // (b) fencing.
    for pair in attempts.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b.attempt <= a.attempt || b.token <= a.token {
            v.push(format!(
                "{key:?}: attempt {} (token {}) after attempt {} (token {})",
                b.attempt, b.token, a.attempt, a.token
            ));
        }
        match a.finished_at {
            None => v.push(format!(
                "{key:?}: attempt {} still open under attempt {}",
                a.attempt, b.attempt
            )),
            Some(done) if done > b.started_at => v.push(format!(
                "{key:?}: attempt {} ({}) written at {done} after attempt {} started at {} (a write below the current token)",
                a.attempt, a.status, b.attempt, b.started_at
            )),
            Some(_) => {}
        }
    }
    let succeeded: Vec<_> = attempts
        .iter()
        .filter(|a| a.status == RunStatus::Succeeded)
        .collect();
    report.accepted += succeeded.len();
    if succeeded.len() > 1 {
        v.push(format!("{key:?}: {} succeeded attempts", succeeded.len()));
    }
    if let Some(last) = attempts.last()
        && (last.attempt != run.attempt || last.token != run.token)
    {
        v.push(format!(
            "{key:?}: run at attempt {} token {}, last attempt {} token {}",
            run.attempt, run.token, last.attempt, last.token
        ));
    }
    for s in &succeeded {
        if s.token != run.token || run.status != RunStatus::Succeeded {
            v.push(format!(
                "{key:?}: attempt {} succeeded under token {} but the run is {} at token {}",
                s.attempt, s.token, run.status, run.token
            ));
        }
    }
    if run.status == RunStatus::Succeeded && succeeded.is_empty() {
        v.push(format!("{key:?}: run succeeded with no succeeded attempt"));
    }
    // (a) against the ledger.
    let effects: &[&Effect] = effects.map_or(&[], Vec::as_slice);
    let tokens: BTreeSet<i64> = attempts.iter().map(|a| a.token).collect();
    let mut starts_per_token: BTreeMap<i64, usize> = BTreeMap::new();
    for e in effects.iter().filter(|e| e.kind == "start") {
        *starts_per_token.entry(e.token).or_insert(0) += 1;
        if !tokens.contains(&e.token) {
            v.push(format!(
                "{key:?}: executed by pid {} under token {} that no attempt holds",
                e.pid, e.token
            ));
        }
    }
    for (token, n) in &starts_per_token {
        if *n > 1 {
            v.push(format!("{key:?}: {n} executions under one token {token}"));
        }
    }
    let accepted: BTreeSet<i64> = succeeded.iter().map(|a| a.token).collect();
    let ends = |token: i64| {
        effects
            .iter()
            .filter(|e| e.kind == "end" && e.token == token)
            .count()
    };
    for token in &accepted {
        if ends(*token) != 1 {
            v.push(format!(
                "{key:?}: accepted completion under token {token} with {} finished executions",
                ends(*token)
            ));
        }
    }
    report.refused += effects
        .iter()
        .filter(|e| e.kind == "end" && !accepted.contains(&e.token))
        .count();
    let accepted_executions = effects
        .iter()
        .filter(|e| e.kind == "end" && accepted.contains(&e.token))
        .count();
    if accepted_executions > 1 {
        v.push(format!(
            "{key:?}: {accepted_executions} executions ended in an accepted completion"
        ));
    }
    // (c) nothing left running past its threshold.
    if run.status == RunStatus::Running {
        let limit =
            chrono::Duration::from_std(run.stale_after + grace).unwrap_or(chrono::Duration::MAX);
        match run.heartbeat_at {
            Some(beat) if beat + limit >= db_now => {}
            beat => v.push(format!(
                "{key:?}: running with heartbeat {beat:?}, older than stale {:?} + grace {grace:?} at {db_now}",
                run.stale_after
            )),
        }
    }
}

/// How far apart two clocks of this machine may read one instant (see (e) above).
pub const OVERLAP_TOLERANCE: chrono::Duration = chrono::Duration::milliseconds(5);

/// What (e) needs beyond the ledger and the runs table.
#[derive(Debug, Clone, Default)]
pub struct Exclusion {
    /// Jobs that may run beside themselves (overlap `allow`, or a level below `lock`): left out.
    pub shared: BTreeSet<String>,
    /// When the harness killed each process (`kill -9`), by its own clock, read after the signal was
    /// sent (so never before the process died).
    pub killed: BTreeMap<u32, DateTime<Utc>>,
}

/// One execution of a job body and the interval (e) gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    /// The job.
    pub job: String,
    /// The run's partition key (empty when not partitioned, or at level `lock`).
    pub partition: String,
    /// The slot, as written.
    pub slot: String,
    /// The attempt number.
    pub attempt: u32,
    /// The fencing token (0 at level `lock`).
    pub token: i64,
    /// The process that ran it.
    pub pid: u32,
    /// Its ledger `start`.
    pub start: DateTime<Utc>,
    /// The earliest of its ending ledger line, its process's kill and its attempt's close.
    pub end: DateTime<Utc>,
    /// Which of those came first: the ledger line's kind, `killed`, `fenced`, or `open`.
    pub ended_by: String,
}

/// The executions of the ledger with their intervals; `now` ends those still open. A `start`
/// without a time (an old ledger) is left out.
pub fn bounded(
    effects: &[Effect],
    runs: &[RunRecord],
    killed: &BTreeMap<u32, DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<Execution> {
    let mut attempts: BTreeMap<i64, (&RunRecord, Option<DateTime<Utc>>)> = BTreeMap::new();
    for run in runs {
        for a in &run.attempts {
            attempts.insert(a.token, (run, a.finished_at));
        }
    }
    // The lines that ended each execution, oldest first, per (job, slot, attempt, token, pid).
    type Id = (String, String, u32, i64, u32);
    let id = |e: &Effect| -> Id { (e.job.clone(), e.slot.clone(), e.attempt, e.token, e.pid) };
    let mut endings: BTreeMap<Id, std::collections::VecDeque<&Effect>> = BTreeMap::new();
    for e in effects.iter().filter(|e| e.kind != "start") {
        endings.entry(id(e)).or_default().push_back(e);
    }
    let mut out = Vec::new();
    for e in effects.iter().filter(|e| e.kind == "start") {
        let Some(start) = e.at else { continue };
        let line = endings.get_mut(&id(e)).and_then(|q| q.pop_front());
        let (run, fenced) = attempts.get(&e.token).copied().unzip();
        let mut ends: Vec<(DateTime<Utc>, String)> = Vec::new();
        if let Some(ended) = line.and_then(|l| l.at.map(|at| (at, l.kind.clone()))) {
            ends.push(ended);
        }
        if let Some(at) = killed.get(&e.pid) {
            ends.push((*at, "killed".into()));
        }
        if let Some(at) = fenced.flatten() {
            ends.push((at, "fenced".into()));
        }
        // An end before the start cannot be this execution's: a kill of an earlier process that
        // had the same pid (pids are reused). Leaving it out only lengthens the interval.
        let (end, ended_by) = ends
            .into_iter()
            .filter(|(t, _)| *t >= start - OVERLAP_TOLERANCE)
            .min()
            .unwrap_or((now, "open".into()));
        out.push(Execution {
            job: e.job.clone(),
            partition: run.map(|r| r.key.partition.clone()).unwrap_or_default(),
            slot: e.slot.clone(),
            attempt: e.attempt,
            token: e.token,
            pid: e.pid,
            start,
            end,
            ended_by,
        });
    }
    out
}

/// Checks (e) and adds what it finds to `report`.
pub fn check_overlaps(
    report: &mut Report,
    effects: &[Effect],
    runs: &[RunRecord],
    now: DateTime<Utc>,
    exclusion: &Exclusion,
) {
    let mut by_job: BTreeMap<(String, String), Vec<Execution>> = BTreeMap::new();
    for x in bounded(effects, runs, &exclusion.killed, now) {
        if !exclusion.shared.contains(&x.job) {
            by_job
                .entry((x.job.clone(), x.partition.clone()))
                .or_default()
                .push(x);
        }
    }
    for (key, mut xs) in by_job {
        xs.sort_by_key(|x| x.start);
        for (i, later) in xs.iter().enumerate() {
            for earlier in &xs[..i] {
                let overlap = earlier.end.min(later.end) - later.start;
                if overlap <= OVERLAP_TOLERANCE {
                    continue;
                }
                report.overlapping += 1;
                report.overlap_max = report.overlap_max.max(overlap);
                report.violations.push(format!(
                    "{key:?}: {} overlapped {} by {} ms",
                    described(earlier),
                    described(later),
                    overlap.num_milliseconds()
                ));
            }
        }
    }
}

fn described(x: &Execution) -> String {
    format!(
        "slot {} attempt {} (pid {}, token {}) [{}, {} {}]",
        x.slot,
        x.attempt,
        x.pid,
        x.token,
        x.start.format("%H:%M:%S%.3f"),
        x.end.format("%H:%M:%S%.3f"),
        x.ended_by
    )
}

#[cfg(test)]
mod tests;
