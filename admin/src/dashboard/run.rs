//! A run's page: its attempts, idempotency key, audit trail, and retry or cancel (or, for a slot
//! ahead that an operator skipped, unskip).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use super::input::instant;
use super::job::unskippable;
use super::page::{
    Base, admin_error, badge, duration, frame, html_response, live, maybe, notice, segment, utc,
};
use super::{Ui, forms};
use crate::{AdminError, rfc3339};
use slotguard::operate::idempotency_key;
use slotguard::store::{AuditRecord, CalendarStamp, RunRecord, RunStatus};

#[derive(Deserialize)]
pub(super) struct RunQuery {
    partition: Option<String>,
    done: Option<String>,
}

pub(super) async fn page(
    State(ui): State<Ui>,
    base: Base,
    Path((job, slot)): Path<(String, String)>,
    Query(query): Query<RunQuery>,
) -> Response {
    match render(&ui, &base, &job, &slot, &query).await {
        Ok(body) => html_response(StatusCode::OK, frame(&base, &job, body)),
        Err(e) => admin_error(&base, &e),
    }
}

async fn render(
    ui: &Ui,
    base: &Base,
    job: &str,
    slot: &str,
    query: &RunQuery,
) -> Result<Markup, AdminError> {
    let slot = instant("slot", slot)?;
    let partition = query.partition.as_deref().unwrap_or("");
    let run = ui.admin.run(job, slot, partition).await?;
    let audit: Vec<AuditRecord> = ui
        .admin
        .audit(Some(job), crate::MAX_PAGE)
        .await?
        .into_iter()
        .filter(|a| a.run_id == Some(run.id) || a.scheduled_at == Some(slot))
        .collect();
    // The checkpoint its last attempt saved (slot-level jobs): where the next attempt resumes.
    let checkpoint = ui.admin.store.load_checkpoint(run.id).await?;
    let settings = &ui.settings;
    let retryable = !matches!(
        run.status,
        RunStatus::Running | RunStatus::Pending | RunStatus::Succeeded
    );
    let cancellable = matches!(run.status, RunStatus::Running | RunStatus::Pending);
    // An operator's skip of a slot still ahead is undone, not retried.
    let unskip = unskippable(&run);
    Ok(html! {
        h1 { "Run of " a.name href=(base.job(job)) { (job) } " at " (utc(&slot)) }
        (notice(query.done.as_deref()))
        (live("run", facts(&run)))
        @if retryable && !unskip { (forms::run_change(base, settings, job, "retry", &slot, partition)) }
        @if unskip { (forms::run_change(base, settings, job, "unskip", &slot, partition)) }
        @if cancellable { (forms::run_change(base, settings, job, "cancel", &slot, partition)) }
        h2 { "Attempts" }
        (live("attempts", attempts(&run)))
        h2 { "Checkpoint" }
        (live("checkpoint", checkpoint_of(checkpoint.as_deref())))
        h2 { "Audit trail" }
        (audit_table(base, &audit))
    })
}

fn facts(run: &RunRecord) -> Markup {
    html! {
        dl.facts {
            dt { "Status" } dd { (badge(run.status)) " attempt " (run.attempt) }
            dt { "Idempotency key" } dd { code.key { (idempotency_key(&run.key.job, &run.key.scheduled_at, &run.key.partition)) } }
            @if !run.key.partition.is_empty() { dt { "Partition" } dd { code { (run.key.partition) } } }
            dt { "Trigger" } dd { (run.trigger.as_str()) }
            dt { "Wall time" } dd { (run.wall_time.to_string()) " " (run.zone) " · business date " (run.business_date.to_string()) }
            @if let Some(stamp) = &run.calendar { dt { "Calendar" } dd { (calendar_fact(stamp)) } }
            dt { "Owner · token" } dd { (run.owner.as_deref().unwrap_or("–")) " · " (run.token) }
            dt { "Heartbeat" } dd { (maybe(run.heartbeat_at.as_ref())) }
            dt { "Next attempt" } dd { (maybe(run.next_attempt_at.as_ref())) }
            dt { "Error" } dd {
                @if let Some(class) = &run.error_class { code { (class) } " " }
                (run.error_message.as_deref().unwrap_or("–"))
            }
        }
    }
}

/// The calendar a slot was planned on, and the nominal dates it stands for.
fn calendar_fact(stamp: &CalendarStamp) -> Markup {
    let dates: Vec<String> = stamp
        .nominal_dates
        .iter()
        .map(ToString::to_string)
        .collect();
    html! {
        code { (stamp.calendar) }
        @if !stamp.version.is_empty() { " (" (stamp.version) ")" }
        " · nominal " (dates.join(", "))
    }
}

/// The most of a checkpoint shown, in bytes.
const CHECKPOINT_SHOWN: usize = 4096;

fn checkpoint_of(saved: Option<&str>) -> Markup {
    html! {
        @match saved {
            None => p { "None saved." },
            Some(text) => {
                @let cut = text.char_indices().map(|(i, _)| i).take_while(|i| *i <= CHECKPOINT_SHOWN).last().unwrap_or(0);
                @let shown = if text.len() > CHECKPOINT_SHOWN { &text[..cut] } else { text };
                pre.checkpoint { (shown) }
                @if shown.len() < text.len() { p { small { "… " (text.len()) " bytes in all" } } }
            }
        }
    }
}

fn attempts(run: &RunRecord) -> Markup {
    html! {
        @if run.attempts.is_empty() {
            p { "No attempt yet." }
        } @else {
            table.attempts {
                thead { tr { th { "#" } th { "Owner" } th { "Token" } th { "Started" }
                    th { "Duration" } th { "Outcome" } th { "Message" } } }
                tbody {
                    @for a in &run.attempts {
                        tr {
                            td { (a.attempt) } td { (a.owner) } td { (a.token) }
                            td { (utc(&a.started_at)) }
                            td { (duration(Some(&a.started_at), a.finished_at.as_ref())) }
                            td { (badge(a.status)) }
                            td { (a.message.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}

/// Audit records, newest first.
pub(super) fn audit_table(base: &Base, records: &[AuditRecord]) -> Markup {
    html! {
        @if records.is_empty() {
            p { "No change recorded." }
        } @else {
            table.audit {
                thead { tr { th { "At" } th { "Job" } th { "Slot" } th { "Action" } th { "Operator" } th { "Reason" } } }
                tbody {
                    @for r in records {
                        tr {
                            td { (utc(&r.at)) }
                            td { a href=(base.job(&r.job)) { (r.job) } }
                            td {
                                // The record names the run's slot, not its partition: the link lists
                                // the slot's runs, every partition of it.
                                @if let Some(slot) = &r.scheduled_at {
                                    a href=(slot_runs(base, &r.job, slot)) { (utc(slot)) }
                                } @else { "–" }
                            }
                            td { (r.entry.action) } td { (r.entry.actor) } td { (r.entry.reason) }
                        }
                    }
                }
            }
        }
    }
}

/// The job page's runs list filtered to `slot`'s runs: from the slot to the next millisecond.
fn slot_runs(base: &Base, job: &str, slot: &chrono::DateTime<chrono::Utc>) -> String {
    let to = *slot + chrono::Duration::milliseconds(1);
    format!(
        "{}?from={}&to={}",
        base.job(job),
        segment(&rfc3339(slot)),
        segment(&rfc3339(&to))
    )
}
