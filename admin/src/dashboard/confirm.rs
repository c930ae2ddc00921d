//! The step every change goes through: a form posts once to see the confirmation page (what will
//! happen, and a preview where there is one), and once more with `confirm=yes` to make the change;
//! then the browser is sent to the page of what changed, with a notice.

use axum::extract::{Form, FromRequest, FromRequestParts, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::page::{Base, csrf_field, error_page, frame, html_response};
use super::{Settings, Ui, security};
use crate::ChangeRequest;
use crate::http::Actor;

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
    /// A holiday override's calendar, date (`YYYY-MM-DD`) and holiday name.
    pub(super) calendar: Option<String>,
    pub(super) date: Option<String>,
    pub(super) name: Option<String>,
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
            ("calendar", &self.calendar),
            ("date", &self.date),
            ("name", &self.name),
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

/// A change form and who asks for it: the operator the application's middleware authenticated,
/// with the form's reason. Extracting it answers the error page of a refusal instead (no operator,
/// a bad CSRF token, a cross-site post, a read-only dashboard).
pub(super) struct Asked {
    pub(super) by: ChangeRequest,
    pub(super) form: ChangeForm,
}

impl FromRequest<Ui> for Asked {
    type Rejection = Response;

    async fn from_request(request: Request, ui: &Ui) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let base = Base::from_request_parts(&mut parts, ui)
            .await
            .unwrap_or_else(|never| match never {});
        let actor = parts.extensions.get::<Actor>().cloned();
        let headers = parts.headers.clone();
        let Form(form) = Form::<ChangeForm>::from_request(Request::from_parts(parts, body), ui)
            .await
            .map_err(IntoResponse::into_response)?;
        match security::operator(&ui.settings, &headers, actor.as_ref(), &form.csrf) {
            Ok(name) => Ok(Asked {
                by: ChangeRequest::new(name, form.reason.trim()),
                form,
            }),
            Err(refusal) => Err(error_page(&base, refusal.status(), refusal.message())),
        }
    }
}
