//! The audit trail of every job, newest first.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;

use super::Ui;
use super::page::{Base, admin_error, frame, html_response, live};
use super::run::audit_table;

pub(super) async fn page(State(ui): State<Ui>, base: Base) -> Response {
    let records = match ui.admin.audit(None, 200).await {
        Ok(records) => records,
        Err(e) => return admin_error(&base, &e),
    };
    let body = html! {
        h1 { "Audit trail" }
        p { "Every change, who asked for it and why; the newest 200." }
        (live("audit", audit_table(&base, &records)))
    };
    html_response(StatusCode::OK, frame(&base, "Audit", body))
}
