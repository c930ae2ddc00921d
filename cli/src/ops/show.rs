//! How the operations print their answers: tables for a person, one JSON object a line for a
//! program (the objects the HTTP router returns, field for field).
//!
//! Tables have a fixed set of columns per operation, in a fixed order, left-aligned and separated by
//! two spaces; an empty cell is `-`, so every line of a table has the same number of fields up to the
//! last column. Text from the store (job names, owners, messages, reasons) is escaped, so no control
//! character or bidirectional override reaches the terminal, and shortened to 60 characters (`--json`
//! has it in full).

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use slotguard::store::{
    AttemptRecord, AuditRecord, JobRecord, ReplicaRecord, RunRecord, RunStatus,
};
use slotguard_admin::{
    BackfillReport, JobStatus, MissedCursor, MissedPage, MissedSlot, Retried, Triggered,
};

mod holiday;
mod run;
mod schedule;

pub(super) use holiday::{holiday_written, holidays};
pub(super) use run::{range_retried, run, waited};
pub(super) use schedule::{
    preview, schedule, schedule_changed, schedule_removed, schedules, skipped, unskipped,
};

/// The widest a table cell gets, in characters.
const MAX_CELL: usize = 60;

/// A slot as the CLI prints and reads it: RFC 3339 in UTC, with milliseconds only when it has some
/// (manual slots do).
pub(crate) fn ts(t: &DateTime<Utc>) -> String {
    if t.timestamp_subsec_nanos() == 0 {
        t.to_rfc3339_opts(SecondsFormat::Secs, true)
    } else {
        t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
    }
}

/// An instant of the store's clock, to the second, so that a column lines up.
fn at(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// User input for an error message: escaped and shortened, so a message stays one readable line.
pub(crate) fn shown(input: &str) -> String {
    slotguard_cron::shown_within(input, 64)
}

/// `message` with every control character escaped: an error is one line, whatever a driver said.
pub(crate) fn one_line(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        push_safe(&mut out, c);
    }
    out
}

/// Pushes `c`, escaped if it could move the cursor, end the line or reorder the text around it.
fn push_safe(out: &mut String, c: char) {
    let invisible = matches!(c,
        '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}');
    if c.is_control() || invisible {
        out.extend(c.escape_debug());
    } else {
        out.push(c);
    }
}

/// A table cell: escaped, shortened, `-` when empty.
fn cell(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        push_safe(&mut escaped, c);
    }
    if escaped.trim().is_empty() {
        return "-".to_owned();
    }
    if escaped.chars().count() > MAX_CELL {
        let mut head: String = escaped.chars().take(MAX_CELL - 1).collect();
        head.push('…');
        head
    } else {
        escaped
    }
}

/// Left-aligned columns, two spaces apart; the last column is not padded.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| cell(c)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let mut text = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(c);
            } else {
                let _ = write!(text, "{c:<w$}  ");
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header);
    for row in &rows {
        line(&row.iter().map(String::as_str).collect::<Vec<_>>());
    }
    out
}

/// One JSON object a line.
fn lines(values: impl Iterator<Item = Value>) -> String {
    let mut out = String::new();
    for value in values {
        out.push_str(&value.to_string());
        out.push('\n');
    }
    out
}

fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "-".to_owned())
}

/// `slotguard jobs`.
pub(super) fn jobs(jobs: &[JobStatus], json: bool) -> String {
    if json {
        return lines(jobs.iter().map(job_json));
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|j| {
            let d = &j.record.definition;
            let last = j.last_run.as_ref();
            vec![
                d.name.clone(),
                d.cron.clone(),
                d.zone.clone(),
                or_dash(d.calendar.as_ref().map(ToString::to_string)),
                d.guard.clone(),
                or_dash(j.next_slots.first().map(ts)),
                or_dash(last.map(|r| ts(&r.key.scheduled_at))),
                or_dash(last.map(|r| r.status.to_string())),
                job_state(j).to_owned(),
                if j.record.paused {
                    format!(
                        "by {}: {}",
                        j.record.paused_by.as_deref().unwrap_or("?"),
                        j.record.paused_reason.as_deref().unwrap_or("")
                    )
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    table(
        &[
            "JOB",
            "CRON",
            "ZONE",
            "CALENDAR",
            "GUARD",
            "NEXT",
            "LAST SLOT",
            "LAST STATUS",
            "STATE",
            "NOTE",
        ],
        &rows,
    )
}

/// A job's state: `paused`, `active` while a live replica runs it, `inactive` when none does (every
/// replica that had it is gone).
fn job_state(job: &JobStatus) -> &'static str {
    if job.record.paused {
        "paused"
    } else if job.active() {
        "active"
    } else {
        "inactive"
    }
}

/// `slotguard replicas`.
pub(super) fn replicas(replicas: &[ReplicaRecord], json: bool) -> String {
    if json {
        return lines(replicas.iter().map(replica_json));
    }
    let rows: Vec<Vec<String>> = replicas
        .iter()
        .map(|r| {
            let info = &r.info;
            vec![
                info.id.clone(),
                if r.alive { "alive" } else { "gone" }.to_owned(),
                info.host.clone(),
                info.pid.to_string(),
                info.version.clone(),
                info.roles.join(","),
                info.runs_held.to_string(),
                at(&r.started_at),
                at(&r.heartbeat_at),
                info.jobs.join(","),
            ]
        })
        .collect();
    table(
        &[
            "REPLICA",
            "STATE",
            "HOST",
            "PID",
            "VERSION",
            "ROLES",
            "RUNS",
            "STARTED",
            "HEARTBEAT",
            "JOBS",
        ],
        &rows,
    )
}

fn replica_json(record: &ReplicaRecord) -> Value {
    let info = &record.info;
    json!({
        "id": info.id,
        "host": info.host,
        "pid": info.pid,
        "version": info.version,
        "roles": info.roles,
        "jobs": info.jobs,
        "runsHeld": info.runs_held,
        "startedAt": record.started_at,
        "heartbeatAt": record.heartbeat_at,
        "goneAfterMs": u64::try_from(info.gone_after.as_millis()).unwrap_or(u64::MAX),
        "alive": record.alive,
    })
}

/// `slotguard runs`.
pub(super) fn runs(runs: &[RunRecord], json: bool) -> String {
    if json {
        return lines(runs.iter().map(run_json));
    }
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                ts(&r.key.scheduled_at),
                r.key.partition.clone(),
                r.status.to_string(),
                r.attempt.to_string(),
                r.trigger.as_str().to_owned(),
                or_dash(r.owner.clone()),
                r.error_message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "SLOT",
            "PARTITION",
            "STATUS",
            "ATTEMPT",
            "TRIGGER",
            "OWNER",
            "MESSAGE",
        ],
        &rows,
    )
}

fn slot_rows(slots: &[MissedSlot]) -> Vec<Vec<String>> {
    slots.iter().map(slot_row).collect()
}

fn slot_row(m: &MissedSlot) -> Vec<String> {
    vec![
        ts(&m.scheduled_at),
        m.wall.format("%Y-%m-%d %H:%M:%S").to_string(),
        m.business_date.to_string(),
    ]
}

const SLOT_HEADER: [&str; 3] = ["SLOT", "WALL TIME", "BUSINESS DATE"];

/// `slotguard missed`: a page of one job's slots (`one`) or of every job's.
pub(super) fn missed(page: &MissedPage, one: bool, json: bool) -> String {
    if one {
        one_job_missed(page, json)
    } else {
        missed_everywhere(page, json)
    }
}

/// A page of one job's missed slots, and how to ask for the next (`--from`).
fn one_job_missed(page: &MissedPage, json: bool) -> String {
    let slots: Vec<MissedSlot> = page.slots().copied().collect();
    let next = page.next.as_ref().map(|c| ts(&c.from));
    if json {
        let next = next.map(|from| json!({ "next": from }));
        return lines(slots.iter().map(missed_json).chain(next));
    }
    let mut out = table(&SLOT_HEADER, &slot_rows(&slots));
    let _ = writeln!(out, "{} missed slot(s)", slots.len());
    if let Some(from) = next {
        let _ = writeln!(out, "more: ask again with --from {from}");
    }
    out
}

/// `slotguard missed` without a job: a slot a row, its job first, then a line per job whose slots
/// were not counted. With `--json`, such a job is an object with `job` and `error`.
fn missed_everywhere(page: &MissedPage, json: bool) -> String {
    let jobs = &page.jobs;
    let next = page.next.as_ref().map(MissedCursor::token);
    let slots = || {
        jobs.iter().flat_map(|j| {
            let slots = j.missed.as_deref().unwrap_or_default();
            slots.iter().map(move |slot| (j.job.as_str(), slot))
        })
    };
    let failed = || {
        jobs.iter()
            .filter_map(|j| Some((&j.job, j.missed.as_ref().err()?)))
    };
    if json {
        let slots = slots().map(|(job, slot)| {
            let mut line = missed_json(slot);
            line["job"] = json!(job);
            line
        });
        let failed = failed().map(|(job, e)| json!({ "job": job, "error": e.to_string() }));
        let next = next.map(|cursor| json!({ "next": cursor }));
        return lines(slots.chain(failed).chain(next));
    }
    let header = ["JOB", SLOT_HEADER[0], SLOT_HEADER[1], SLOT_HEADER[2]];
    let rows: Vec<Vec<String>> = slots()
        .map(|(job, slot)| {
            let mut row = vec![job.to_owned()];
            row.extend(slot_row(slot));
            row
        })
        .collect();
    let mut out = table(&header, &rows);
    for (job, e) in failed() {
        let _ = writeln!(
            out,
            "{}: not counted: {}",
            shown(job),
            one_line(&e.to_string())
        );
    }
    let with = jobs
        .iter()
        .filter(|j| j.missed.as_ref().is_ok_and(|s| !s.is_empty()));
    let _ = writeln!(
        out,
        "{} missed slot(s) in {} of {} job(s)",
        rows.len(),
        with.count(),
        jobs.len()
    );
    if let Some(cursor) = next {
        let _ = writeln!(out, "more: ask again with --cursor '{}'", one_line(&cursor));
    }
    out
}

/// `slotguard backfill`.
pub(super) fn backfilled(report: &BackfillReport, per_second: f64) -> String {
    let mut out = table(&SLOT_HEADER, &slot_rows(&report.slots));
    if report.dry_run {
        let _ = writeln!(
            out,
            "dry run: {} run(s) would be created; add --execute to create them",
            report.slots.len()
        );
    } else {
        let _ = write!(
            out,
            "created {} run(s) ({} existed already)",
            report.created, report.existing
        );
        if let Some(last) = &report.last_due {
            let _ = write!(out, ", due at {per_second}/s, the last at {}", at(last));
        }
        out.push('\n');
    }
    out
}

/// `slotguard retry`: what happens next, which waits for the resume while the job is paused.
pub(super) fn retried(retried: &Retried) -> String {
    let run = &retried.run;
    let job = cell(&run.key.job);
    let next = run.attempt + 1;
    let outlook = if retried.job_paused {
        format!(
            "the job is paused, so attempt {next} waits and starts after `slotguard resume {job}`"
        )
    } else {
        format!("a replica running the job starts attempt {next} within one recovery poll")
    };
    format!(
        "retry accepted: {job} slot {} is {}; {outlook}\n",
        slot_of(run),
        run.status
    )
}

/// `slotguard cancel` of a run that `was` running or pending.
pub(super) fn cancelled(run: &RunRecord, was: RunStatus) -> String {
    let outlook = if was == RunStatus::Running {
        "the replica running it is told at its next heartbeat, and its outcome is refused"
    } else {
        "it will not start"
    };
    format!(
        "cancelled: {} slot {} was {was} and is {} ({}); {outlook}\n",
        cell(&run.key.job),
        slot_of(run),
        run.status,
        cell(run.error_message.as_deref().unwrap_or("")),
    )
}

fn slot_of(run: &RunRecord) -> String {
    if run.key.partition.is_empty() {
        ts(&run.key.scheduled_at)
    } else {
        format!(
            "{} (partition {})",
            ts(&run.key.scheduled_at),
            cell(&run.key.partition)
        )
    }
}

/// `slotguard trigger`.
pub(super) fn triggered(job: &str, t: &Triggered) -> String {
    format!(
        "triggered: {} slot {} (manual, run {}); {}\n",
        cell(job),
        ts(&t.scheduled_at),
        t.run_id,
        t.outlook()
    )
}

/// `slotguard pause` and `slotguard resume`, by `actor` (a resumed job shows who paused it).
pub(super) fn paused(record: &JobRecord, actor: &str) -> String {
    format!(
        "{}: {} (by {}); every replica sees it within one recovery poll\n",
        if record.paused { "paused" } else { "resumed" },
        cell(&record.definition.name),
        cell(actor),
    )
}

/// `slotguard audit`: a page of at most `limit`; when it is full, the last line says how to ask for
/// the next.
pub(super) fn audit(entries: &[AuditRecord], limit: usize, json: bool) -> String {
    let full = entries.len() == limit;
    if json {
        return lines(entries.iter().map(audit_json));
    }
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|a| {
            vec![
                at(&a.at),
                a.job.clone(),
                a.entry.action.clone(),
                or_dash(a.scheduled_at.as_ref().map(ts)),
                a.entry.actor.clone(),
                a.entry.reason.clone(),
            ]
        })
        .collect();
    let mut out = table(&["AT", "JOB", "ACTION", "SLOT", "ACTOR", "REASON"], &rows);
    if let Some(last) = entries.last().filter(|_| full) {
        let _ = writeln!(out, "more: ask again with --before {}", last.id);
    }
    out
}

/// A schedule fingerprint as 16 hex digits, as the HTTP router writes it: a `u64` does not survive a
/// JavaScript number.
fn fingerprint(value: u64) -> String {
    format!("{value:016x}")
}

fn job_json(status: &JobStatus) -> Value {
    let record = &status.record;
    let def = &record.definition;
    json!({
        "name": def.name,
        "cron": def.cron,
        "zone": def.zone,
        "dst": def.dst,
        "guard": def.guard,
        "fingerprint": fingerprint(def.fingerprint),
        "calendar": def.calendar.as_ref().map(|c| json!({
            "name": c.name,
            "version": c.version,
            "adjust": c.adjust,
            "shift": c.shift,
        })),
        "paused": record.paused,
        "pausedBy": record.paused_by,
        "pausedReason": record.paused_reason,
        "pausedAt": record.paused_at,
        "registeredAt": record.registered_at,
        "seenAt": record.seen_at,
        "nextSlots": status.next_slots,
        "active": status.active(),
        "replicas": status.replicas,
        "lastRun": status.last_run.as_ref().map(|run| json!({
            "id": run.id,
            "scheduledAt": run.key.scheduled_at,
            "partition": run.key.partition,
            "status": run.status.as_str(),
            "trigger": run.trigger.as_str(),
            "attempt": run.attempt,
            "startedAt": run.started_at,
            "finishedAt": run.finished_at,
            "errorMessage": run.error_message,
        })),
    })
}

fn run_json(run: &RunRecord) -> Value {
    json!({
        "id": run.id,
        "job": run.key.job,
        "scheduledAt": run.key.scheduled_at,
        "partition": run.key.partition,
        "status": run.status.as_str(),
        "trigger": run.trigger.as_str(),
        "attempt": run.attempt,
        "owner": run.owner,
        "token": run.token,
        "heartbeatAt": run.heartbeat_at,
        "staleAfterMs": u64::try_from(run.stale_after.as_millis()).unwrap_or(u64::MAX),
        "nextAttemptAt": run.next_attempt_at,
        "createdAt": run.created_at,
        "updatedAt": run.updated_at,
        "startedAt": run.started_at,
        "finishedAt": run.finished_at,
        "errorClass": run.error_class,
        "errorMessage": run.error_message,
        "zone": run.zone,
        "wallTime": run.wall_time,
        "businessDate": run.business_date,
        "fingerprint": fingerprint(run.fingerprint),
        "calendar": run.calendar.as_ref().map(|c| json!({
            "nominalDates": c.nominal_dates,
            "name": c.calendar,
            "version": c.version,
        })),
        "attempts": run.attempts.iter().map(attempt_json).collect::<Vec<_>>(),
    })
}

fn attempt_json(attempt: &AttemptRecord) -> Value {
    json!({
        "attempt": attempt.attempt,
        "owner": attempt.owner,
        "token": attempt.token,
        "status": attempt.status.as_str(),
        "startedAt": attempt.started_at,
        "finishedAt": attempt.finished_at,
        "message": attempt.message,
    })
}

fn missed_json(slot: &MissedSlot) -> Value {
    json!({
        "scheduledAt": slot.scheduled_at,
        "wallTime": slot.wall,
        "businessDate": slot.business_date,
    })
}

fn audit_json(record: &AuditRecord) -> Value {
    json!({
        "id": record.id,
        "job": record.job,
        "runId": record.run_id,
        "scheduledAt": record.scheduled_at,
        "action": record.entry.action,
        "actor": record.entry.actor,
        "reason": record.entry.reason,
        "at": record.at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_escaped_shortened_and_never_empty() {
        assert_eq!(cell(""), "-");
        assert_eq!(cell("x'; DROP TABLE jobs; --"), "x'; DROP TABLE jobs; --");
        assert_eq!(cell("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(cell("abc\u{202e}def"), "abc\\u{202e}def");
        assert_eq!(cell("München 東京"), "München 東京");
        let long = cell(&"x".repeat(100));
        assert_eq!(long.chars().count(), MAX_CELL);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn tables_line_up() {
        let text = table(
            &["A", "BB", "C"],
            &[
                vec!["long value".into(), String::new(), "last".into()],
                vec!["x".into(), "y".into(), String::new()],
            ],
        );
        assert_eq!(
            text,
            "A           BB  C\n\
             long value  -   last\n\
             x           y   -\n"
        );
    }

    #[test]
    fn slots_keep_their_milliseconds() {
        let whole = DateTime::parse_from_rfc3339("2026-03-08T17:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(ts(&whole), "2026-03-08T17:00:00Z");
        let manual = whole + chrono::Duration::milliseconds(1);
        assert_eq!(ts(&manual), "2026-03-08T17:00:00.001Z");
        assert_eq!(at(&manual), "2026-03-08T17:00:00Z");
        assert_eq!(one_line("a\nb"), "a\\nb");
    }
}
