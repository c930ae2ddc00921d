//! How one run is printed: `slotguard run`, `trigger --wait` and `retry --failed`.

use std::fmt::Write as _;
use std::time::Duration;

use slotguard::store::{RunRecord, SlotKey};
use slotguard_admin::{RangeRetry, finished};

use super::{at, cell, or_dash, run_json, slot_of, table, ts};

/// `slotguard run`: the run's fields, one a line, then its attempts.
pub(in crate::ops) fn run(run: &RunRecord, json: bool) -> String {
    if json {
        return format!("{}\n", run_json(run));
    }
    let fields = [
        ("job", run.key.job.clone()),
        ("slot", slot_of(run)),
        ("status", run.status.to_string()),
        ("trigger", run.trigger.as_str().to_owned()),
        ("attempt", run.attempt.to_string()),
        ("owner", or_dash(run.owner.clone())),
        ("wall time", format!("{} {}", run.wall_time, run.zone)),
        ("business date", run.business_date.to_string()),
        (
            "next attempt",
            or_dash(run.next_attempt_at.as_ref().map(at)),
        ),
        ("error", or_dash(run.error_message.clone())),
    ];
    let mut out = String::new();
    for (name, value) in fields {
        let _ = writeln!(out, "{:<14} {}", format!("{name}:"), cell(&value));
    }
    out.push('\n');
    let rows: Vec<Vec<String>> = run
        .attempts
        .iter()
        .map(|a| {
            vec![
                a.attempt.to_string(),
                a.status.to_string(),
                a.owner.clone(),
                at(&a.started_at),
                or_dash(a.finished_at.as_ref().map(at)),
                a.message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "ATTEMPT", "STATUS", "OWNER", "STARTED", "FINISHED", "MESSAGE",
        ],
        &rows,
    ));
    out
}

/// `slotguard trigger --wait`: how the wait ended.
pub(in crate::ops) fn waited(run: &RunRecord, timeout: Duration) -> String {
    if finished(run) {
        format!(
            "{} slot {}: {} after {} attempt(s){}\n",
            cell(&run.key.job),
            ts(&run.key.scheduled_at),
            run.status,
            run.attempt,
            run.error_message
                .as_deref()
                .map(|m| format!(": {}", cell(m)))
                .unwrap_or_default()
        )
    } else {
        format!(
            "{} slot {}: still {} after {} s; follow it with `slotguard run {} {}`\n",
            cell(&run.key.job),
            ts(&run.key.scheduled_at),
            run.status,
            timeout.as_secs_f64(),
            cell(&run.key.job),
            ts(&run.key.scheduled_at),
        )
    }
}

/// `slotguard retry --failed`.
pub(in crate::ops) fn range_retried(job: &str, report: &RangeRetry) -> String {
    let rows = |keys: &[SlotKey], what: &str| -> Vec<Vec<String>> {
        keys.iter()
            .map(|k| vec![ts(&k.scheduled_at), k.partition.clone(), what.to_owned()])
            .collect()
    };
    let mut all = rows(&report.retried, "retried");
    all.extend(rows(&report.changed, "changed meanwhile; left alone"));
    let mut out = table(&["SLOT", "PARTITION", "RETRY"], &all);
    let _ = writeln!(
        out,
        "retried {} failed or dead run(s) of {} (one audit entry each); a replica running the job starts each within one recovery poll",
        report.retried.len(),
        cell(job)
    );
    out
}
