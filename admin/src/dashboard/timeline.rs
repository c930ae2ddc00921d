//! A job's recent slots as a row of coloured cells: a gap or a streak of failures shows at a glance.

use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::page::{Base, utc};
use crate::{Admin, MissedSlot};
use slotguard::store::{RunRecord, RunStatus};
use slotguard_cron::{Schedule, Slot};

/// The most cells drawn.
pub(super) const CELLS: usize = 60;

/// One slot of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Cell {
    pub(super) at: DateTime<Utc>,
    pub(super) partition: String,
    /// `succeeded`, `failed`, `skipped`, `missed`, `running`, `pending` or `retrying`.
    pub(super) kind: &'static str,
    /// What hovering shows: the outcome and, for a skip or a failure, its reason.
    pub(super) note: String,
    /// `moved` for a slot its business calendar moved off its nominal date, `calendar` for one
    /// its calendar removed: drawn with a mark.
    pub(super) mark: Option<&'static str>,
}

/// The kind of cell a run is drawn as.
pub(super) fn kind(run: &RunRecord) -> &'static str {
    match run.status {
        RunStatus::Succeeded => "succeeded",
        RunStatus::Failed | RunStatus::Dead | RunStatus::Abandoned => "failed",
        RunStatus::Skipped => "skipped",
        RunStatus::Running => "running",
        RunStatus::Pending if run.attempt > 0 => "retrying",
        RunStatus::Pending => "pending",
    }
}

/// The newest [`CELLS`] slots: the runs given, and the schedule's slots without a row between the
/// oldest of them (or a day ago) and now.
pub(super) async fn cells(
    admin: &Admin,
    job: &str,
    schedule: Option<&Schedule>,
    runs: &[RunRecord],
) -> Vec<Cell> {
    let now = Utc::now();
    let oldest = runs.iter().map(|r| r.key.scheduled_at).min();
    let from = oldest.unwrap_or(now - chrono::Duration::days(1));
    // A schedule this version cannot read, or a range too long to scan, leaves the gaps out.
    // A slot of the last few seconds may not be claimed yet: not missed.
    let settled = now - chrono::Duration::seconds(5);
    let missed: Vec<MissedSlot> = if from < settled {
        admin.missed(job, from, settled).await.unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut cells: Vec<Cell> = runs
        .iter()
        .map(|run| {
            let mut note = match &run.error_message {
                Some(message) => format!("{}: {message}", run.status),
                None => run.status.to_string(),
            };
            let moved = schedule.and_then(|s| moved_from(s, run));
            if let Some(from) = &moved {
                note.push_str(&format!(" · moved from {from}"));
            }
            let removed = run.status == RunStatus::Skipped
                && run
                    .error_message
                    .as_deref()
                    .is_some_and(|m| m.starts_with("calendar: "));
            Cell {
                at: run.key.scheduled_at,
                partition: run.key.partition.clone(),
                kind: kind(run),
                note,
                mark: match (moved, removed) {
                    (Some(_), _) => Some("moved"),
                    (None, true) => Some("calendar"),
                    (None, false) => None,
                },
            }
        })
        .chain(missed.iter().map(|slot| Cell {
            at: slot.scheduled_at,
            partition: String::new(),
            kind: "missed",
            note: "missed: no run and no record of why".into(),
            mark: None,
        }))
        .collect();
    cells.sort_by(|a, b| (a.at, &a.partition).cmp(&(b.at, &b.partition)));
    let skip = cells.len().saturating_sub(CELLS);
    cells.drain(..skip);
    cells
}

/// The nominal dates a run's slot was moved from by its business calendar (`2026-09-25`), when
/// its date is not one of them.
fn moved_from(schedule: &Schedule, run: &RunRecord) -> Option<String> {
    schedule.business()?;
    let slot = Slot {
        scheduled_at: run.key.scheduled_at,
        wall: run.wall_time,
        zone: schedule.zone(),
    };
    // What the run recorded it stands for, else what the schedule says now.
    let nominal = match &run.calendar {
        Some(stamp) => stamp.nominal_dates.clone(),
        None => schedule.nominal_dates(&slot),
    };
    if nominal.is_empty() || nominal.contains(&slot.business_date()) {
        return None;
    }
    let dates: Vec<String> = nominal.iter().map(ToString::to_string).collect();
    Some(dates.join(", "))
}

/// The cells, oldest on the left, each linking to its run (a missed slot to the job's backfill).
pub(super) fn draw(base: &Base, job: &str, cells: &[Cell]) -> Markup {
    html! {
        @if cells.is_empty() {
            p { "No slot yet." }
        } @else {
            div.timeline role="list" aria-label="recent slots, oldest first" {
                @for cell in cells {
                    @let title = format!("{} · {}", utc(&cell.at), cell.note);
                    @if cell.kind == "missed" {
                        span role="listitem" class={ "cell k-missed" } title=(title) {}
                    } @else {
                        a role="listitem" class={ "cell k-" (cell.kind) @if let Some(m) = cell.mark { " m-" (m) } } title=(title)
                            href=(base.run(job, &cell.at, &cell.partition)) {}
                    }
                }
            }
            (axis(cells))
            p.legend {
                @for kind in ["succeeded", "failed", "skipped", "missed", "running", "pending", "retrying"] {
                    span class={ "cell k-" (kind) } {} " " (kind) " "
                }
                @if cells.iter().any(|c| c.mark.is_some()) {
                    span class="cell k-succeeded m-moved" {} " moved by the calendar "
                    span class="cell k-skipped m-calendar" {} " removed by the calendar "
                }
            }
        }
    }
}

/// The time axis under the cells: the instants of the oldest cell (left), the middle one and the
/// newest (right), and now. The cells are slots, not equal spans of time (a gap of missed slots or
/// a burst of manual runs shows as cells, not as distance), so the axis names instants rather than
/// drawing a scale.
fn axis(cells: &[Cell]) -> Markup {
    let (Some(first), Some(last)) = (cells.first(), cells.last()) else {
        return html! {};
    };
    let middle = &cells[cells.len() / 2];
    html! {
        div.timeline-axis aria-hidden="true" {
            span.axis-start { "▲ " (utc(&first.at)) }
            @if cells.len() > 2 { span.axis-middle { (utc(&middle.at)) } }
            span.axis-end { (utc(&last.at)) " ▲ · now " (utc(&Utc::now())) }
        }
    }
}
