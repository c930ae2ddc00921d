//! The jobs page: every registered job at a glance.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::Ui;
use super::page::{Base, admin_error, badge, frame, html_response, live, notice, utc};
use super::words::describe;
use crate::{AdminError, JobStatus};
use slotguard::store::{RunFilter, RunStatus};

#[derive(Deserialize)]
pub(super) struct Done {
    done: Option<String>,
}

pub(super) async fn page(State(ui): State<Ui>, base: Base, Query(done): Query<Done>) -> Response {
    let jobs = match ui.admin.jobs().await {
        Ok(jobs) => jobs,
        Err(e) => return admin_error(&base, &e),
    };
    let running = match count(&ui, RunStatus::Running).await {
        Ok(counts) => counts,
        Err(e) => return admin_error(&base, &e),
    };
    let queued = match count(&ui, RunStatus::Pending).await {
        Ok(counts) => counts,
        Err(e) => return admin_error(&base, &e),
    };
    let body = html! {
        h1 { "Jobs" }
        (notice(done.done.as_deref()))
        (live("jobs", table(&base, &jobs, &Counts { running, queued })))
    };
    html_response(StatusCode::OK, frame(&base, "Jobs", body))
}

/// The runs of each job in one status, from one page of at most [`MAX_PAGE`](crate::MAX_PAGE)
/// runs across every job (a count that reaches it is shown as "1000+").
async fn count(ui: &Ui, status: RunStatus) -> Result<HashMap<String, usize>, AdminError> {
    let filter = RunFilter {
        status: Some(status),
        limit: crate::MAX_PAGE,
        ..RunFilter::default()
    };
    let mut counts: HashMap<String, usize> = HashMap::new();
    for run in ui.admin.runs(filter).await? {
        *counts.entry(run.key.job).or_default() += 1;
    }
    Ok(counts)
}

/// Runs per job: running now, and queued (`pending`: due, waiting for a retry, for a free moment
/// of the job, or for the resume of a paused job).
struct Counts {
    running: HashMap<String, usize>,
    queued: HashMap<String, usize>,
}

impl Counts {
    fn shown(counts: &HashMap<String, usize>, job: &str) -> String {
        match counts.get(job).copied().unwrap_or(0) {
            n if n >= crate::MAX_PAGE => format!("{n}+"),
            n => n.to_string(),
        }
    }
}

fn table(base: &Base, jobs: &[JobStatus], counts: &Counts) -> Markup {
    html! {
        @if jobs.is_empty() {
            p { "No job is registered yet: a scheduler registers its jobs when it starts." }
        } @else {
            table.jobs {
                thead { tr {
                    th { "Job" } th { "Schedule" } th { "Zone · DST" } th { "Guard" }
                    th { "State" } th { "Last run" } th { "Next slots" } th { "Running" }
                    th { "Queued" } th { "Replicas" }
                } }
                tbody {
                    @for job in jobs {
                        (row(base, job, counts))
                    }
                }
            }
        }
    }
}

fn row(base: &Base, job: &JobStatus, counts: &Counts) -> Markup {
    let def = &job.record.definition;
    let zone = def.zone.parse::<chrono_tz::Tz>().ok();
    html! {
        tr {
            td { a.job href=(base.job(&def.name)) { (def.name) } }
            td {
                @if let Some(words) = describe(&def.cron) { (words) br; }
                code { (def.cron) }
                @if let Some(calendar) = &def.calendar { br; small { "on " (calendar.to_string()) } }
            }
            td { (def.zone) br; small { (def.dst) } }
            td { (def.guard) }
            td { (pause_state(&job.record)) }
            td {
                @if let Some(run) = &job.last_run {
                    a href=(base.run(&def.name, &run.key.scheduled_at, &run.key.partition)) {
                        (badge(run.status))
                    }
                    br; small { (utc(&run.key.scheduled_at)) }
                } @else { "never" }
            }
            td { (next_slots(&job.next_slots, zone)) }
            td { (Counts::shown(&counts.running, &def.name)) }
            td.queued { (Counts::shown(&counts.queued, &def.name)) }
            td {
                @if job.active() {
                    a href=(base.at("/replicas")) { (job.replicas.len()) " live" }
                } @else {
                    span.badge.s-skipped title="no live replica runs it" { "inactive" }
                }
            }
        }
    }
}

/// "paused by … : reason", or "active".
pub(super) fn pause_state(record: &slotguard::store::JobRecord) -> Markup {
    html! {
        @if record.paused {
            span.badge.s-paused { "paused" }
            br;
            small {
                "by " (record.paused_by.as_deref().unwrap_or("?"))
                @if let Some(at) = &record.paused_at { " at " (utc(at)) }
                ": " (record.paused_reason.as_deref().unwrap_or(""))
            }
        } @else {
            span.badge.s-active { "active" }
        }
    }
}

/// The next slots, local and UTC.
pub(super) fn next_slots(slots: &[DateTime<Utc>], zone: Option<chrono_tz::Tz>) -> Markup {
    html! {
        @if slots.is_empty() { "–" }
        ul.slots {
            @for slot in slots {
                li {
                    @if let Some(zone) = zone.filter(|z| *z != chrono_tz::UTC) {
                        (slot.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S %Z").to_string())
                        " · "
                    }
                    small { (utc(slot)) }
                }
            }
        }
    }
}
