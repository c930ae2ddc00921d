//! The frame every page shares (navigation, the live script, the stylesheet), links under the
//! prefix the dashboard is mounted at, and error pages.

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::{AdminError, rfc3339};
use slotguard::store::RunStatus;

/// Where the dashboard is mounted (`/internal/dashboard`), read from the request: links are written
/// under it whatever prefix the application nests the router at.
#[derive(Debug, Clone)]
pub(super) struct Base(pub(super) String);

impl<S: Send + Sync> FromRequestParts<S> for Base {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let inner = parts.uri.path().to_owned();
        let outer = parts
            .extensions
            .get::<OriginalUri>()
            .map_or_else(|| inner.clone(), |o| o.0.path().to_owned());
        // `/ui` nested at `/ui` is `/` inside.
        let prefix = outer
            .strip_suffix(inner.as_str())
            .or_else(|| outer.strip_suffix(inner.trim_end_matches('/')))
            .unwrap_or("");
        Ok(Base(prefix.trim_end_matches('/').to_owned()))
    }
}

impl Base {
    /// `path` (starting with `/`) under the prefix.
    pub(super) fn at(&self, path: &str) -> String {
        format!("{}{path}", self.0)
    }

    /// The jobs page: the prefix itself (a router nested at `/ui` answers `/ui`, not `/ui/`).
    pub(super) fn home(&self) -> String {
        if self.0.is_empty() {
            "/".to_owned()
        } else {
            self.0.clone()
        }
    }

    /// The page of a job.
    pub(super) fn job(&self, job: &str) -> String {
        self.at(&format!("/jobs/{}", segment(job)))
    }

    /// The page of a stored schedule.
    pub(super) fn schedule(&self, id: &str) -> String {
        self.at(&format!("/schedules/{}", segment(id)))
    }

    /// The page of a run.
    pub(super) fn run(&self, job: &str, slot: &DateTime<Utc>, partition: &str) -> String {
        let mut url = format!("{}/runs/{}", self.job(job), segment(&rfc3339(slot)));
        if !partition.is_empty() {
            url.push_str("?partition=");
            url.push_str(&segment(partition));
        }
        url
    }
}

/// Percent-encodes everything but unreserved characters: a path segment or a query value.
pub(super) fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A page in the shared frame.
pub(super) fn frame(base: &Base, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · slotguard" }
                link rel="stylesheet" href=(base.at("/assets/app.css"));
                script src=(base.at("/assets/app.js")) defer {}
            }
            body {
                nav {
                    strong { "slotguard" }
                    a href=(base.home()) { "Jobs" }
                    a href=(base.at("/failures")) { "Failures" }
                    a href=(base.at("/missed")) { "Missed slots" }
                    a href=(base.at("/audit")) { "Audit" }
                    a href=(base.at("/replicas")) { "Replicas" }
                    a href=(base.at("/holidays")) { "Holidays" }
                }
                main { (body) }
            }
        }
    }
}

/// An HTML answer, its invisible characters made visible (`\u{202e}`).
pub(super) fn html_response(status: StatusCode, markup: Markup) -> Response {
    let page = super::visible::visible(markup.into_string());
    let mut response = (status, page).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// An error as a page with its status.
pub(super) fn error_page(base: &Base, status: StatusCode, message: &str) -> Response {
    let body = html! {
        h1 { "Error " (status.as_u16()) }
        p.error { (message) }
        p { a href=(base.home()) { "Back to the jobs" } }
    };
    html_response(status, frame(base, "Error", body))
}

/// The status an admin error is answered with.
pub(super) fn error_status(error: &AdminError) -> StatusCode {
    match error {
        AdminError::UnknownJob { .. }
        | AdminError::UnknownRun { .. }
        | AdminError::UnknownSchedule { .. } => StatusCode::NOT_FOUND,
        AdminError::Refused { .. }
        | AdminError::PauseState { .. }
        | AdminError::ScheduleExists { .. }
        | AdminError::StaleVersion { .. } => StatusCode::CONFLICT,
        AdminError::Invalid { .. } => StatusCode::BAD_REQUEST,
        AdminError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// An admin error as a page.
pub(super) fn admin_error(base: &Base, error: &AdminError) -> Response {
    error_page(base, error_status(error), &error.to_string())
}

pub(super) async fn not_found(base: Base) -> Response {
    error_page(
        &base,
        StatusCode::NOT_FOUND,
        "no such page in the dashboard",
    )
}

/// An instant as the pages show it: RFC 3339 in UTC, to the second (milliseconds for manual slots),
/// the form the filters take.
pub(super) fn utc(at: &DateTime<Utc>) -> String {
    let format = if at.timestamp_subsec_millis() == 0 {
        "%Y-%m-%dT%H:%M:%SZ"
    } else {
        "%Y-%m-%dT%H:%M:%S%.3fZ"
    };
    at.format(format).to_string()
}

/// An optional instant, or a dash.
pub(super) fn maybe(at: Option<&DateTime<Utc>>) -> String {
    at.map_or_else(|| "–".to_owned(), utc)
}

/// How long from `start` to `end` (or to now, while running).
pub(super) fn duration(start: Option<&DateTime<Utc>>, end: Option<&DateTime<Utc>>) -> String {
    let Some(start) = start else {
        return "–".into();
    };
    let end = end.copied().unwrap_or_else(Utc::now);
    let ms = (end - *start).num_milliseconds().max(0);
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min", ms / 60_000)
    }
}

/// A run status as a coloured badge.
pub(super) fn badge(status: RunStatus) -> Markup {
    html! { span class={ "badge s-" (status.as_str()) } { (status.as_str()) } }
}

/// The form field every change carries.
pub(super) fn csrf_field(token: &str) -> Markup {
    html! { input type="hidden" name="csrf" value=(token); }
}

/// Marks a part of a page that the script refreshes in place.
pub(super) fn live(id: &str, content: Markup) -> Markup {
    html! { div id=(id) data-live { (content) } }
}

pub(super) async fn stylesheet() -> Response {
    asset("text/css; charset=utf-8", include_str!("assets/app.css"))
}

pub(super) async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    )
}

fn asset(content_type: &'static str, text: &'static str) -> Response {
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The notice shown after a change (`?done=action`): fixed texts, never the query's.
pub(super) fn notice(done: Option<&str>) -> Markup {
    let text = match done {
        Some("retry") => {
            "Retried: the run is pending; a replica picks it up within a recovery poll."
        }
        Some("cancel") => "Cancelled: the run ended failed.",
        Some("trigger") => "Triggered: a manual run is pending.",
        Some("pause") => "Paused: no replica claims its slots until it is resumed.",
        Some("resume") => "Resumed.",
        Some("backfill") => "Backfill created: the runs become due at the rate asked for.",
        Some("retry-failed") => "Retried: the failed runs of the range are pending again.",
        Some("skip") => {
            "Skipped: the slot is recorded skipped with the reason; no replica runs it."
        }
        Some("unskip") => "Unskipped: the slot runs as its schedule says.",
        Some("remove-schedule") => {
            "Schedule removed: no slots from when the change takes effect; its history stays."
        }
        _ => return PreEscaped(String::new()),
    };
    html! { p.notice role="status" { (text) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_encode_everything_but_unreserved_characters() {
        assert_eq!(segment("daily-settlement"), "daily-settlement");
        assert_eq!(segment("<script>/x?y#z"), "%3Cscript%3E%2Fx%3Fy%23z");
        assert_eq!(segment("정"), "%EC%A0%95");
    }

    #[test]
    fn base_joins_the_prefix() {
        let base = Base("/internal/ui".into());
        assert_eq!(base.job("a b"), "/internal/ui/jobs/a%20b");
        let slot = DateTime::parse_from_rfc3339("2026-03-07T17:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            base.run("a", &slot, "p:1"),
            "/internal/ui/jobs/a/runs/2026-03-07T17%3A00%3A00Z?partition=p%3A1"
        );
    }
}
