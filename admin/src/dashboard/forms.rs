//! The forms that ask for a change: each posts to `/jobs/{job}/{action}` (a stored schedule's to
//! `/schedules/{id}/{action}`, a holiday's to `/holidays/{action}`) with a CSRF token and a
//! required reason, and leads to a confirmation page first.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::Settings;
use super::input::instant_field;
use super::page::{Base, csrf_field};
use crate::rfc3339;

/// A form for `action` on `job`, with `fields` before the reason.
pub(super) fn change_form(
    base: &Base,
    settings: &Settings,
    job: &str,
    action: &str,
    button: &str,
    fields: Markup,
) -> Markup {
    let url = format!("{}/{action}", base.job(job));
    form_to(settings, &url, action, button, fields)
}

/// A form `#form-{action}` posting to `url`, with `fields` before the reason.
pub(super) fn form_to(
    settings: &Settings,
    url: &str,
    action: &str,
    button: &str,
    fields: Markup,
) -> Markup {
    if settings.read_only {
        return html! {};
    }
    let id = format!("form-{action}");
    html! {
        form.change id=(id) method="post" action=(url) {
            (csrf_field(&settings.csrf_token))
            (fields)
            label {
                "Reason (required, audited) "
                input type="text" name="reason" required maxlength="1024"
                    placeholder="why, for the audit trail";
            }
            button type="submit" { (button) }
        }
    }
}

/// Pause, or resume a paused job.
pub(super) fn pause_or_resume(base: &Base, settings: &Settings, job: &str, paused: bool) -> Markup {
    let (action, button) = if paused {
        ("resume", "Resume…")
    } else {
        ("pause", "Pause…")
    };
    change_form(base, settings, job, action, button, html! {})
}

/// Trigger a manual run now.
pub(super) fn trigger(base: &Base, settings: &Settings, job: &str) -> Markup {
    change_form(base, settings, job, "trigger", "Trigger now…", html! {})
}

/// Backfill a range: the first submit previews it (a dry run).
pub(super) fn backfill(base: &Base, settings: &Settings, job: &str) -> Markup {
    let now = Utc::now();
    let fields = html! {
        (instant_field("From", "from", Some(&(now - chrono::Duration::hours(1))), true))
        (instant_field("To", "to", Some(&now), true))
        label { "Runs per second " input type="number" name="per_second" min="0.001"
            max="1000" step="any" value="1"; }
        label { input type="checkbox" name="before_first_seen" value="yes";
            " Reach before the job was first registered (history from before it existed)" }
    };
    change_form(base, settings, job, "backfill", "Preview backfill…", fields)
}

/// Retry, cancel or unskip one run.
pub(super) fn run_change(
    base: &Base,
    settings: &Settings,
    job: &str,
    action: &str,
    slot: &DateTime<Utc>,
    partition: &str,
) -> Markup {
    let button = match action {
        "retry" => "Retry…",
        "unskip" => "Unskip…",
        _ => "Cancel run…",
    };
    let fields = html! {
        input type="hidden" name="slot" value=(rfc3339(slot));
        input type="hidden" name="partition" value=(partition);
    };
    change_form(base, settings, job, action, button, fields)
}

/// Retry every failed or dead run of a range: the first submit lists them.
pub(super) fn retry_failed(base: &Base, settings: &Settings, job: &str) -> Markup {
    let now = Utc::now();
    let fields = html! {
        (instant_field("From", "from", Some(&(now - chrono::Duration::days(1))), true))
        (instant_field("To", "to", Some(&now), true))
    };
    change_form(
        base,
        settings,
        job,
        "retry-failed",
        "Retry failed runs…",
        fields,
    )
}
