//! Missed slots across every job: slots of the schedule in a range with no row at all.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::Ui;
use super::input::{instant_field, maybe_instant};
use super::page::{Base, admin_error, frame, html_response, live, utc};
use crate::admin::{AdminError, JobMissed};

/// The range shown when none is asked for: the last hour (a day of 1,000 jobs every 5 minutes is
/// 288,000 slots to compare).
const DEFAULT_HOURS: i64 = 1;

/// The most slots listed per job.
const PER_JOB: usize = 50;

#[derive(Deserialize)]
pub(super) struct Range {
    from: Option<String>,
    to: Option<String>,
}

pub(super) async fn page(State(ui): State<Ui>, base: Base, Query(range): Query<Range>) -> Response {
    match render(&ui, &base, &range).await {
        Ok(body) => html_response(StatusCode::OK, frame(&base, "Missed slots", body)),
        Err(e) => admin_error(&base, &e),
    }
}

async fn render(ui: &Ui, base: &Base, range: &Range) -> Result<Markup, AdminError> {
    let now = Utc::now();
    let to = maybe_instant("to", range.to.as_deref())?.unwrap_or(now);
    let from = maybe_instant("from", range.from.as_deref())?
        .unwrap_or(to - chrono::Duration::hours(DEFAULT_HOURS));
    let found = ui.admin.missed_everywhere(from, to).await?;
    Ok(html! {
        h1 { "Missed slots" }
        form.filters method="get" action=(base.at("/missed")) {
            (instant_field("From", "from", Some(&from), false))
            (instant_field("To", "to", Some(&to), false))
            button type="submit" { "Show" }
        }
        p { "Slots of each schedule from " (utc(&from)) " to " (utc(&to))
            " with no run and no record of why. Backfill them from the job's page." }
        (live("missed", list(base, &found, &from, &to)))
    })
}

fn list(base: &Base, found: &[JobMissed], from: &DateTime<Utc>, to: &DateTime<Utc>) -> Markup {
    let any = found
        .iter()
        .any(|j| j.missed.as_ref().map_or(true, |s| !s.is_empty()));
    html! {
        @if !any { p { "None: every slot of the range has a row." } }
        @for JobMissed { job, missed } in found {
            @match missed {
                Ok(slots) if slots.is_empty() => {}
                Ok(slots) => {
                    h2 { a href=(base.job(job)) { (job) } " · " (slots.len()) " missed" }
                    ul.slots {
                        @for slot in slots.iter().take(PER_JOB) {
                            li { (utc(&slot.scheduled_at)) " · " small { (slot.wall.to_string()) " local" } }
                        }
                        @if slots.len() > PER_JOB { li { "… and " (slots.len() - PER_JOB) " more" } }
                    }
                }
                Err(e) => {
                    h2 { a href=(base.job(job)) { (job) } }
                    p.error { "Not counted from " (utc(from)) " to " (utc(to)) ": " (e.to_string()) }
                }
            }
        }
    }
}
