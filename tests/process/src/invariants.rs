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
            "rows={} expected={} executions={} re-executed={} accepted={} refused={} extra-attempts={} max-attempt={} [{}] violations={}",
            self.rows,
            self.expected,
            self.executions,
            self.re_executed,
            self.accepted,
            self.refused,
            self.extra_attempts,
            self.max_attempt,
            statuses.join(" "),
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
        }
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
