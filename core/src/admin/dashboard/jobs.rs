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
use crate::admin::JobStatus;
use crate::store::{RunFilter, RunStatus};

#[derive(Deserialize)]
pub(super) struct Done {
    done: Option<String>,
}

pub(super) async fn page(State(ui): State<Ui>, base: Base, Query(done): Query<Done>) -> Response {
    let jobs = match ui.admin.jobs().await {
        Ok(jobs) => jobs,
        Err(e) => return admin_error(&base, &e),
    };
    let running = RunFilter {
        status: Some(RunStatus::Running),
        limit: crate::admin::MAX_PAGE,
        ..RunFilter::default()
    };
    let mut in_progress: HashMap<String, usize> = HashMap::new();
    match ui.admin.runs(running).await {
        Ok(runs) => {
            for run in runs {
                *in_progress.entry(run.key.job).or_default() += 1;
            }
        }
        Err(e) => return admin_error(&base, &e),
    }
    let body = html! {
        h1 { "Jobs" }
        (notice(done.done.as_deref()))
        (live("jobs", table(&base, &jobs, &in_progress)))
    };
    html_response(StatusCode::OK, frame(&base, "Jobs", body))
}

fn table(base: &Base, jobs: &[JobStatus], in_progress: &HashMap<String, usize>) -> Markup {
    html! {
        @if jobs.is_empty() {
            p { "No job is registered yet: a scheduler registers its jobs when it starts." }
        } @else {
            table.jobs {
                thead { tr {
                    th { "Job" } th { "Schedule" } th { "Zone · DST" } th { "Guard" }
                    th { "State" } th { "Last run" } th { "Next slots" } th { "Running" } th { "Replicas" }
                } }
                tbody {
                    @for job in jobs {
                        (row(base, job, in_progress.get(&job.record.definition.name).copied()))
                    }
                }
            }
        }
    }
}

fn row(base: &Base, job: &JobStatus, running: Option<usize>) -> Markup {
    let def = &job.record.definition;
    let zone = def.zone.parse::<chrono_tz::Tz>().ok();
    html! {
        tr {
            td { a.job href=(base.job(&def.name)) { (def.name) } }
            td {
                @if let Some(words) = describe(&def.cron) { (words) br; }
                code { (def.cron) }
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
            td { (running.unwrap_or(0)) }
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
pub(super) fn pause_state(record: &crate::store::JobRecord) -> Markup {
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
