//! Operators' holiday overrides in force, by calendar and date: who added or removed each holiday,
//! why, and from when running schedulers follow it. Read-only: overrides are written through
//! `slotguard holiday`, the HTTP API or [`Admin::add_holiday`](crate::Admin::add_holiday).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use slotguard::store::{CalendarOverride, OverrideKind};

use super::Ui;
use super::page::{Base, admin_error, frame, html_response, utc};

pub(super) async fn page(State(ui): State<Ui>, base: Base) -> Response {
    let overrides = match ui.admin.calendar_overrides(None).await {
        Ok(overrides) => overrides,
        Err(e) => return admin_error(&base, &e),
    };
    let body = html! {
        h1 { "Holiday overrides" }
        p { "Holidays added to a business calendar, or removed from it, without a deploy. Running \
            schedulers follow each from the time shown; a slot already claimed stays where it was. \
            Add or remove one with " code { "slotguard holiday" } " or " code { "POST /calendar-overrides" } "." }
        (table(&overrides))
    };
    html_response(StatusCode::OK, frame(&base, "Holiday overrides", body))
}

fn table(overrides: &[CalendarOverride]) -> Markup {
    html! {
        @if overrides.is_empty() {
            p { "No calendar has an override." }
        } @else {
            table.holidays {
                thead { tr {
                    th { "Calendar" } th { "Date" } th { "Holiday" } th { "By" } th { "Reason" }
                    th { "In force from" }
                } }
                tbody {
                    @for o in overrides {
                        tr {
                            td { code { (o.spec.calendar) } }
                            td { (o.spec.date) }
                            td { @match o.spec.kind {
                                OverrideKind::Add => { "added: " (o.spec.name) }
                                OverrideKind::Remove => { "removed" }
                            } }
                            td { (o.changed_by) }
                            td { (o.reason) }
                            td { (utc(&o.effective_at)) }
                        }
                    }
                }
            }
        }
    }
}
