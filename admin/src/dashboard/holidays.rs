//! Operators' holiday overrides in force, by calendar and date: who added or removed each holiday,
//! why, and from when running schedulers follow it. Unless the dashboard is read-only, the page
//! has the forms to add a holiday to a known calendar and to remove one ([`holiday_changes`]), as
//! `slotguard holiday`, the HTTP API and [`Admin::add_holiday`](crate::Admin::add_holiday) do.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;
use slotguard::store::{CalendarOverride, OverrideKind};

use super::page::{Base, admin_error, frame, html_response, utc};
use super::{Ui, holiday_changes};
use crate::AdminError;

#[derive(Deserialize, Debug, Default)]
pub(super) struct HolidaysQuery {
    done: Option<String>,
}

pub(super) async fn page(
    State(ui): State<Ui>,
    base: Base,
    Query(query): Query<HolidaysQuery>,
) -> Response {
    match render(&ui, &base, query.done.as_deref()).await {
        Ok(body) => html_response(StatusCode::OK, frame(&base, "Holiday overrides", body)),
        Err(e) => admin_error(&base, &e),
    }
}

async fn render(ui: &Ui, base: &Base, done: Option<&str>) -> Result<Markup, AdminError> {
    let overrides = ui.admin.calendar_overrides(None).await?;
    let settings = &ui.settings;
    let calendars = if settings.read_only {
        Vec::new()
    } else {
        ui.admin.holiday_calendars().await?
    };
    Ok(html! {
        h1 { "Holiday overrides" }
        (holiday_changes::notice(done))
        p { "Holidays added to a business calendar, or removed from it, without a deploy. Running \
            schedulers follow each from the time shown; a slot already claimed stays where it was. \
            Add or remove one here, with " code { "slotguard holiday" } " or "
            code { "POST /calendar-overrides" } "." }
        @if !settings.read_only {
            details.actions open {
                summary { "Add or remove a holiday" }
                (holiday_changes::forms(base, settings, &calendars))
            }
        }
        (table(&overrides))
    })
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
