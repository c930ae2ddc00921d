//! The changes of operators' holiday overrides, from the holidays page: add a holiday to a business
//! calendar (`/holidays/add`: calendar, date, holiday name) or remove one from it
//! (`/holidays/remove`: calendar, date), each with a required reason. As every change, each posts
//! once for the confirmation page and once more with `confirm=yes` to be made through
//! [`Admin::override_holiday`](crate::Admin::override_holiday), as the HTTP API's
//! `POST /calendar-overrides` is, audited under the operator's name. A bad field is answered as
//! the HTTP API answers it (400, naming the field), before the confirmation page and after it, and
//! nothing is written.

use axum::extract::{Path, State};
use axum::response::Response;
use maud::{Markup, PreEscaped, html};
use slotguard::store::calendars::MAX_HOLIDAY_NAME;
use slotguard::store::{OverrideKind, OverrideSpec};

use super::confirm::{self, Asked, ChangeForm, Confirmation, done};
use super::forms::form_to;
use super::input::present;
use super::page::{Base, admin_error};
use super::{Settings, Ui};
use crate::{AdminError, ChangeRequest, parse_holiday_date};

/// The forms to add a holiday to one of `calendars` and to remove one (none when read-only).
pub(super) fn forms(base: &Base, settings: &Settings, calendars: &[String]) -> Markup {
    let add = html! {
        (calendar_field(calendars))
        (date_field())
        label { "Holiday name "
            input type="text" name="name" required maxlength=(MAX_HOLIDAY_NAME)
                placeholder="Temporary holiday"; }
    };
    let remove = html! { (calendar_field(calendars)) (date_field()) };
    html! {
        (form_to(settings, &base.at("/holidays/add"), "add-holiday", "Add a holiday…", add))
        (form_to(settings, &base.at("/holidays/remove"), "remove-holiday", "Remove a holiday…", remove))
    }
}

/// The known calendars, none chosen until the operator chooses one.
fn calendar_field(calendars: &[String]) -> Markup {
    html! {
        label { "Calendar "
            select name="calendar" required {
                option value="" { "choose…" }
                @for calendar in calendars { option value=(calendar) { (calendar) } }
            }
        }
    }
}

fn date_field() -> Markup {
    html! {
        label { "Date (YYYY-MM-DD) "
            input type="text" name="date" required pattern=r"\d{4}-\d{2}-\d{2}"
                placeholder="2026-10-02"; }
    }
}

/// A holiday form posted to `/holidays/{action}` (`add` or `remove`).
pub(super) async fn submit(
    State(ui): State<Ui>,
    base: Base,
    Path(action): Path<String>,
    Asked { by, form }: Asked,
) -> Response {
    let spec = match read(&ui, &action, &form, &by).await {
        Ok(spec) => spec,
        Err(e) => return admin_error(&base, &e),
    };
    let holidays = base.at("/holidays");
    if !form.confirmed() {
        let confirmation = Confirmation {
            action: label(spec.kind),
            url: format!("{holidays}/{}", spec.kind.as_str()),
            back: holidays,
            what: describe(&spec),
            preview: None,
        };
        return confirm::page(&base, &ui.settings, &form, confirmation);
    }
    let name = Some(spec.name.as_str());
    match ui
        .admin
        .override_holiday(&spec.calendar, spec.date, spec.kind, name, &by)
        .await
    {
        Ok(_) => done(&holidays, label(spec.kind)),
        Err(e) => admin_error(&base, &e),
    }
}

/// The override a form asks for, checked as it will be written.
async fn read(
    ui: &Ui,
    action: &str,
    form: &ChangeForm,
    by: &ChangeRequest,
) -> Result<OverrideSpec, AdminError> {
    let kind = match action {
        "add" => OverrideKind::Add,
        "remove" => OverrideKind::Remove,
        _ => {
            return Err(AdminError::Invalid {
                field: "action",
                problem: "no such change".into(),
            });
        }
    };
    by.validate()?;
    let calendar = present(form.calendar.as_deref()).unwrap_or("");
    let date = parse_holiday_date(form.date.as_deref().unwrap_or(""))?;
    let name = match kind {
        OverrideKind::Add => present(form.name.as_deref()).unwrap_or(""),
        OverrideKind::Remove => "",
    };
    ui.admin
        .checked_override(calendar, date, kind, name, by)
        .await
}

/// The change's name, as its form's id, its confirmation and its notice name it.
fn label(kind: OverrideKind) -> &'static str {
    match kind {
        OverrideKind::Add => "add-holiday",
        OverrideKind::Remove => "remove-holiday",
    }
}

/// What the confirmation page says will happen.
fn describe(spec: &OverrideSpec) -> String {
    let becomes = match spec.kind {
        OverrideKind::Add => format!("a holiday named {}", spec.name),
        OverrideKind::Remove => "no holiday (a weekend day stays one)".to_owned(),
    };
    format!(
        "Make {} {becomes} on calendar {}: running schedulers follow it from when the change takes \
         effect (half a second after it is stored); a slot already claimed stays where it was",
        spec.date, spec.calendar
    )
}

/// The notice shown on the holidays page after a change (`?done=action`): fixed texts.
pub(super) fn notice(done: Option<&str>) -> Markup {
    let text = match done {
        Some("add-holiday") => "Holiday added: running schedulers follow it from the time shown.",
        Some("remove-holiday") => {
            "Holiday removed: running schedulers follow it from the time shown."
        }
        _ => return PreEscaped(String::new()),
    };
    html! { p.notice role="status" { (text) } }
}
