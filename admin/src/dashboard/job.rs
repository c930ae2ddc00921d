//! A job's page: its definition, its stored schedules, a timeline of its recent slots, its runs
//! with their attempts, filters, and the changes an operator can ask for.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use super::glance::WINDOW_HOURS;
use super::input::{INSTANT_EXAMPLE, maybe_instant, present};
use super::jobs::{next_slots, pause_state};
use super::page::{Base, admin_error, badge, duration, frame, html_response, live, notice, utc};
use super::words::describe;
use super::{Ui, chart, forms, schedules, timeline};
use crate::AdminError;
use crate::parse::status;
use crate::planned::Planned;
use chrono::{DateTime, Utc};
use slotguard::store::schedules::SKIPPED_BY_OPERATOR;
use slotguard::store::{JobRecord, RunCounts, RunFilter, RunRecord, RunStatus};

/// The filters of the runs list, and the notice of a change just made.
#[derive(Deserialize, Default)]
pub(super) struct JobQuery {
    status: Option<String>,
    from: Option<String>,
    to: Option<String>,
    partition: Option<String>,
    done: Option<String>,
}

impl JobQuery {
    fn filter(&self, job: &str) -> Result<RunFilter, AdminError> {
        let status = present(self.status.as_deref())
            .map(|s| status("status", s))
            .transpose()?;
        Ok(RunFilter {
            job: Some(job.to_owned()),
            status,
            partition: present(self.partition.as_deref()).map(str::to_owned),
            from: maybe_instant("from", self.from.as_deref())?,
            to: maybe_instant("to", self.to.as_deref())?,
            limit: crate::DEFAULT_PAGE,
        })
    }
}

pub(super) async fn page(
    State(ui): State<Ui>,
    base: Base,
    Path(job): Path<String>,
    Query(query): Query<JobQuery>,
) -> Response {
    match render(&ui, &base, &job, &query).await {
        Ok(body) => html_response(StatusCode::OK, frame(&base, &job, body)),
        Err(e) => admin_error(&base, &e),
    }
}

async fn render(ui: &Ui, base: &Base, job: &str, query: &JobQuery) -> Result<Markup, AdminError> {
    let record = ui.admin.job(job).await?;
    let runs = ui.admin.runs(query.filter(job)?).await?;
    // The timeline shows the newest slots whatever the filters say.
    let recent = ui
        .admin
        .runs(RunFilter {
            job: Some(job.to_owned()),
            limit: timeline::CELLS,
            ..RunFilter::default()
        })
        .await?;
    let now = chrono::Utc::now();
    let since = now - chrono::Duration::hours(WINDOW_HOURS);
    let (counts, missed, stored) = tokio::join!(
        ui.admin.run_counts(since),
        ui.admin.missed(job, since, now),
        schedules::of_job(&ui.admin, job)
    );
    let counts = counts?.remove(job).unwrap_or_default();
    let stored = stored?;
    let planned = ui.admin.planned(&record).await?;
    let schedule = planned.as_ref().map(Planned::schedule);
    let cells = timeline::cells(&ui.admin, job, schedule, &recent).await;
    let zone = record.definition.zone.parse::<chrono_tz::Tz>().ok();
    let next: Vec<DateTime<Utc>> = planned
        .as_ref()
        .map(|s| s.slots_after(now).take(3).map(|s| s.scheduled_at).collect())
        .unwrap_or_default();
    let missed = missed.map(|m| m.len()).ok();
    let settings = &ui.settings;
    let writable = !settings.read_only;
    Ok(html! {
        h1 { "Job " span.name { (record.definition.name) } }
        (notice(query.done.as_deref()))
        (facts(&record, &next, zone, at_a_glance(&counts, missed)))
        (schedules::skip_form(base, settings, job, &schedules::upcoming(&next, zone, &stored)))
        (schedules::section(base, settings, &record, &stored))
        h2 { "Recent slots" }
        (live("timeline", timeline::draw(base, job, &cells)))
        h2 { "Durations" }
        (live("durations", chart::draw(base, job, &chart::points(&recent))))
        @if writable {
            details.actions open {
                summary { "Actions" }
                (forms::pause_or_resume(base, settings, job, record.paused))
                (forms::trigger(base, settings, job))
                (forms::backfill(base, settings, job))
                (forms::retry_failed(base, settings, job))
            }
        }
        h2 { "Runs" }
        (filters(base, job, query))
        (live("runs", runs_table(base, &runs, writable)))
    })
}

/// The job's definition, state, code schedule's next slots and counts.
fn facts(
    record: &JobRecord,
    next: &[DateTime<Utc>],
    zone: Option<chrono_tz::Tz>,
    counts: Markup,
) -> Markup {
    let def = &record.definition;
    html! {
        dl.facts {
            dt { "Schedule" } dd {
                @if let Some(words) = describe(&def.cron) { (words) " · " }
                code { (def.cron) } " in " (def.zone) " (DST: " (def.dst) ")"
            }
            @if let Some(calendar) = &def.calendar {
                dt { "Calendar" } dd {
                    (calendar.to_string())
                    @if !calendar.version.is_empty() { " · " small { (calendar.version) } }
                }
            }
            dt { "Guard" } dd { (def.guard) }
            dt { "State" } dd { (live("pause", pause_state(record))) }
            dt { "Next slots" } dd { (next_slots(next, zone)) }
            dt { "Now" } dd { (live("counts", counts)) }
        }
    }
}

fn filters(base: &Base, job: &str, query: &JobQuery) -> Markup {
    let status = query.status.as_deref().unwrap_or("");
    html! {
        form.filters method="get" action=(base.job(job)) {
            label { "Status "
                select name="status" {
                    option value="" selected[status.is_empty()] { "any" }
                    @for s in RunStatus::ALL {
                        option value=(s.as_str()) selected[status == s.as_str()] { (s.as_str()) }
                    }
                }
            }
            label { "From (RFC 3339) " input type="text" name="from" placeholder=(INSTANT_EXAMPLE)
                value=(query.from.as_deref().unwrap_or("")); }
            label { "To (RFC 3339) " input type="text" name="to" placeholder="now"
                value=(query.to.as_deref().unwrap_or("")); }
            label { "Partition " input type="text" name="partition" placeholder="any"
                value=(query.partition.as_deref().unwrap_or("")); }
            button type="submit" { "Filter" }
        }
    }
}

/// Runs running and queued now; failed runs and missed slots in the last [`WINDOW_HOURS`] (missed:
/// `None` when they cannot be counted).
fn at_a_glance(counts: &RunCounts, missed: Option<usize>) -> Markup {
    html! {
        (counts.running) " running · " (counts.queued) " queued · last " (WINDOW_HOURS) " h: "
        span class=[(counts.failed > 0).then_some("bad")] { (counts.failed) " failed" } " · "
        @match missed {
            Some(n) => span class=[(n > 0).then_some("bad")] { (n) " missed" },
            None => span title="the stored schedule cannot be counted here" { "? missed" },
        }
    }
}

/// Runs with their attempts, newest slot first; with `changes`, an operator's skip of a slot still
/// ahead links to the form that undoes it.
pub(super) fn runs_table(base: &Base, runs: &[RunRecord], changes: bool) -> Markup {
    html! {
        @if runs.is_empty() {
            p { "No run matches." }
        } @else {
            div.scroll { table.runs {
                thead { tr {
                    th { "Slot" } th { "Job · partition" } th { "Status" } th { "Trigger" }
                    th { "Attempts: owner · token · start · duration · outcome" } th { "Error" }
                } }
                tbody { @for run in runs { (run_row(base, run, changes)) } }
            } }
        }
    }
}

fn run_row(base: &Base, run: &RunRecord, changes: bool) -> Markup {
    let key = &run.key;
    let unskip = changes && unskippable(run);
    html! {
        tr {
            td { a href=(base.run(&key.job, &key.scheduled_at, &key.partition)) { (utc(&key.scheduled_at)) }
                @if run.zone != "UTC" { br; small { (run.wall_time.format("%Y-%m-%d %H:%M:%S")) " " (run.zone) } } }
            td { a href=(base.job(&key.job)) { (key.job) }
                @if !key.partition.is_empty() { " · " code { (key.partition) } } }
            td { (badge(run.status)) (queued(run)) }
            td { (run.trigger.as_str()) }
            td { ol.attempts {
                @for a in &run.attempts {
                    li { "#" (a.attempt) " " (a.owner) " · " (a.token) " · " (utc(&a.started_at))
                        " · " (duration(Some(&a.started_at), a.finished_at.as_ref())) " · " (badge(a.status)) }
                }
            } }
            td {
                @if let Some(class) = &run.error_class { code { (class) } " " }
                (run.error_message.as_deref().unwrap_or(""))
                @if unskip {
                    " · " a.unskip href=(format!("{}#form-unskip", base.run(&key.job, &key.scheduled_at, &key.partition))) { "Unskip…" }
                }
            }
        }
    }
}

/// Whether the run is an operator's skip of a slot still ahead, which they can undo.
pub(super) fn unskippable(run: &RunRecord) -> bool {
    run.status == RunStatus::Skipped
        && run.attempts.is_empty()
        && run.key.scheduled_at > chrono::Utc::now()
        && run
            .error_message
            .as_deref()
            .is_some_and(|m| m.starts_with(SKIPPED_BY_OPERATOR))
}

/// When a `pending` run is due: "queued since" an instant already passed (it waits for a replica,
/// a free moment of the job, or the resume of a paused job), or its next attempt still to come.
/// Said under the status, not as an error.
fn queued(run: &RunRecord) -> Markup {
    let Some(next) = run
        .next_attempt_at
        .filter(|_| run.status == RunStatus::Pending)
    else {
        return html! {};
    };
    html! {
        br;
        @if next <= chrono::Utc::now() {
            small { "queued since " (utc(&next)) }
        } @else {
            small { "next attempt at " (utc(&next)) }
        }
    }
}
