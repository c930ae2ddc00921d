//! The invariants every fault scenario checks, over the effects ledger (what the job bodies did) and
//! the runs table (what the store accepted):
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
    let mut ledger: BTreeMap<(String, String), Vec<&Effect>> = BTreeMap::new();
    for e in effects {
        ledger
            .entry((e.job.clone(), e.slot.clone()))
            .or_default()
            .push(e);
    }
    let mut rows: BTreeMap<(String, String), &RunRecord> = BTreeMap::new();
    for run in runs {
        *report.statuses.entry(run.status.as_str()).or_insert(0) += 1;
        let key = (run.key.job.clone(), slot_name(run.key.scheduled_at));
        if run.key.partition.is_empty() && rows.insert(key.clone(), run).is_some() {
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
        if !rows.contains_key(key) {
            report
                .violations
                .push(format!("{key:?}: expected slot has no row"));
        }
    }
    report
}

fn check_run(
    run: &RunRecord,
    key: &(String, String),
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
mod tests {
    use super::*;
    use slotguard::store::{AttemptRecord, SlotKey, Trigger};

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn attempt(
        n: u32,
        token: i64,
        status: RunStatus,
        start: i64,
        end: Option<i64>,
    ) -> AttemptRecord {
        AttemptRecord {
            attempt: n,
            owner: format!("n{n}"),
            token,
            status,
            started_at: at(start),
            finished_at: end.map(at),
            message: None,
        }
    }

    fn run(slot: i64, status: RunStatus, attempts: Vec<AttemptRecord>) -> RunRecord {
        let last = attempts.last().cloned();
        RunRecord {
            id: slot,
            key: SlotKey {
                job: "job000".into(),
                scheduled_at: at(slot),
                partition: String::new(),
            },
            status,
            attempt: last.as_ref().map_or(0, |a| a.attempt),
            owner: last.as_ref().map(|a| a.owner.clone()),
            token: last.as_ref().map_or(1_000 + slot, |a| a.token),
            heartbeat_at: Some(at(slot)),
            stale_after: Duration::from_secs(2),
            next_attempt_at: None,
            created_at: at(slot),
            updated_at: at(slot),
            started_at: Some(at(slot)),
            finished_at: None,
            error_class: None,
            error_message: None,
            zone: "UTC".into(),
            wall_time: at(slot).naive_utc(),
            business_date: at(slot).date_naive(),
            trigger: Trigger::Schedule,
            fingerprint: 0,
            attempts,
        }
    }

    fn effect(kind: &str, slot: i64, attempt: u32, token: i64) -> Effect {
        Effect {
            kind: kind.into(),
            job: "job000".into(),
            slot: slot_name(at(slot)),
            attempt,
            token,
            instance: "n".into(),
            pid: 1,
            at: None,
        }
    }

    /// A ledger line written `ms` milliseconds after `at(0)` by process `pid`.
    fn timed(kind: &str, slot: i64, attempt: u32, token: i64, pid: u32, ms: i64) -> Effect {
        Effect {
            pid,
            at: Some(at(0) + chrono::Duration::milliseconds(ms)),
            ..effect(kind, slot, attempt, token)
        }
    }

    fn overlaps(effects: &[Effect], runs: &[RunRecord], exclusion: &Exclusion) -> Report {
        let mut report = Report::default();
        check_overlaps(&mut report, effects, runs, at(100), exclusion);
        report
    }

    /// Slot 0: attempt 1 (token 1) closed at 3 s by the take-over, attempt 2 (token 5) from 3 s to
    /// `done`; slot `newer` (token 7) from its instant to one second later.
    fn taken_over_beside(newer: i64, done: i64) -> Vec<RunRecord> {
        vec![
            run(
                0,
                RunStatus::Succeeded,
                vec![
                    attempt(1, 1, RunStatus::Abandoned, 0, Some(3)),
                    attempt(2, 5, RunStatus::Succeeded, 3, Some(done)),
                ],
            ),
            run(
                newer,
                RunStatus::Succeeded,
                vec![attempt(1, 7, RunStatus::Succeeded, newer, Some(newer + 1))],
            ),
        ]
    }

    /// Slot 0 was interrupted at 0.5 s (attempt 1, token 1) and recovered at 3.5 s (attempt 2,
    /// token 5), while slot 3 (token 7) ran from 3.0 s to 4.0 s.
    fn recovered_beside_newer() -> (Vec<Effect>, Vec<RunRecord>) {
        let runs = taken_over_beside(3, 5);
        let effects = vec![
            timed("start", 0, 1, 1, 10, 10),
            timed("start", 3, 1, 7, 20, 3_000),
            timed("start", 0, 2, 5, 30, 3_500),
            timed("end", 3, 1, 7, 20, 3_960),
            timed("end", 0, 2, 5, 30, 4_460),
        ];
        (effects, runs)
    }

    #[test]
    fn overlapping_executions_of_one_job_are_caught() {
        let killed = Exclusion {
            killed: [(10, at(0) + chrono::Duration::milliseconds(500))].into(),
            ..Exclusion::default()
        };
        let (effects, runs) = recovered_beside_newer();
        let report = overlaps(&effects, &runs, &killed);
        assert_eq!(report.overlapping, 1, "{:?}", report.violations);
        assert_eq!(report.overlap_max.num_milliseconds(), 460);
        let v = &report.violations[0];
        assert!(
            v.contains("by 460 ms") && v.contains("attempt 2 (pid 30"),
            "{v}"
        );
        // The same job at overlap `allow` may overlap.
        let shared = Exclusion {
            shared: ["job000".to_owned()].into(),
            ..killed.clone()
        };
        assert!(overlaps(&effects, &runs, &shared).violations.is_empty());
        // Without the kill, its attempt's close (3 s) bounds the first execution: the same pair.
        assert_eq!(
            overlaps(&effects, &runs, &Exclusion::default()).overlapping,
            1
        );
        // With neither, it is still open and overlaps both later executions too.
        let mut open = runs.clone();
        open[0].attempts[0].finished_at = None;
        let report = overlaps(&effects, &open, &Exclusion::default());
        assert_eq!(report.overlapping, 3, "{:?}", report.violations);
        assert!(report.violations.iter().any(|v| v.contains("open]")));
    }

    #[test]
    fn sequential_runs_and_fenced_tails_are_not_overlaps() {
        // Sequential: each body ends as the next starts; 2 ms of clock noise is tolerated.
        let runs: Vec<RunRecord> = (0..3)
            .map(|s| {
                run(
                    s,
                    RunStatus::Succeeded,
                    vec![attempt(1, 10 + s, RunStatus::Succeeded, s, Some(s + 1))],
                )
            })
            .collect();
        let effects: Vec<Effect> = (0..3)
            .flat_map(|s| {
                [
                    timed("start", s, 1, 10 + s, 1, s * 1_000 - 3),
                    timed("end", s, 1, 10 + s, 1, s * 1_000 + 999),
                ]
            })
            .collect();
        let report = overlaps(&effects, &runs, &Exclusion::default());
        assert!(report.ok(), "{:?}", report.violations);
        // 12 ms is more than clock noise.
        let mut early = effects.clone();
        early[2].at = early[2].at.map(|t| t - chrono::Duration::milliseconds(10));
        let report = overlaps(&early, &runs, &Exclusion::default());
        assert_eq!(report.overlap_max.num_milliseconds(), 12);

        // A fenced tail: attempt 1 was stopped, taken over at 3 s, and its body wrote `end` at 9 s
        // (refused); the take-over and the next slot ran after the fence, one after the other.
        let runs = taken_over_beside(4, 4);
        let effects = [
            timed("start", 0, 1, 1, 10, 10),
            timed("start", 0, 2, 5, 30, 3_004),
            timed("end", 0, 2, 5, 30, 3_990),
            timed("start", 4, 1, 7, 20, 4_010),
            timed("end", 4, 1, 7, 20, 4_970),
            timed("end", 0, 1, 1, 10, 9_000),
        ];
        let report = overlaps(&effects, &runs, &Exclusion::default());
        assert!(report.ok(), "{:?}", report.violations);
        let x = bounded(&effects, &runs, &BTreeMap::new(), at(100));
        assert_eq!((x[0].end, x[0].ended_by.as_str()), (at(3), "fenced"));
    }

    fn violations(effects: &[Effect], runs: &[RunRecord], expected: &[i64]) -> Vec<String> {
        let expected = expect(
            &["job000".to_owned()],
            &expected.iter().map(|s| at(*s)).collect::<Vec<_>>(),
        );
        check(effects, runs, at(100), &expected, Duration::from_secs(3)).violations
    }

    #[test]
    fn a_recovered_slot_with_one_accepted_completion_is_clean() {
        let runs = [run(
            0,
            RunStatus::Succeeded,
            vec![
                attempt(1, 1, RunStatus::Abandoned, 0, Some(3)),
                attempt(2, 5, RunStatus::Succeeded, 3, Some(4)),
            ],
        )];
        let effects = [
            effect("start", 0, 1, 1),
            effect("end", 0, 1, 1),
            effect("start", 0, 2, 5),
            effect("end", 0, 2, 5),
        ];
        let report = check(
            &effects,
            &runs,
            at(100),
            &expect(&["job000".to_owned()], &[at(0)]),
            Duration::from_secs(3),
        );
        assert!(report.ok(), "{:?}", report.violations);
        assert_eq!(
            (report.re_executed, report.refused, report.accepted),
            (1, 1, 1)
        );
    }

    #[test]
    fn each_invariant_is_caught() {
        // (b) two succeeded attempts, the first below the current token.
        let two = run(
            0,
            RunStatus::Succeeded,
            vec![
                attempt(1, 1, RunStatus::Succeeded, 0, Some(5)),
                attempt(2, 5, RunStatus::Succeeded, 3, Some(6)),
            ],
        );
        let v = violations(
            &[
                effect("start", 0, 1, 1),
                effect("end", 0, 1, 1),
                effect("start", 0, 2, 5),
                effect("end", 0, 2, 5),
            ],
            &[two],
            &[0],
        );
        assert!(
            v.iter().any(|m| m.contains("2 succeeded attempts")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|m| m.contains("below the current token")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|m| m.contains("ended in an accepted")),
            "{v:?}"
        );

        // (a) an accepted completion nothing executed; an execution under no attempt's token.
        let ghost = run(
            1,
            RunStatus::Succeeded,
            vec![attempt(1, 7, RunStatus::Succeeded, 1, Some(2))],
        );
        let v = violations(&[effect("start", 1, 1, 8)], &[ghost], &[1]);
        assert!(
            v.iter().any(|m| m.contains("0 finished executions")),
            "{v:?}"
        );
        assert!(v.iter().any(|m| m.contains("no attempt holds")), "{v:?}");

        // (c) left running past stale + grace; (d) an expected slot with no row.
        let stuck = run(
            2,
            RunStatus::Running,
            vec![attempt(1, 9, RunStatus::Running, 2, None)],
        );
        let v = violations(&[], &[stuck], &[2, 3]);
        assert!(
            v.iter().any(|m| m.contains("running with heartbeat")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|m| m.contains("expected slot has no row")),
            "{v:?}"
        );

        // Two executions under one lease.
        let once = run(
            4,
            RunStatus::Failed,
            vec![attempt(1, 11, RunStatus::Failed, 4, Some(5))],
        );
        let v = violations(
            &[effect("start", 4, 1, 11), effect("start", 4, 1, 11)],
            &[once],
            &[4],
        );
        assert!(
            v.iter().any(|m| m.contains("executions under one token")),
            "{v:?}"
        );
    }

    #[test]
    fn slots_of_a_step_are_aligned() {
        let from = DateTime::from_timestamp(1_000, 500_000_000).unwrap();
        let to = DateTime::from_timestamp(1_010, 0).unwrap();
        let got: Vec<i64> = every(from, to, 2).iter().map(|t| t.timestamp()).collect();
        assert_eq!(got, [1_002, 1_004, 1_006, 1_008, 1_010]);
        assert_eq!(every(at(0), at(0), 1), [at(0)]);
    }
}
