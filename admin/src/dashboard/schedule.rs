//! A stored schedule's page (`/schedules/{id}`): its fields, its next slots (with the row one has
//! already, such as an operator's skip), its version history, and the forms that skip one of its
//! slots, pause or resume it with a note, change its expression or zone, and remove it. Each of
//! those carries the version the page was read at.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use slotguard::store::{RunRecord, ScheduleSpec, ScheduleVersion};

use super::forms::form_to;
use super::job::unskippable;
use super::page::{Base, admin_error, badge, frame, html_response, live, utc};
use super::schedules::{expression, partition, runs_left, skip_form, state, upcoming, zone};
use super::{Settings, Ui};
use crate::{AdminError, StoredSchedule, shown};

#[derive(Deserialize)]
pub(super) struct ScheduleQuery {
    done: Option<String>,
}

pub(super) async fn page(
    State(ui): State<Ui>,
    base: Base,
    Path(id): Path<String>,
    Query(query): Query<ScheduleQuery>,
) -> Response {
    match render(&ui, &base, &id, query.done.as_deref()).await {
        Ok(body) => html_response(StatusCode::OK, frame(&base, &id, body)),
        Err(e) => admin_error(&base, &e),
    }
}

async fn render(ui: &Ui, base: &Base, id: &str, done: Option<&str>) -> Result<Markup, AdminError> {
    // The latest version of a schedule not removed, with its next slots; and every version.
    let stored = match ui.admin.schedule(id).await {
        Ok(stored) => Some(stored),
        Err(AdminError::UnknownSchedule { .. }) => None,
        Err(e) => return Err(e),
    };
    let history = ui.admin.schedule_history(id).await?;
    let Some(latest) = stored.as_ref().map(|s| &s.version).or(history.last()) else {
        return Err(AdminError::UnknownSchedule { id: shown(id) });
    };
    let current = stored.as_ref().zip(latest.spec.as_ref());
    let slots = match current {
        Some((stored, spec)) => next_rows(ui, stored, spec).await,
        None => Vec::new(),
    };
    let settings = &ui.settings;
    Ok(html! {
        h1 { "Schedule " span.name { (id) } }
        (notice(done))
        (live("schedule", facts(base, latest)))
        h2 { "Next slots" }
        (live("next", next_list(base, latest, &slots)))
        @if let Some((stored, spec)) = current.filter(|_| !settings.read_only) {
            details.actions open {
                summary { "Actions" }
                (skip_form(base, settings, &spec.job, &upcoming(&[], None, std::slice::from_ref(stored))))
                (pause_or_resume(base, settings, latest, spec))
                (change(base, settings, latest, spec))
                (remove(base, settings, latest))
            }
        }
        h2 { "History" }
        p { "Every version, newest first: each takes effect at its instant, and a slot belongs to the version in force then." }
        (live("history", history_table(&history)))
    })
}

/// The schedule's next slots, each with its row if it has one (an operator's skip, a claim).
async fn next_rows(
    ui: &Ui,
    stored: &StoredSchedule,
    spec: &ScheduleSpec,
) -> Vec<(DateTime<Utc>, Option<RunRecord>)> {
    let mut out = Vec::with_capacity(stored.next.len());
    for slot in &stored.next {
        let run = ui.admin.run(&spec.job, *slot, &spec.partition).await.ok();
        out.push((*slot, run));
    }
    out
}

fn facts(base: &Base, version: &ScheduleVersion) -> Markup {
    let Some(spec) = &version.spec else {
        return html! {
            dl.facts {
                dt { "State" } dd { span.badge.s-skipped { "removed" } " at version " (version.version)
                    ": no slots from " (utc(&version.effective_at)) "; the id may be added again" }
                dt { "Removed" } dd { (changed(version)) }
            }
        };
    };
    html! {
        dl.facts {
            dt { "Job" } dd { a href=(base.job(&spec.job)) { (spec.job) } }
            dt { "Partition" } dd { (partition(&spec.partition)) }
            dt { "Expression" } dd { (expression(spec)) }
            dt { "Start · end" } dd { (bounds(spec)) }
            dt { "Remaining runs" } dd { (runs_left(spec))
                @if spec.remaining_runs.is_some() { " " small { "(slots from when version " (version.version) " took effect)" } } }
            dt { "State" } dd { (state(spec)) }
            dt { "Pause on failure" } dd { (if spec.pause_on_failure { "yes: a run that fails for good pauses it" } else { "no" }) }
            dt { "Version" } dd { (version.version) " · in force from " (utc(&version.effective_at)) }
            dt { "Changed" } dd { (changed(version)) }
        }
    }
}

/// No slot before its start, none after its end.
fn bounds(spec: &ScheduleSpec) -> Markup {
    html! {
        @match (&spec.start_at, &spec.end_at) {
            (None, None) => "none: every slot its expression names",
            (start, end) => {
                @if let Some(start) = start { "from " (utc(start)) " " }
                @if let Some(end) = end { "until " (utc(end)) }
            }
        }
    }
}

/// Who wrote a version, when and why.
fn changed(version: &ScheduleVersion) -> Markup {
    html! { "by " (version.changed_by) " at " (utc(&version.changed_at)) ": " (version.reason) }
}

fn next_list(
    base: &Base,
    version: &ScheduleVersion,
    slots: &[(DateTime<Utc>, Option<RunRecord>)],
) -> Markup {
    let zone = version.spec.as_ref().and_then(zone);
    html! {
        @if slots.is_empty() {
            p { "None: it is paused, removed, ended, or its expression names no instant ahead." }
        } @else {
            ul.slots {
                @for (slot, run) in slots {
                    li {
                        @if let Some(zone) = zone.filter(|z| *z != chrono_tz::UTC) {
                            (slot.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S %Z").to_string()) " · "
                        }
                        small { (utc(slot)) }
                        @if let Some(run) = run { " · " (slot_row(base, run)) }
                    }
                }
            }
        }
    }
}

/// The row a slot ahead has already: its status and message, linking to its run.
fn slot_row(base: &Base, run: &RunRecord) -> Markup {
    let key = &run.key;
    let page = base.run(&key.job, &key.scheduled_at, &key.partition);
    html! {
        a href=(page) { (badge(run.status)) }
        @if let Some(message) = &run.error_message { " " small { (message) } }
        @if unskippable(run) { " · " a.unskip href=(format!("{page}#form-unskip")) { "Unskip…" } }
    }
}

/// The version the page was read at, carried by every form.
fn read_at(version: &ScheduleVersion) -> Markup {
    html! { input type="hidden" name="version" value=(version.version); }
}

fn pause_or_resume(
    base: &Base,
    settings: &Settings,
    version: &ScheduleVersion,
    spec: &ScheduleSpec,
) -> Markup {
    let page = base.schedule(&version.id);
    if spec.paused {
        let url = format!("{page}/resume");
        return form_to(settings, &url, "resume", "Resume…", read_at(version));
    }
    let fields = html! {
        (read_at(version))
        label { "Note (shown with the pause) "
            input type="text" name="note" maxlength="1024" placeholder="month-end freeze"; }
    };
    form_to(
        settings,
        &format!("{page}/pause"),
        "pause",
        "Pause…",
        fields,
    )
}

/// A new expression or zone.
fn change(
    base: &Base,
    settings: &Settings,
    version: &ScheduleVersion,
    spec: &ScheduleSpec,
) -> Markup {
    let fields = html! {
        (read_at(version))
        label { "Cron " input type="text" name="cron" required value=(spec.cron); }
        label { "Zone (IANA) " input type="text" name="tz" required value=(spec.zone); }
    };
    let url = format!("{}/change", base.schedule(&version.id));
    form_to(settings, &url, "change", "Change…", fields)
}

fn remove(base: &Base, settings: &Settings, version: &ScheduleVersion) -> Markup {
    let url = format!("{}/remove", base.schedule(&version.id));
    form_to(settings, &url, "remove", "Remove…", read_at(version))
}

/// Every version, newest first.
fn history_table(history: &[ScheduleVersion]) -> Markup {
    html! {
        div.scroll { table.history {
            thead { tr {
                th.n { "Version" } th { "Schedule" } th { "In force from" } th { "Changed by" }
                th { "Changed at" } th { "Reason" }
            } }
            tbody {
                @for v in history.iter().rev() {
                    tr {
                        td.n { (v.version) }
                        td { (summary(v.spec.as_ref())) }
                        td { (utc(&v.effective_at)) }
                        td { (v.changed_by) }
                        td { (utc(&v.changed_at)) }
                        td { (v.reason) }
                    }
                }
            }
        } }
    }
}

/// A version's schedule in a line.
fn summary(spec: Option<&ScheduleSpec>) -> Markup {
    let Some(spec) = spec else {
        return html! { span.badge.s-skipped { "removed" } };
    };
    html! {
        code { (spec.cron) } " in " (spec.zone)
        @if !spec.partition.is_empty() { " · partition " code { (spec.partition) } }
        @if let Some(n) = spec.remaining_runs { " · " (n) " run(s)" }
        @if spec.pause_on_failure { " · pauses on failure" }
        @if spec.paused {
            " · " span.badge.s-paused { "paused" }
            @if let Some(note) = &spec.note { " " small { (note) } }
        }
    }
}

/// The notice shown after a change of the schedule (`?done=action`): fixed texts.
fn notice(done: Option<&str>) -> Markup {
    let text = match done {
        Some("add-schedule") => {
            "Added: its slots start once the change takes effect, half a second after it was stored."
        }
        Some("pause") => "Paused: no slots from when the change takes effect until it is resumed.",
        Some("resume") => "Resumed: its slots follow its expression again.",
        Some("change") => {
            "Changed: the slots not yet claimed follow the new version from when it takes effect."
        }
        _ => return PreEscaped(String::new()),
    };
    html! { p.notice role="status" { (text) } }
}
