//! What a failover to a standby must keep, checked over the effects ledger and the runs table as
//! the promoted server holds it (scenarios `failoversync` and `failoverasync`). A standby that
//! lagged may have lost the last rows and the sequence values behind them, so these checks read
//! the ledger, which the replicas wrote whatever the store kept:
//!
//! - **tokens are granted once** ([`tokens_granted_twice`]): no fencing token started two bodies,
//!   or started one body and is held by an attempt of another slot or attempt number. A token
//!   handed out again lets a late writer of the old grant pass a target's fence.
//! - **a completion belongs to its own body** ([`foreign_completions`]): every `succeeded` attempt
//!   of a slot has, under its token, a body of that slot and attempt that ended (`end`) no later
//!   than the store accepted the completion. Otherwise the store accepted a completion written for
//!   another slot (or for no body at all).
//!
//! [`TokenSpan`] gives the figures: the highest token a body started under before the fault and
//! the lowest after it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use slotguard::store::{RunRecord, RunStatus};

use super::{Key, OVERLAP_TOLERANCE};
use crate::Effect;

/// One grant of a token, as the ledger or the runs table shows it.
#[derive(Debug, Clone)]
struct Grant {
    key: Key,
    attempt: u32,
    /// The body's process and start, when the ledger shows it.
    started: Option<(u32, Option<DateTime<Utc>>)>,
}

impl Grant {
    fn described(&self) -> String {
        match self.started {
            Some((pid, at)) => format!(
                "{:?} attempt {} (body in pid {pid} from {})",
                self.key,
                self.attempt,
                at.map_or_else(|| "?".into(), |t| t.format("%H:%M:%S%.3f").to_string())
            ),
            None => format!("{:?} attempt {} (row only)", self.key, self.attempt),
        }
    }
}

/// The grants of every token: each ledger `start`, and each attempt of the runs table that no
/// `start` of the same slot and attempt shows.
fn grants(effects: &[Effect], runs: &[RunRecord]) -> BTreeMap<i64, Vec<Grant>> {
    let mut out: BTreeMap<i64, Vec<Grant>> = BTreeMap::new();
    for e in effects.iter().filter(|e| e.kind == "start" && e.token > 0) {
        out.entry(e.token).or_default().push(Grant {
            key: Key::new(&e.job, &e.slot, &e.partition),
            attempt: e.attempt,
            started: Some((e.pid, e.at)),
        });
    }
    for run in runs {
        let key = Key::of(run);
        for a in run.attempts.iter().filter(|a| a.token > 0) {
            let seen = out.get(&a.token).is_some_and(|gs| {
                gs.iter()
                    .any(|g| g.started.is_some() && g.key == key && g.attempt == a.attempt)
            });
            if !seen {
                out.entry(a.token).or_default().push(Grant {
                    key: key.clone(),
                    attempt: a.attempt,
                    started: None,
                });
            }
        }
    }
    out
}

/// One violation per fencing token granted more than once: to two bodies, or to a body and an
/// attempt of another slot or attempt number, or to two attempts of the runs table.
pub fn tokens_granted_twice(effects: &[Effect], runs: &[RunRecord]) -> Vec<String> {
    grants(effects, runs)
        .into_iter()
        .filter(|(_, gs)| gs.len() > 1)
        .map(|(token, gs)| {
            let all: Vec<String> = gs.iter().map(Grant::described).collect();
            format!(
                "token {token} granted {} times: {}",
                gs.len(),
                all.join("; ")
            )
        })
        .collect()
}

/// One violation per `succeeded` attempt whose completion no body of its own slot and attempt
/// can have written: none had ended (`end`) under its token by the time the store accepted it
/// (its `finished_at`, within [`OVERLAP_TOLERANCE`]). The bodies of other slots that had are
/// named.
pub fn foreign_completions(effects: &[Effect], runs: &[RunRecord]) -> Vec<String> {
    let mut out = Vec::new();
    for run in runs {
        let key = Key::of(run);
        for a in run
            .attempts
            .iter()
            .filter(|a| a.status == RunStatus::Succeeded)
        {
            let by = a.finished_at.map(|f| f + OVERLAP_TOLERANCE);
            let ended: Vec<&Effect> = effects
                .iter()
                .filter(|e| e.kind == "end" && e.token == a.token)
                .filter(|e| by.is_none_or(|by| e.at.is_none_or(|at| at <= by)))
                .collect();
            let own = |e: &&Effect| {
                Key::new(&e.job, &e.slot, &e.partition) == key && e.attempt == a.attempt
            };
            if ended.iter().any(own) {
                continue;
            }
            let others: Vec<String> = ended
                .iter()
                .map(|e| format!("{} {} attempt {} (pid {})", e.job, e.slot, e.attempt, e.pid))
                .collect();
            out.push(format!(
                "{key:?}: attempt {} accepted as succeeded under token {} at {}, but no body of that slot and attempt had ended under it by then{}",
                a.attempt,
                a.token,
                a.finished_at
                    .map_or_else(|| "?".into(), |f| f.format("%H:%M:%S%.3f").to_string()),
                if others.is_empty() {
                    String::new()
                } else {
                    format!("; ended under it: {}", others.join(", "))
                }
            ));
        }
    }
    out
}

/// The tokens bodies started under on either side of a fault.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenSpan {
    /// The highest token of a body started before the fault.
    pub max_before: Option<i64>,
    /// The lowest token of a body started after the store was back.
    pub min_after: Option<i64>,
    /// Bodies started after the store was back under a token not above `max_before`.
    pub not_above: usize,
}

impl TokenSpan {
    /// The tokens of the ledger's `start`s before `fault` and after `back`.
    pub fn of(effects: &[Effect], fault: DateTime<Utc>, back: DateTime<Utc>) -> TokenSpan {
        let starts = || effects.iter().filter(|e| e.kind == "start" && e.token > 0);
        let max_before = starts()
            .filter(|e| e.at.is_some_and(|at| at < fault))
            .map(|e| e.token)
            .max();
        let after: Vec<i64> = starts()
            .filter(|e| e.at.is_some_and(|at| at > back))
            .map(|e| e.token)
            .collect();
        TokenSpan {
            max_before,
            min_after: after.iter().copied().min(),
            not_above: max_before.map_or(0, |m| after.iter().filter(|t| **t <= m).count()),
        }
    }

    /// `max-before/min-after`, with `-` for a side without bodies.
    pub fn figure(&self) -> String {
        let show = |t: Option<i64>| t.map_or_else(|| "-".into(), |t| t.to_string());
        format!("{}/{}", show(self.max_before), show(self.min_after))
    }
}

#[cfg(test)]
mod tests;
