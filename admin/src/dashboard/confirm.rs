//! The step every change goes through: a form posts once to see the confirmation page (what will
//! happen, and a preview where there is one), and once more with `confirm=yes` to make the change;
//! then the browser is sent to the page of what changed, with a notice.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::Settings;
use super::page::{Base, csrf_field, frame, html_response};

/// Every field any change form sends.
#[derive(Deserialize, Debug, Default)]
pub(super) struct ChangeForm {
    #[serde(default)]
    pub(super) csrf: String,
    #[serde(default)]
    pub(super) reason: String,
    pub(super) slot: Option<String>,
    pub(super) partition: Option<String>,
    pub(super) from: Option<String>,
    pub(super) to: Option<String>,
    pub(super) per_second: Option<String>,
    pub(super) before_first_seen: Option<String>,
    /// An upcoming slot as the skip form's list names it: the instant, and its partition after a
    /// blank.
    pub(super) next: Option<String>,
    /// A stored schedule's fields.
    pub(super) id: Option<String>,
    pub(super) cron: Option<String>,
    pub(super) tz: Option<String>,
    pub(super) remaining_runs: Option<String>,
    pub(super) pause_on_failure: Option<String>,
    pub(super) note: Option<String>,
    /// The version of the schedule the form was read at.
    pub(super) version: Option<String>,
    pub(super) confirm: Option<String>,
}

impl ChangeForm {
    /// Whether this is the second post, the one that makes the change.
    pub(super) fn confirmed(&self) -> bool {
        self.confirm.as_deref() == Some("yes")
    }

    /// The fields the confirmation page carries back, as they were typed.
    fn hidden(&self) -> Vec<(&'static str, &str)> {
        let optional = [
            ("slot", &self.slot),
            ("partition", &self.partition),
            ("from", &self.from),
            ("to", &self.to),
            ("per_second", &self.per_second),
            ("before_first_seen", &self.before_first_seen),
            ("next", &self.next),
            ("id", &self.id),
            ("cron", &self.cron),
            ("tz", &self.tz),
            ("remaining_runs", &self.remaining_runs),
            ("pause_on_failure", &self.pause_on_failure),
            ("note", &self.note),
            ("version", &self.version),
        ];
        let mut out = vec![("reason", self.reason.as_str())];
        out.extend(
            optional
                .into_iter()
                .filter_map(|(name, value)| value.as_deref().map(|v| (name, v))),
        );
        out
    }
}

/// What a confirmation page says and where its button posts.
pub(super) struct Confirmation<'a> {
    /// The change's name, as the form's path ends (`pause`, `skip`).
    pub(super) action: &'a str,
    /// Where the form posted, and the confirmation posts again.
    pub(super) url: String,
    /// The page to go back to without changing anything.
    pub(super) back: String,
    /// What will happen, in a sentence.
    pub(super) what: String,
    /// What the change would make (a backfill's slots, a schedule's next slots).
    pub(super) preview: Option<Markup>,
}

/// The confirmation page: what will happen, and the button that does it.
pub(super) fn page(
    base: &Base,
    settings: &Settings,
    form: &ChangeForm,
    confirmation: Confirmation<'_>,
) -> Response {
    let Confirmation {
        action,
        url,
        back,
        what,
        preview,
    } = confirmation;
    let body = html! {
        h1 { "Confirm: " (action) }
        p.confirm { (what) "." }
        p { "Reason: " q { (form.reason.trim()) } }
        @if let Some(preview) = preview { (preview) }
        form.change id="confirm" method="post" action=(url) {
            (csrf_field(&settings.csrf_token))
            @for (name, value) in form.hidden() {
                input type="hidden" name=(name) value=(value);
            }
            input type="hidden" name="confirm" value="yes";
            button type="submit" { "Confirm " (action) }
            " "
            a href=(back) { "Back, change nothing" }
        }
    };
    html_response(StatusCode::OK, frame(base, "Confirm", body))
}

/// The answer to a change made: `303` to `target`, with `done=action` for its notice.
pub(super) fn done(target: &str, action: &str) -> Response {
    let sep = if target.contains('?') { '&' } else { '?' };
    let location = format!("{target}{sep}done={action}");
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

/// Who asks for a change posted with `form`, and why: the operator the application's middleware
/// authenticated (or the dashboard's own check), with the form's reason; or the error page of a
/// refusal (no operator, a bad CSRF token).
pub(super) fn asked_by(
    ui: &super::Ui,
    base: &super::page::Base,
    headers: &axum::http::HeaderMap,
    actor: Option<axum::extract::Extension<crate::http::Actor>>,
    form: &ChangeForm,
) -> Result<crate::ChangeRequest, Box<axum::response::Response>> {
    let actor = actor.map(|axum::extract::Extension(a)| a);
    match super::security::operator(&ui.settings, headers, actor.as_ref(), &form.csrf) {
        Ok(name) => Ok(crate::ChangeRequest::new(name, form.reason.trim())),
        Err(refusal) => Err(Box::new(super::page::error_page(
            base,
            refusal.status(),
            refusal.message(),
        ))),
    }
}
