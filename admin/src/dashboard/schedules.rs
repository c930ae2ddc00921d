//! A job's stored schedules on its page: the list, each linking to its schedule's page; the "skip
//! the next slot" form over the job's upcoming slots (its code schedule's and its stored
//! schedules'); and the form that adds a schedule.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use maud::{Markup, html};
use slotguard::store::{JobRecord, ScheduleSpec};
use slotguard::timeline::MAX_REMAINING_RUNS;

use super::Settings;
use super::forms::change_form;
use super::jobs::next_slots;
use super::page::{Base, live, utc};
use super::words::describe;
use crate::{Admin, AdminError, StoredSchedule, rfc3339};

/// The next slots each schedule shows in the list.
const LISTED: usize = 3;
/// The most upcoming slots the skip form offers.
const SKIPPABLE: usize = 12;

/// The job's stored schedules (the first [`MAX_PAGE`](crate::MAX_PAGE) by id), with their next
/// slots.
pub(super) async fn of_job(admin: &Admin, job: &str) -> Result<Vec<StoredSchedule>, AdminError> {
    admin.schedules(Some(job), None, crate::MAX_PAGE).await
}

/// The "Schedules" section of a job's page: the list (refreshed live), and the form that adds one.
pub(super) fn section(
    base: &Base,
    settings: &Settings,
    record: &JobRecord,
    schedules: &[StoredSchedule],
) -> Markup {
    html! {
        h2 { "Schedules" }
        (live("schedules", table(base, schedules)))
        @if !settings.read_only {
            details.actions.add {
                summary { "Add a schedule" }
                (add_form(base, settings, record))
            }
        }
    }
}

/// The list of a job's stored schedules.
fn table(base: &Base, schedules: &[StoredSchedule]) -> Markup {
    html! {
        @if schedules.is_empty() {
            p { "No stored schedule: the job runs on its code's schedule only." }
        } @else {
            div.scroll { table.schedules {
                thead { tr {
                    th { "Schedule" } th { "Partition" } th { "Cron · zone" } th { "State" }
                    th { "Pause on failure" } th.n { "Runs left" } th.n { "Version" }
                    th { "Next slots" } th { "Changed" }
                } }
                tbody { @for stored in schedules { (row(base, stored)) } }
            } }
            @if schedules.len() == crate::MAX_PAGE {
                p.count { "The first " (crate::MAX_PAGE) " schedules by id." }
            }
        }
    }
}

fn row(base: &Base, stored: &StoredSchedule) -> Markup {
    let v = &stored.version;
    let Some(spec) = &v.spec else {
        return html! {};
    };
    let next = &stored.next[..stored.next.len().min(LISTED)];
    html! {
        tr {
            td { a.schedule href=(base.schedule(&v.id)) { (v.id) } }
            td { (partition(&spec.partition)) }
            td { (expression(spec)) }
            td { (state(spec)) }
            td { (if spec.pause_on_failure { "yes" } else { "no" }) }
            td.n { (runs_left(spec)) }
            td.n { (v.version) }
            td { (next_slots(next, zone(spec))) }
            td { (v.changed_by) br; small { (utc(&v.changed_at)) } }
        }
    }
}

/// A schedule's partition, or that it is the job's own.
pub(super) fn partition(partition: &str) -> Markup {
    html! {
        @if partition.is_empty() { small { "the job's own" } } @else { code { (partition) } }
    }
}

/// The expression in words and as written, its zone and DST policy.
pub(super) fn expression(spec: &ScheduleSpec) -> Markup {
    html! {
        @if let Some(words) = describe(&spec.cron) { (words) br; }
        code { (spec.cron) } br;
        small { (spec.zone) " · DST " (spec.dst) }
    }
}

/// Paused (with its note) or active.
pub(super) fn state(spec: &ScheduleSpec) -> Markup {
    html! {
        @if spec.paused {
            span.badge.s-paused { "paused" }
            @if let Some(note) = &spec.note { br; small { (note) } }
        } @else {
            span.badge.s-active { "active" }
        }
    }
}

/// The cap on the schedule's slots, counted from when its version took effect.
pub(super) fn runs_left(spec: &ScheduleSpec) -> String {
    spec.remaining_runs
        .map_or_else(|| "no cap".to_owned(), |n| n.to_string())
}

/// The schedule's zone, when this version can read it.
pub(super) fn zone(spec: &ScheduleSpec) -> Option<Tz> {
    spec.zone.parse().ok()
}

/// An upcoming slot of a job, and the schedules that name it.
pub(super) struct Upcoming {
    at: DateTime<Utc>,
    partition: String,
    zone: Option<Tz>,
    by: Vec<String>,
}

/// The job's next slots: its code schedule's (`code`, in `code_zone`) and its stored schedules',
/// one per instant and partition, soonest first, at most [`SKIPPABLE`].
pub(super) fn upcoming(
    code: &[DateTime<Utc>],
    code_zone: Option<Tz>,
    schedules: &[StoredSchedule],
) -> Vec<Upcoming> {
    let mut slots: BTreeMap<(DateTime<Utc>, String), Upcoming> = BTreeMap::new();
    let named = code
        .iter()
        .map(|at| (*at, "", code_zone, "the code's schedule".to_owned()));
    let stored = schedules.iter().flat_map(|s| {
        let spec = s.version.spec.as_ref();
        let by = format!("schedule {}", s.version.id);
        s.next.iter().filter_map(move |at| {
            spec.map(|spec| (*at, spec.partition.as_str(), zone(spec), by.clone()))
        })
    });
    for (at, partition, zone, by) in named.chain(stored) {
        let slot = slots
            .entry((at, partition.to_owned()))
            .or_insert_with(|| Upcoming {
                at,
                partition: partition.to_owned(),
                zone,
                by: Vec::new(),
            });
        slot.by.push(by);
    }
    slots.into_values().take(SKIPPABLE).collect()
}

/// "Skip the next slot": a list of the upcoming slots, the soonest chosen, and a reason.
pub(super) fn skip_form(base: &Base, settings: &Settings, job: &str, slots: &[Upcoming]) -> Markup {
    if slots.is_empty() {
        return html! {};
    }
    let fields = html! {
        label {
            "Skip the next slot (or a later one) "
            select name="next" {
                @for (i, slot) in slots.iter().enumerate() {
                    option value=(value(slot)) selected[i == 0] { (label(slot)) }
                }
            }
        }
    };
    change_form(base, settings, job, "skip", "Skip the slot…", fields)
}

/// The instant, and the partition after a blank (an instant has none).
fn value(slot: &Upcoming) -> String {
    let at = rfc3339(&slot.at);
    if slot.partition.is_empty() {
        at
    } else {
        format!("{at} {}", slot.partition)
    }
}

fn label(slot: &Upcoming) -> String {
    let mut out = String::new();
    if let Some(zone) = slot.zone.filter(|z| *z != chrono_tz::UTC) {
        let local = slot.at.with_timezone(&zone);
        out.push_str(&format!("{} · ", local.format("%Y-%m-%d %H:%M:%S %Z")));
    }
    out.push_str(&utc(&slot.at));
    if !slot.partition.is_empty() {
        out.push_str(&format!(" · partition {}", slot.partition));
    }
    format!("{out} · {}", slot.by.join(", "))
}

/// The form that adds a stored schedule to the job; a job below the `slot` level cannot have one.
fn add_form(base: &Base, settings: &Settings, record: &JobRecord) -> Markup {
    let def = &record.definition;
    if def.guard != "slot" {
        return html! {
            p { "A stored schedule needs its job at the " code { "slot" } " guard level; this one runs at "
                code { (def.guard) } "." }
        };
    }
    let fields = html! {
        label { "Id " input type="text" name="id" required maxlength="200" placeholder="acme-report"; }
        label { "Cron " input type="text" name="cron" required placeholder="0 9 * * *"; }
        label { "Zone (IANA) " input type="text" name="tz" required value=(def.zone); }
        label { "Partition " input type="text" name="partition" placeholder="the job's own"; }
        label { "Remaining runs " input type="number" name="remaining_runs" min="0"
            max=(MAX_REMAINING_RUNS) placeholder="no cap"; }
        label { input type="checkbox" name="pause_on_failure" value="yes";
            " Pause it when a run fails for good" }
    };
    change_form(
        base,
        settings,
        &def.name,
        "add-schedule",
        "Add schedule…",
        fields,
    )
}
