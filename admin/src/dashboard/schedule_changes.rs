//! The changes of stored schedules and of one upcoming slot: add a schedule to a job
//! (`/jobs/{job}/add-schedule`), skip an upcoming slot and undo the skip (`/jobs/{job}/skip`,
//! `/jobs/{job}/unskip`), and pause, resume, change or remove a schedule
//! (`/schedules/{id}/{action}`). A schedule's form carries the version its page was read at: when
//! someone changed the schedule since, the form is refused (409, "it changed since you read it")
//! and nothing is written. As a job's changes, each posts once for the confirmation page (an added
//! or changed schedule's next slots) and once more to be made through the admin API, audited under
//! the operator's name.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use slotguard::timeline::MAX_REMAINING_RUNS;

use super::Ui;
use super::confirm::{self, Asked, ChangeForm, Confirmation, done};
use super::input::{instant, present};
use super::jobs::next_slots;
use super::page::{Base, admin_error, frame, html_response, utc};
use crate::{Admin, AdminError, ChangeRequest, PREVIEW_SLOTS, ScheduleFields, StoredSchedule};

/// The changes posted to a job's path (`/jobs/{job}/{action}`) that are made here.
pub(super) const ON_JOB: [&str; 3] = ["skip", "unskip", "add-schedule"];

/// An upcoming slot of a job.
struct SlotOf {
    job: String,
    slot: DateTime<Utc>,
    partition: String,
}

/// A stored schedule, as the page the form came from read it.
struct Read {
    id: String,
    job: String,
    version: i64,
}

/// A change a form asks for.
enum Change {
    Skip(SlotOf),
    Unskip(SlotOf),
    Add {
        job: String,
        id: String,
        fields: ScheduleFields,
    },
    Pause(Read, Option<String>),
    Resume(Read),
    /// A new expression or zone: the fields changed, and the whole schedule they make (previewed).
    Set {
        read: Read,
        fields: ScheduleFields,
        whole: ScheduleFields,
    },
    Remove(Read),
}

/// A change posted to a job's path, by the operator `by`, whose CSRF token was checked.
pub(super) async fn on_job(
    ui: &Ui,
    base: &Base,
    job: &str,
    action: &str,
    by: &ChangeRequest,
    form: &ChangeForm,
) -> Response {
    let change = match by.validate().and_then(|()| job_change(job, action, form)) {
        Ok(change) => change,
        Err(e) => return admin_error(base, &e),
    };
    if !form.confirmed() {
        if let Change::Add { id, .. } = &change
            && let Err(e) = new_id(&ui.admin, id).await
        {
            return admin_error(base, &e);
        }
        return confirm(ui, base, action, &change, form).await;
    }
    make(&ui.admin, base, change, action, by)
        .await
        .unwrap_or_else(|e| admin_error(base, &e))
}

/// A change posted to a schedule's path (`/schedules/{id}/{action}`).
pub(super) async fn on_schedule(
    State(ui): State<Ui>,
    base: Base,
    Path((id, action)): Path<(String, String)>,
    Asked { by, form }: Asked,
) -> Response {
    let change = match read_change(&ui.admin, &id, &action, &by, &form).await {
        Ok(change) => change,
        Err(e) => return answer(&base, &e, &id),
    };
    if !form.confirmed() {
        return confirm(&ui, &base, &action, &change, &form).await;
    }
    make(&ui.admin, &base, change, &action, &by)
        .await
        .unwrap_or_else(|e| answer(&base, &e, &id))
}

/// The change a schedule's form asks for, refused when the schedule changed since the form's page
/// read it.
async fn read_change(
    admin: &Admin,
    id: &str,
    action: &str,
    by: &ChangeRequest,
    form: &ChangeForm,
) -> Result<Change, AdminError> {
    by.validate()?;
    let current = admin.schedule(id).await?;
    let change = schedule_change(id, &current, action, form)?;
    let asked = change.read().map_or(0, |r| r.version);
    if asked != current.version.version {
        return Err(AdminError::StaleVersion {
            id: crate::shown(id),
            asked,
            current: current.version.version,
        });
    }
    Ok(change)
}

fn job_change(job: &str, action: &str, form: &ChangeForm) -> Result<Change, AdminError> {
    Ok(match action {
        "skip" => Change::Skip(slot_of(job, form)?),
        "unskip" => Change::Unskip(slot_of(job, form)?),
        _ => Change::Add {
            job: job.to_owned(),
            id: present(form.id.as_deref()).unwrap_or("").to_owned(),
            fields: new_fields(job, form)?,
        },
    })
}

/// The slot a form names: from the skip form's list (`next`: the instant, a blank, the
/// partition), or its `slot` and `partition` fields.
fn slot_of(job: &str, form: &ChangeForm) -> Result<SlotOf, AdminError> {
    let listed = form.next.as_deref().filter(|n| !n.trim().is_empty());
    let (slot, partition) = match listed {
        Some(next) => next.trim_start().split_once(' ').unwrap_or((next, "")),
        None => (
            present(form.slot.as_deref()).unwrap_or(""),
            form.partition.as_deref().unwrap_or(""),
        ),
    };
    Ok(SlotOf {
        job: job.to_owned(),
        slot: instant("scheduleSlot", slot)?,
        partition: partition.to_owned(),
    })
}

/// A new schedule's fields, as the add form sends them.
fn new_fields(job: &str, form: &ChangeForm) -> Result<ScheduleFields, AdminError> {
    let text = |value: &Option<String>| present(value.as_deref()).map(str::to_owned);
    Ok(ScheduleFields {
        job: Some(job.to_owned()),
        cron: text(&form.cron),
        tz: text(&form.tz),
        partition: text(&form.partition),
        remaining_runs: Some(remaining_runs(form)?),
        pause_on_failure: Some(present(form.pause_on_failure.as_deref()).is_some()),
        ..ScheduleFields::default()
    })
}

fn remaining_runs(form: &ChangeForm) -> Result<Option<u32>, AdminError> {
    let Some(text) = present(form.remaining_runs.as_deref()) else {
        return Ok(None);
    };
    text.parse().map(Some).map_err(|_| AdminError::Invalid {
        field: "remainingRuns",
        problem: format!(
            "`{}` is not a whole number from 0 to {MAX_REMAINING_RUNS}",
            crate::shown(text)
        ),
    })
}

/// An id no schedule has: refused before the confirmation page as the change would be.
async fn new_id(admin: &Admin, id: &str) -> Result<(), AdminError> {
    slotguard::check_job_name(id).map_err(|problem| AdminError::Invalid {
        field: "id",
        problem: format!("`{}`: {}", crate::shown(id), problem.reason()),
    })?;
    match admin.schedule(id).await {
        Ok(existing) => Err(AdminError::ScheduleExists {
            id: crate::shown(id),
            version: existing.version.version,
        }),
        Err(AdminError::UnknownSchedule { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

fn schedule_change(
    id: &str,
    current: &StoredSchedule,
    action: &str,
    form: &ChangeForm,
) -> Result<Change, AdminError> {
    let spec = current.version.spec.as_ref().ok_or_else(|| unknown(id))?;
    let version = present(form.version.as_deref()).ok_or_else(|| AdminError::Invalid {
        field: "version",
        problem: "is required: the version of the schedule the form was read at".into(),
    })?;
    let read = Read {
        id: id.to_owned(),
        job: spec.job.clone(),
        version: version.parse().map_err(|_| AdminError::Invalid {
            field: "version",
            problem: format!("`{}` is not a version number", crate::shown(version)),
        })?,
    };
    let text = |value: &Option<String>| present(value.as_deref()).map(str::to_owned);
    Ok(match action {
        "pause" => Change::Pause(read, text(&form.note)),
        "resume" => Change::Resume(read),
        "remove" => Change::Remove(read),
        "change" => {
            let fields = ScheduleFields {
                cron: text(&form.cron),
                tz: text(&form.tz),
                ..ScheduleFields::default()
            };
            let whole = ScheduleFields {
                job: Some(spec.job.clone()),
                cron: fields.cron.clone().or_else(|| Some(spec.cron.clone())),
                tz: fields.tz.clone().or_else(|| Some(spec.zone.clone())),
                dst: Some(spec.dst.clone()),
                partition: Some(spec.partition.clone()),
                start_at: Some(spec.start_at),
                end_at: Some(spec.end_at),
                ..ScheduleFields::default()
            };
            Change::Set {
                read,
                fields,
                whole,
            }
        }
        _ => {
            return Err(AdminError::Invalid {
                field: "action",
                problem: "no such change".into(),
            });
        }
    })
}

fn unknown(id: &str) -> AdminError {
    AdminError::UnknownSchedule {
        id: crate::shown(id),
    }
}

impl Change {
    /// The schedule the change was read at, for a change of one.
    fn read(&self) -> Option<&Read> {
        match self {
            Change::Pause(read, _)
            | Change::Resume(read)
            | Change::Set { read, .. }
            | Change::Remove(read) => Some(read),
            Change::Skip(_) | Change::Unskip(_) | Change::Add { .. } => None,
        }
    }

    /// The page the change is made from: the job's, or the schedule's.
    fn page(&self, base: &Base) -> String {
        match self {
            Change::Skip(s) | Change::Unskip(s) => base.job(&s.job),
            Change::Add { job, .. } => base.job(job),
            Change::Pause(read, _)
            | Change::Resume(read)
            | Change::Set { read, .. }
            | Change::Remove(read) => base.schedule(&read.id),
        }
    }

    /// The schedule the confirmation page previews the next slots of.
    fn previewed(&self) -> Option<&ScheduleFields> {
        match self {
            Change::Add { fields, .. } => Some(fields),
            Change::Set { whole, .. } => Some(whole),
            _ => None,
        }
    }

    /// What the confirmation page says will happen.
    fn describe(&self) -> String {
        match self {
            Change::Skip(s) => format!(
                "Skip the slot of {} at {}{}: no replica runs it, and it is recorded skipped \
                 with the reason",
                s.job,
                utc(&s.slot),
                of_partition(&s.partition)
            ),
            Change::Unskip(s) => format!(
                "Undo the skip of the slot of {} at {}{}: it runs as its schedule says",
                s.job,
                utc(&s.slot),
                of_partition(&s.partition)
            ),
            Change::Add { job, id, fields } => {
                format!("Add schedule {id} to {job}: {}", summary(fields))
            }
            Change::Set { read, whole, .. } => format!(
                "Change schedule {}{} to {}: the slots not yet claimed follow it from when the \
                 change takes effect",
                read.id,
                read_at(read),
                summary(whole)
            ),
            Change::Pause(read, note) => format!(
                "Pause schedule {}{}: no slots from when the change takes effect until it is \
                 resumed{}",
                read.id,
                read_at(read),
                note.as_ref()
                    .map_or_else(String::new, |n| format!("; note: {n}"))
            ),
            Change::Resume(read) => format!(
                "Resume schedule {}{}: its slots follow its expression again",
                read.id,
                read_at(read)
            ),
            Change::Remove(read) => format!(
                "Remove schedule {}{}: no slots from when the change takes effect; its history \
                 stays",
                read.id,
                read_at(read)
            ),
        }
    }
}

fn of_partition(partition: &str) -> String {
    if partition.is_empty() {
        String::new()
    } else {
        format!(" (partition {partition})")
    }
}

fn read_at(read: &Read) -> String {
    format!(" (read at version {}, of {})", read.version, read.job)
}

/// A schedule's fields in a phrase: `0 9 * * * in America/New_York, partition acme, 3 runs`.
fn summary(fields: &ScheduleFields) -> String {
    let mut out = format!(
        "{} in {}",
        fields.cron.as_deref().unwrap_or("?"),
        fields.tz.as_deref().unwrap_or("?")
    );
    if let Some(partition) = fields.partition.as_deref().filter(|p| !p.is_empty()) {
        out.push_str(&format!(", partition {partition}"));
    }
    if let Some(Some(runs)) = fields.remaining_runs {
        out.push_str(&format!(", {runs} more run(s)"));
    }
    if fields.pause_on_failure == Some(true) {
        out.push_str(", paused after a run fails for good");
    }
    out
}

/// The confirmation page, with the next slots of an added or changed schedule.
async fn confirm(
    ui: &Ui,
    base: &Base,
    action: &str,
    change: &Change,
    form: &ChangeForm,
) -> Response {
    let preview = match change.previewed() {
        Some(fields) => match ui
            .admin
            .preview_schedule(fields.clone(), PREVIEW_SLOTS)
            .await
        {
            Ok(slots) => Some(preview(&slots, fields.tz.as_deref())),
            Err(e) => return admin_error(base, &e),
        },
        None => None,
    };
    let page = change.page(base);
    let confirmation = Confirmation {
        action,
        url: format!("{page}/{action}"),
        back: page,
        what: change.describe(),
        preview,
    };
    confirm::page(base, &ui.settings, form, confirmation)
}

fn preview(slots: &[DateTime<Utc>], zone: Option<&str>) -> Markup {
    let zone = zone.and_then(|z| z.parse::<chrono_tz::Tz>().ok());
    html! {
        div.preview id="preview" {
            p { strong { "Its next " (slots.len()) " slot(s)" }
                ", from when the change takes effect (half a second after it is stored):" }
            (next_slots(slots, zone))
        }
    }
}

/// Makes the change, and sends the browser to the page of what changed.
async fn make(
    admin: &Admin,
    base: &Base,
    change: Change,
    action: &str,
    by: &ChangeRequest,
) -> Result<Response, AdminError> {
    let target = match change {
        Change::Skip(s) => {
            admin.skip(&s.job, s.slot, &s.partition, by).await?;
            base.job(&s.job)
        }
        Change::Unskip(s) => {
            admin.unskip(&s.job, s.slot, &s.partition, by).await?;
            base.job(&s.job)
        }
        Change::Add { id, fields, .. } => {
            admin.add_schedule(&id, fields, by).await?;
            base.schedule(&id)
        }
        Change::Remove(read) => {
            admin
                .remove_schedule(&read.id, Some(read.version), by)
                .await?;
            return Ok(done(&base.job(&read.job), "remove-schedule"));
        }
        Change::Pause(read, note) => {
            let fields = ScheduleFields {
                paused: Some(true),
                note: Some(note),
                ..ScheduleFields::default()
            };
            changed(admin, base, &read, fields, by).await?
        }
        Change::Resume(read) => {
            let fields = ScheduleFields {
                paused: Some(false),
                note: Some(None),
                ..ScheduleFields::default()
            };
            changed(admin, base, &read, fields, by).await?
        }
        Change::Set { read, fields, .. } => changed(admin, base, &read, fields, by).await?,
    };
    Ok(done(&target, action))
}

/// Changes the schedule from the version it was read at; answers its page.
async fn changed(
    admin: &Admin,
    base: &Base,
    read: &Read,
    fields: ScheduleFields,
    by: &ChangeRequest,
) -> Result<String, AdminError> {
    admin
        .change_schedule(&read.id, read.version, fields, by)
        .await?;
    Ok(base.schedule(&read.id))
}

/// An error as a page; a stale version of schedule `id` as the page that says so and leads back
/// to the schedule.
fn answer(base: &Base, error: &AdminError, id: &str) -> Response {
    let AdminError::StaleVersion { asked, current, .. } = error else {
        return admin_error(base, error);
    };
    let body = html! {
        h1 { "Changed since you read it" }
        p.error {
            "Schedule " code { (id) } " is at version " (current) ", not " (asked)
            ": it changed since you read it. Nothing was changed."
        }
        p { "Read the schedule again, then decide: " a href=(base.schedule(id)) { "its page" } "." }
    };
    html_response(StatusCode::CONFLICT, frame(base, "Conflict", body))
}
