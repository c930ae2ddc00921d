//! The jobs page: every registered job at a glance.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::Ui;
use super::glance::{Glance, WINDOW_HOURS};
use super::page::{Base, admin_error, badge, frame, html_response, live, notice, utc};
use super::search::Search;
use super::words::describe;
use crate::JobStatus;

pub(super) async fn page(
    State(ui): State<Ui>,
    base: Base,
    Query(search): Query<Search>,
) -> Response {
    let (jobs, glance) =
        match tokio::try_join!(ui.admin.jobs(), Glance::read(&ui.admin, Utc::now())) {
            Ok(read) => read,
            Err(e) => return admin_error(&base, &e),
        };
    let shown: Vec<&JobStatus> = jobs.iter().filter(|j| search.matches(j)).collect();
    let body = html! {
        h1 { "Jobs" }
        (notice(search.done.as_deref()))
        (live("glance", glance.summary(&base, &jobs)))
        (search.form(&base, &jobs))
        @if search.narrows() { p.count { (shown.len()) " of " (jobs.len()) " jobs match" } }
        (live("jobs", table(&base, &shown, &glance, jobs.is_empty())))
    };
    html_response(StatusCode::OK, frame(&base, "Jobs", body))
}

fn table(base: &Base, jobs: &[&JobStatus], glance: &Glance, none_registered: bool) -> Markup {
    html! {
        @if none_registered {
            p { "No job is registered yet: a scheduler registers its jobs when it starts." }
        } @else if jobs.is_empty() {
            p { "No job matches the filters." }
        } @else {
            div.scroll { table.jobs {
                thead { tr {
                    th { "Job" } th { "Schedule" } th { "Zone · DST" } th { "Guard" }
                    th { "State" } th { "Last run" } th { "Next slots" } th.n { "Running" }
                    th.n { "Queued" } th.n { "Failed" br; small { (WINDOW_HOURS) " h" } }
                    th.n { "Missed" br; small { (WINDOW_HOURS) " h" } } th { "Replicas" }
                } }
                tbody {
                    @for job in jobs {
                        (row(base, job, glance))
                    }
                }
            } }
        }
    }
}

fn row(base: &Base, job: &JobStatus, glance: &Glance) -> Markup {
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
            (glance.cells(base, job))
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
