//! The audit trail of every job, newest first, 200 a page.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use serde::Deserialize;

use super::Ui;
use super::page::{Base, admin_error, frame, html_response, live};
use super::run::audit_table;

/// The most records on one page.
const PAGE: usize = 200;

#[derive(Deserialize)]
pub(super) struct Older {
    before: Option<i64>,
}

pub(super) async fn page(State(ui): State<Ui>, base: Base, Query(older): Query<Older>) -> Response {
    let records = match ui.admin.audit_page(None, older.before, PAGE).await {
        Ok(records) => records,
        Err(e) => return admin_error(&base, &e),
    };
    let next = records
        .last()
        .filter(|_| records.len() == PAGE)
        .map(|last| format!("{}?before={}", base.at("/audit"), last.id));
    let body = html! {
        h1 { "Audit trail" }
        p { "Every change, who asked for it and why; " (PAGE) " a page, newest first." }
        (live("audit", audit_table(&base, &records)))
        @if let Some(next) = next { p { a.next href=(next) { "Older →" } } }
    };
    html_response(StatusCode::OK, frame(&base, "Audit", body))
}
