//! Failures across every job: failed, dead and abandoned runs, newest slot first.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;

use super::Ui;
use super::job::runs_table;
use super::page::{Base, admin_error, frame, html_response, live};
use slotguard::store::{RunFilter, RunRecord, RunStatus};

/// The most runs of each failing status listed.
const PER_STATUS: usize = 100;

pub(super) async fn page(State(ui): State<Ui>, base: Base) -> Response {
    let mut runs: Vec<RunRecord> = Vec::new();
    for status in [RunStatus::Failed, RunStatus::Dead, RunStatus::Abandoned] {
        let filter = RunFilter {
            status: Some(status),
            limit: PER_STATUS,
            ..RunFilter::default()
        };
        match ui.admin.runs(filter).await {
            Ok(found) => runs.extend(found),
            Err(e) => return admin_error(&base, &e),
        }
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.key.scheduled_at));
    runs.truncate(PER_STATUS);
    let body = html! {
        h1 { "Failures" }
        p { "Failed, dead and abandoned runs of every job, newest slot first (at most "
            (PER_STATUS) "). Open a run to retry it." }
        (live("failures", runs_table(&base, &runs, false)))
    };
    html_response(StatusCode::OK, frame(&base, "Failures", body))
}
