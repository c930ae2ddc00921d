//! How the stored schedules, a skip and an unskip are printed. A schedule's `--json` object is the
//! HTTP router's (`GET /schedules/{id}`), field for field.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use slotguard::store::{RunRecord, ScheduleSpec, ScheduleVersion};
use slotguard_admin::{ScheduleFields, StoredSchedule};

use super::{cell, lines, one_line, or_dash, slot_of, table, ts};

/// `schedule show`: the latest version's fields, one a line, then the next slots.
pub(in crate::ops) fn schedule(stored: &StoredSchedule, json: bool) -> String {
    if json {
        return format!("{}\n", schedule_json(stored));
    }
    let v = &stored.version;
    let spec = v.spec.as_ref();
    let of = |f: fn(&ScheduleSpec) -> Option<String>| or_dash(spec.and_then(f));
    let fields = [
        ("id", v.id.clone()),
        ("version", v.version.to_string()),
        ("state", state(spec).to_owned()),
        ("job", of(|s| Some(s.job.clone()))),
        ("cron", of(|s| Some(s.cron.clone()))),
        ("zone", of(|s| Some(s.zone.clone()))),
        ("dst", of(|s| Some(s.dst.clone()))),
        ("partition", of(|s| Some(s.partition.clone()))),
        ("start at", of(|s| s.start_at.as_ref().map(ts))),
        ("end at", of(|s| s.end_at.as_ref().map(ts))),
        (
            "remaining runs",
            of(|s| s.remaining_runs.map(|n| n.to_string())),
        ),
        ("note", of(|s| s.note.clone())),
        (
            "pause on failure",
            of(|s| Some(if s.pause_on_failure { "yes" } else { "no" }.to_owned())),
        ),
        ("in force from", ts(&v.effective_at)),
        ("changed by", v.changed_by.clone()),
        ("changed at", ts(&v.changed_at)),
        ("reason", v.reason.clone()),
    ];
    let mut out = String::new();
    for (name, value) in fields {
        let _ = writeln!(out, "{:<17} {}", format!("{name}:"), cell(&value));
    }
    out.push('\n');
    out.push_str(&slots(&stored.next, spec.map(|s| s.zone.as_str())));
    out
}

/// `schedule add` and `schedule set`: what was done, then the schedule as it now is.
pub(in crate::ops) fn schedule_changed(done: &str, stored: &StoredSchedule) -> String {
    let v = &stored.version;
    format!(
        "{done}: schedule {} at version {}, in force from {}\n{}",
        cell(&v.id),
        v.version,
        ts(&v.effective_at),
        schedule(stored, false)
    )
}

/// `schedule remove`.
pub(in crate::ops) fn schedule_removed(removed: &ScheduleVersion) -> String {
    format!(
        "removed: schedule {} at version {} (by {}); no slots from {}; its history stays\n",
        cell(&removed.id),
        removed.version,
        cell(&removed.changed_by),
        ts(&removed.effective_at)
    )
}

/// `schedule list`: a page of at most `limit`; when it is full, the last line says how to ask for
/// the next.
pub(in crate::ops) fn schedules(page: &[StoredSchedule], limit: usize, json: bool) -> String {
    if json {
        return lines(page.iter().map(schedule_json));
    }
    let rows: Vec<Vec<String>> = page
        .iter()
        .map(|stored| {
            let (v, spec) = (&stored.version, stored.version.spec.as_ref());
            let of = |f: fn(&ScheduleSpec) -> String| spec.map(f).unwrap_or_default();
            vec![
                v.id.clone(),
                v.version.to_string(),
                of(|s| s.job.clone()),
                of(|s| s.partition.clone()),
                of(|s| s.cron.clone()),
                of(|s| s.zone.clone()),
                state(spec).to_owned(),
                or_dash(stored.next.first().map(ts)),
                spec.and_then(|s| s.note.clone()).unwrap_or_default(),
            ]
        })
        .collect();
    let header = [
        "ID",
        "VERSION",
        "JOB",
        "PARTITION",
        "CRON",
        "ZONE",
        "STATE",
        "NEXT",
        "NOTE",
    ];
    let mut out = table(&header, &rows);
    if let Some(last) = page.last().filter(|_| page.len() == limit) {
        let _ = writeln!(
            out,
            "more: ask again with --after '{}'",
            one_line(&last.version.id)
        );
    }
    out
}

/// `schedule preview`: the slots `fields` would have; nothing was stored.
pub(in crate::ops) fn preview(
    fields: &ScheduleFields,
    next: &[DateTime<Utc>],
    json: bool,
) -> String {
    if json {
        return format!("{}\n", json!({ "next": next }));
    }
    let text = |v: &Option<String>| cell(v.as_deref().unwrap_or_default());
    format!(
        "next {} slot(s) of \"{}\" in {} (DST policy {}) for job {}; nothing is stored\n{}",
        next.len(),
        text(&fields.cron),
        text(&fields.tz),
        cell(fields.dst.as_deref().unwrap_or("vixie")),
        text(&fields.job),
        slots(next, fields.tz.as_deref())
    )
}

/// `skip`: the run that says so.
pub(in crate::ops) fn skipped(run: &RunRecord) -> String {
    let job = cell(&run.key.job);
    let slot = ts(&run.key.scheduled_at);
    let partition = if run.key.partition.is_empty() {
        String::new()
    } else {
        format!(" --partition '{}'", one_line(&run.key.partition))
    };
    format!(
        "skipped: {job} slot {} is {} ({}); no replica runs it; undo with `slotguard unskip {job} {slot}{partition} --reason ...`\n",
        slot_of(run),
        run.status,
        cell(run.error_message.as_deref().unwrap_or("")),
    )
}

/// `unskip`.
pub(in crate::ops) fn unskipped(job: &str, slot: DateTime<Utc>, partition: &str) -> String {
    let partition = if partition.is_empty() {
        String::new()
    } else {
        format!(" (partition {})", cell(partition))
    };
    format!(
        "unskipped: {} slot {}{partition}; it runs as its schedule says\n",
        cell(job),
        ts(&slot)
    )
}

/// `active`, `paused`, or `removed`.
fn state(spec: Option<&ScheduleSpec>) -> &'static str {
    match spec {
        None => "removed",
        Some(s) if s.paused => "paused",
        Some(_) => "active",
    }
}

/// The next slots, in UTC and in `zone`; a last line when there is none.
fn slots(next: &[DateTime<Utc>], zone: Option<&str>) -> String {
    let zone = zone.and_then(|z| slotguard_cron::parse_zone(z).ok());
    let rows: Vec<Vec<String>> = next
        .iter()
        .map(|slot| {
            let local = zone.map(|tz| {
                slot.with_timezone(&tz)
                    .format("%a %Y-%m-%d %H:%M:%S%:z %Z")
                    .to_string()
            });
            vec![ts(slot), or_dash(local)]
        })
        .collect();
    let mut out = table(&["NEXT", "LOCAL"], &rows);
    if next.is_empty() {
        out.push_str("no upcoming slot (paused, ended, spent or removed)\n");
    }
    out
}

/// A schedule as the HTTP router answers it.
fn schedule_json(stored: &StoredSchedule) -> Value {
    let v = &stored.version;
    let spec = v.spec.as_ref();
    json!({
        "id": v.id,
        "version": v.version,
        "source": "api",
        "job": spec.map(|s| &s.job),
        "cron": spec.map(|s| &s.cron),
        "tz": spec.map(|s| &s.zone),
        "dst": spec.map(|s| &s.dst),
        "partition": spec.map(|s| &s.partition),
        "startAt": spec.and_then(|s| s.start_at),
        "endAt": spec.and_then(|s| s.end_at),
        "remainingRuns": spec.and_then(|s| s.remaining_runs),
        "paused": spec.is_some_and(|s| s.paused),
        "note": spec.and_then(|s| s.note.as_ref()),
        "pauseOnFailure": spec.is_some_and(|s| s.pause_on_failure),
        "removed": spec.is_none(),
        "effectiveAt": v.effective_at,
        "changedBy": v.changed_by,
        "changedAt": v.changed_at,
        "reason": v.reason,
        "next": stored.next,
    })
}
