//! The checks of stored schedules (scenario `schededits`), on top of (a)–(e):
//!
//! - **on schedule**: every run of a stored schedule's `(job, partition)` with trigger `schedule`
//!   and an attempt is at an instant the schedule's versions produce: the version in force at that
//!   instant (the latest whose `effective_at` is not after it) names it ([`Timeline`], built from
//!   the versions read back with `schedule_history`).
//! - **nothing unrecorded**: every slot the versions produce within the [`Window`] has a row that
//!   `succeeded`, or has a reason (`skipped` with its reason, `abandoned`, `failed`...); a slot an
//!   operator skipped is `skipped` with the operator's reason, has no attempt and never started a
//!   body.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, Utc};
use slotguard::store::schedules::operator_skip_message;
use slotguard::store::{RunRecord, RunStatus, ScheduleVersion, Trigger};
use slotguard::timeline::Timeline;

use super::slot_name;
use crate::Effect;

/// A slot of a stored schedule: job, partition, instant.
pub type SlotOf = (String, String, DateTime<Utc>);

/// Where every slot the versions produce must have a row: `[from, to]`, less the `excluded`
/// intervals (when every replica was down).
#[derive(Debug, Clone)]
pub struct Window {
    /// The first instant checked: the first version's `effective_at`.
    pub from: DateTime<Utc>,
    /// The last instant checked: the end of the run less a margin.
    pub to: DateTime<Utc>,
    /// Intervals left out, both ends included.
    pub excluded: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

impl Window {
    /// Whether `at` is checked.
    pub fn covers(&self, at: DateTime<Utc>) -> bool {
        at >= self.from && at <= self.to && !self.excluded.iter().any(|(a, b)| at >= *a && at <= *b)
    }
}

/// One slot an operator skipped (`Admin::skip`), and why.
#[derive(Debug, Clone)]
pub struct OperatorSkip {
    /// The job.
    pub job: String,
    /// The schedule's partition.
    pub partition: String,
    /// The slot.
    pub slot: DateTime<Utc>,
    /// The operator's reason.
    pub reason: String,
}

/// What the checks of stored schedules found.
#[derive(Debug, Default, Clone)]
pub struct ScheduleReport {
    /// Slots the versions produce within the window.
    pub produced: usize,
    /// Of those, by the status of their row (`none` when they have none).
    pub recorded: BTreeMap<&'static str, usize>,
    /// Rows of the stored schedules' partitions with trigger `schedule` and an attempt.
    pub ran: usize,
    /// Of those, at an instant no version in force there produces.
    pub off_schedule: usize,
    /// Slots of the window with no row, or a row neither `succeeded` nor with a reason.
    pub unrecorded: usize,
    /// Violations, each a sentence naming the slot.
    pub violations: Vec<String>,
}

impl ScheduleReport {
    /// The figures on one line.
    pub fn figures(&self) -> String {
        let recorded: Vec<String> = self
            .recorded
            .iter()
            .map(|(s, n)| format!("{s}={n}"))
            .collect();
        format!(
            "produced={} [{}] ran={} off-schedule={} unrecorded={} schedule-violations={}",
            self.produced,
            recorded.join(" "),
            self.ran,
            self.off_schedule,
            self.unrecorded,
            self.violations.len()
        )
    }
}

/// The slots `histories` (each one schedule's versions, oldest first) produce in `[from, to]`,
/// with the schedule id and version that produce each.
pub fn produced(
    histories: &[Vec<ScheduleVersion>],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> BTreeMap<SlotOf, (String, i64)> {
    let mut out = BTreeMap::new();
    for history in histories {
        let timeline = Timeline::new(history, None);
        let mut cursor = from - TimeDelta::nanoseconds(1);
        while let Some((slot, version)) = timeline.next_after(cursor) {
            if slot.scheduled_at > to {
                break;
            }
            cursor = slot.scheduled_at;
            let spec = history
                .iter()
                .find(|v| v.version == version)
                .and_then(|v| v.spec.as_ref());
            if let Some(spec) = spec {
                let key = (spec.job.clone(), spec.partition.clone(), cursor);
                out.insert(key, (spec_id(history), version));
            }
        }
    }
    out
}

fn spec_id(history: &[ScheduleVersion]) -> String {
    history.first().map(|v| v.id.clone()).unwrap_or_default()
}

/// Checks both rules over `runs` and the ledger `effects`, for the stored schedules whose
/// versions are `histories`, the slots of `window`, and the operator's `skips`.
pub fn check_schedules(
    histories: &[Vec<ScheduleVersion>],
    runs: &[RunRecord],
    effects: &[Effect],
    window: &Window,
    skips: &[OperatorSkip],
) -> ScheduleReport {
    let mut report = ScheduleReport::default();
    let pairs: BTreeSet<(String, String)> = histories
        .iter()
        .flatten()
        .filter_map(|v| v.spec.as_ref())
        .map(|s| (s.job.clone(), s.partition.clone()))
        .collect();
    let rows: BTreeMap<SlotOf, &RunRecord> = runs
        .iter()
        .map(|r| {
            let k = &r.key;
            ((k.job.clone(), k.partition.clone(), k.scheduled_at), r)
        })
        .collect();
    let first = histories.iter().flatten().map(|v| v.effective_at).min();
    let last = rows
        .keys()
        .map(|(_, _, at)| *at)
        .fold(window.to, DateTime::max);
    let all = first.map_or_else(BTreeMap::new, |first| produced(histories, first, last));
    on_schedule(&mut report, &rows, &pairs, &all);
    recorded(&mut report, &rows, &all, window);
    operator_skips(&mut report, &rows, effects, skips);
    report
}

/// Every run of a stored schedule's `(job, partition)` with trigger `schedule` and an attempt is a
/// slot its versions produce.
fn on_schedule(
    report: &mut ScheduleReport,
    rows: &BTreeMap<SlotOf, &RunRecord>,
    pairs: &BTreeSet<(String, String)>,
    produced: &BTreeMap<SlotOf, (String, i64)>,
) {
    for (key, run) in rows {
        let (job, partition, at) = key;
        let ours = pairs.contains(&(job.clone(), partition.clone()));
        if !ours || run.trigger != Trigger::Schedule || run.attempts.is_empty() {
            continue;
        }
        report.ran += 1;
        if !produced.contains_key(key) {
            report.off_schedule += 1;
            report.violations.push(format!(
                "({job:?}, {:?}, {partition:?}): ran ({}, attempt {}) but no version in force at its instant produces it",
                slot_name(*at),
                run.status,
                run.attempt
            ));
        }
    }
}

/// Every slot produced within the window has a row that succeeded or says why it did not.
fn recorded(
    report: &mut ScheduleReport,
    rows: &BTreeMap<SlotOf, &RunRecord>,
    produced: &BTreeMap<SlotOf, (String, i64)>,
    window: &Window,
) {
    for (key, (id, version)) in produced.iter().filter(|(k, _)| window.covers(k.2)) {
        let (job, partition, at) = key;
        report.produced += 1;
        let run = rows.get(key);
        let status = run.map_or("none", |r| r.status.as_str());
        *report.recorded.entry(status).or_insert(0) += 1;
        let why = run.and_then(|r| {
            let last = r.attempts.last().and_then(|a| a.message.as_deref());
            r.error_message.as_deref().or(last)
        });
        let fine = match run {
            Some(r) => r.status == RunStatus::Succeeded || why.is_some_and(|m| !m.is_empty()),
            None => false,
        };
        if !fine {
            report.unrecorded += 1;
            report.violations.push(format!(
                "({job:?}, {:?}, {partition:?}): slot of `{id}` v{version} has {}",
                slot_name(*at),
                run.map_or("no row".into(), |r| format!(
                    "a row {} with no reason",
                    r.status
                ))
            ));
        }
    }
}

/// A slot an operator skipped is recorded `skipped` with their reason, and never ran.
fn operator_skips(
    report: &mut ScheduleReport,
    rows: &BTreeMap<SlotOf, &RunRecord>,
    effects: &[Effect],
    skips: &[OperatorSkip],
) {
    for skip in skips {
        let slot = slot_name(skip.slot);
        let name = format!("({:?}, {slot:?}, {:?})", skip.job, skip.partition);
        let key = (skip.job.clone(), skip.partition.clone(), skip.slot);
        let message = operator_skip_message(&skip.reason);
        match rows.get(&key) {
            None => report
                .violations
                .push(format!("{name}: skipped by an operator, but has no row")),
            Some(r)
                if r.status != RunStatus::Skipped
                    || r.error_message.as_deref() != Some(message.as_str())
                    || !r.attempts.is_empty() =>
            {
                report.violations.push(format!(
                    "{name}: skipped by an operator, but the row is {} ({:?}) with {} attempts",
                    r.status,
                    r.error_message,
                    r.attempts.len()
                ));
            }
            Some(_) => {}
        }
        let started = effects.iter().filter(|e| {
            e.kind == "start"
                && e.job == skip.job
                && e.slot == slot
                && e.partition == skip.partition
        });
        if let Some(e) = started.min_by_key(|e| e.at) {
            report.violations.push(format!(
                "{name}: skipped by an operator, but ran (pid {}, token {})",
                e.pid, e.token
            ));
        }
    }
}

#[cfg(test)]
mod tests;
