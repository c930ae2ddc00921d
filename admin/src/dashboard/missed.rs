//! Missed slots across every job: slots of the schedule in a range with no row at all.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;

use super::Ui;
use super::input::{instant_field, maybe_instant};
use super::page::{Base, admin_error, frame, html_response, live, segment, utc};
use crate::{AdminError, JobMissed, MissedCursor, MissedQuery, rfc3339};

/// The range shown when none is asked for: the last hour (a day of 1,000 jobs every 5 minutes is
/// 288,000 slots to compare).
const DEFAULT_HOURS: i64 = 1;

/// The most slots on one page, across every job.
const PAGE: usize = 200;

#[derive(Deserialize)]
pub(super) struct Range {
    from: Option<String>,
    to: Option<String>,
    cursor: Option<String>,
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
    let after = match range.cursor.as_deref().filter(|c| !c.is_empty()) {
        Some(token) => Some(MissedCursor::parse(token)?),
        None => None,
    };
    let page = ui
        .admin
        .missed_page(MissedQuery {
            job: None,
            from,
            to,
            after,
            limit: PAGE,
        })
        .await?;
    let next = page.next.as_ref().map(|cursor| {
        format!(
            "{}?from={}&to={}&cursor={}",
            base.at("/missed"),
            segment(&rfc3339(&from)),
            segment(&rfc3339(&to)),
            segment(&cursor.token())
        )
    });
    Ok(html! {
        h1 { "Missed slots" }
        form.filters method="get" action=(base.at("/missed")) {
            (instant_field("From", "from", Some(&from), false))
            (instant_field("To", "to", Some(&to), false))
            button type="submit" { "Show" }
        }
        p { "Slots of each schedule from " (utc(&from)) " to " (utc(&to))
            " with no run and no record of why, counted from when each job was first registered; "
            (PAGE) " a page. Backfill them from the job's page." }
        (live("missed", list(base, &page.jobs, &from, &to, range.cursor.is_some())))
        @if let Some(next) = next { p { a.next href=(next) { "Next page →" } } }
    })
}

fn list(
    base: &Base,
    found: &[JobMissed],
    from: &DateTime<Utc>,
    to: &DateTime<Utc>,
    continued: bool,
) -> Markup {
    let any = found
        .iter()
        .any(|j| j.missed.as_ref().map_or(true, |s| !s.is_empty()));
    html! {
        @if !any && !continued { p { "None on this page: every slot it looked at has a row." } }
        @for JobMissed { job, missed } in found {
            @match missed {
                Ok(slots) if slots.is_empty() => {}
                Ok(slots) => {
                    h2 { a href=(base.job(job)) { (job) } " · " (slots.len()) " missed on this page" }
                    ul.slots {
                        @for slot in slots {
                            li { (utc(&slot.scheduled_at)) " · " small { (slot.wall.to_string()) " local" } }
                        }
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
