//! Invariant (e) where there are no slot rows: jobs at level `lock` on lease locks alone (Redis),
//! checked over the effects ledger.
//!
//! Without rows nothing closes an attempt, so what ends an execution is its own ledger line, the kill
//! of its process, or a **fence**: a later execution of the job started under a higher lease token
//! while this one's process was stopped (`SIGSTOP`). From that start on, a target that checks the
//! token refuses the stopped holder's writes, and the holder cannot write before it wakes, so what
//! its body does after waking is a fenced tail, not a second execution.
//!
//! - **(e) one execution of a job at a time**: two executions of one job overlap (past
//!   [`OVERLAP_TOLERANCE`]) only when the later one fences the earlier one as above; an overlap with
//!   an awake holder (the lock let two in, or a holder was not told `lost` before its lease could be
//!   taken) is a violation.
//! - **(f) tokens rise**: of two executions of one job, the later start has the higher token (a lower
//!   one would be refused by the target, and could not fence the holder before it).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::Effect;
use crate::invariants::{Execution, OVERLAP_TOLERANCE, Report, bounded};

/// A process stopped with `SIGSTOP` from `from` to `to` (read after the stop was sent and before the
/// `SIGCONT`: within the time it was really stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frozen {
    /// The process.
    pub pid: u32,
    /// When it was stopped.
    pub from: DateTime<Utc>,
    /// When it was let go on.
    pub to: DateTime<Utc>,
}

/// What [`check`] found besides violations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fenced {
    /// Executions overlapped by a later one with a higher token while their process was stopped.
    pub while_frozen: usize,
}

/// Checks (e) and (f) over `effects` (all of one store: lease tokens) and adds violations to
/// `report`; `now` ends the executions still open.
pub fn check(
    report: &mut Report,
    effects: &[Effect],
    killed: &BTreeMap<u32, DateTime<Utc>>,
    frozen: &[Frozen],
    now: DateTime<Utc>,
) -> Fenced {
    let mut by_job: BTreeMap<String, Vec<Execution>> = BTreeMap::new();
    for x in bounded(effects, &[], killed, now) {
        by_job.entry(x.job.clone()).or_default().push(x);
    }
    report.executions = by_job.values().map(Vec::len).sum();
    let stopped_at = |pid: u32, at: DateTime<Utc>| {
        frozen
            .iter()
            .any(|f| f.pid == pid && f.from <= at && at <= f.to)
    };
    let mut fenced = Fenced::default();
    for (job, mut xs) in by_job {
        xs.sort_by_key(|x| (x.start, x.token));
        for (i, later) in xs.iter().enumerate() {
            for earlier in &xs[..i] {
                if later.token <= earlier.token {
                    report.violations.push(format!(
                        "{job}: token {} (pid {}, slot {}) started after token {} (pid {}, slot {})",
                        later.token, later.pid, later.slot, earlier.token, earlier.pid, earlier.slot
                    ));
                }
                let overlap = earlier.end.min(later.end) - later.start;
                if overlap <= OVERLAP_TOLERANCE {
                    continue;
                }
                if later.token > earlier.token && stopped_at(earlier.pid, later.start) {
                    fenced.while_frozen += 1;
                    continue;
                }
                report.overlapping += 1;
                report.overlap_max = report.overlap_max.max(overlap);
                report.violations.push(format!(
                    "{job}: slot {} (pid {}, token {}, ended by {}) overlapped slot {} (pid {}, token {}) by {} ms with its holder awake",
                    earlier.slot,
                    earlier.pid,
                    earlier.token,
                    earlier.ended_by,
                    later.slot,
                    later.pid,
                    later.token,
                    overlap.num_milliseconds()
                ));
            }
        }
    }
    fenced
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap() + chrono::Duration::milliseconds(ms)
    }

    fn line(kind: &str, token: i64, pid: u32, ms: i64) -> Effect {
        Effect {
            kind: kind.into(),
            job: "job000".into(),
            slot: format!("s{token}"),
            attempt: 1,
            token,
            instance: format!("n{pid}"),
            pid,
            at: Some(at(ms)),
            partition: String::new(),
        }
    }

    fn run(effects: &[Effect], frozen: &[Frozen]) -> (Report, Fenced) {
        let mut report = Report::default();
        let fenced = check(&mut report, effects, &BTreeMap::new(), frozen, at(100_000));
        (report, fenced)
    }

    #[test]
    fn one_after_another_is_fine() {
        let effects = [
            line("start", 10, 1, 0),
            line("end", 10, 1, 900),
            line("start", 11, 2, 1_000),
            line("end", 11, 2, 1_900),
        ];
        let (report, fenced) = run(&effects, &[]);
        assert!(report.ok(), "{:?}", report.violations);
        assert_eq!((report.executions, fenced.while_frozen), (2, 0));
    }

    #[test]
    fn an_awake_holder_overlapped_is_a_violation() {
        let effects = [
            line("start", 10, 1, 0),
            line("start", 11, 2, 500),
            line("end", 10, 1, 900),
            line("end", 11, 2, 1_400),
        ];
        let (report, _) = run(&effects, &[]);
        assert_eq!(report.overlapping, 1);
        assert_eq!(report.overlap_max, chrono::Duration::milliseconds(400));
    }

    /// Pid 1 starts under `first` at 0 and is stopped from 300 ms to `woken` ms; pid 2 starts under
    /// `second` at 2 s. The stop, and the ledger.
    fn stopped_then_taken(first: i64, second: i64, woken: i64) -> ([Frozen; 1], [Effect; 4]) {
        let frozen = [Frozen {
            pid: 1,
            from: at(300),
            to: at(woken),
        }];
        let effects = [
            line("start", first, 1, 0),
            line("start", second, 2, 2_000),
            line("lost", first, 1, 3_010),
            line("end", second, 2, 2_900),
        ];
        (frozen, effects)
    }

    #[test]
    fn a_stopped_holder_overlapped_by_a_higher_token_is_fenced() {
        let (frozen, effects) = stopped_then_taken(10, 11, 3_000);
        let (report, fenced) = run(&effects, &frozen);
        assert!(report.ok(), "{:?}", report.violations);
        assert_eq!(fenced.while_frozen, 1);
        // Awake again before the later start: a violation.
        let (early, effects) = stopped_then_taken(10, 11, 1_000);
        assert_eq!(run(&effects, &early).0.overlapping, 1);
    }

    #[test]
    fn a_lower_token_after_a_higher_one_is_a_violation_even_when_stopped() {
        let (frozen, effects) = stopped_then_taken(11, 10, 3_000);
        let (report, _) = run(&effects, &frozen);
        assert_eq!(report.overlapping, 1);
        assert!(
            report
                .violations
                .iter()
                .any(|v| v.contains("started after")),
            "{:?}",
            report.violations
        );
    }
}
