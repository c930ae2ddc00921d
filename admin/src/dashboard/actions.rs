//! Changes: a form posts here once to see the confirmation page (a backfill's dry-run preview), and
//! once more with `confirm=yes` to make the change, audited under the operator's name. A form is
//! read into a [`Command`] and carried out by [`Admin::execute`](crate::Admin::execute), as the
//! HTTP router's and the CLI's changes are. The changes of a job's stored schedules and upcoming
//! slots (`skip`, `unskip`, `add-schedule`) are [`schedule_changes`]'.

use axum::extract::{Path, State};
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::confirm::{self, Asked, ChangeForm, Confirmation, done};
use super::input::{instant, present};
use super::page::{Base, admin_error, utc};
use super::{Ui, schedule_changes};
use crate::parse::rate;
use crate::{AdminError, BackfillOptions, BackfillReport, ChangeRequest, Command};
use slotguard::store::{RunFilter, RunRecord, RunStatus};

/// The `from` and `to` fields.
fn range(form: &ChangeForm) -> Result<(DateTime<Utc>, DateTime<Utc>), AdminError> {
    Ok((
        instant("from", form.from.as_deref().unwrap_or(""))?,
        instant("to", form.to.as_deref().unwrap_or(""))?,
    ))
}

/// The command a form asks for: `action` is the last segment of the path it posts to, named as
/// [`Command::name`] names it. A backfill is read as it will be made (not a dry run).
fn command(job: &str, action: &str, form: &ChangeForm) -> Result<Command, AdminError> {
    let job = job.to_owned();
    let slot = || instant("scheduleSlot", present(form.slot.as_deref()).unwrap_or(""));
    let partition = || form.partition.clone().unwrap_or_default();
    Ok(match action {
        "retry" => Command::Retry {
            job,
            slot: slot()?,
            partition: partition(),
        },
        "cancel" => Command::Cancel {
            job,
            slot: slot()?,
            partition: partition(),
        },
        "trigger" => Command::Trigger { job },
        "pause" => Command::Pause { job },
        "resume" => Command::Resume { job },
        "retry-failed" => {
            let (from, to) = range(form)?;
            Command::RetryFailed {
                job,
                from,
                to,
                partition: None,
            }
        }
        "backfill" => {
            let (from, to) = range(form)?;
            let per_second = present(form.per_second.as_deref()).unwrap_or("1");
            Command::Backfill {
                job,
                from,
                to,
                options: BackfillOptions {
                    dry_run: false,
                    per_second: rate("perSecond", per_second)?,
                    before_first_seen: present(form.before_first_seen.as_deref()).is_some(),
                },
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

/// What the confirmation page says will happen.
fn describe(command: &Command) -> String {
    let job = command.job();
    match command {
        Command::Retry { slot, .. } => format!("Retry the run of {job} at {}", utc(slot)),
        Command::Cancel { slot, .. } => format!("Cancel the run of {job} at {}", utc(slot)),
        Command::Trigger { .. } => format!("Run {job} now (a manual run)"),
        Command::Pause { .. } => format!("Pause {job}: no replica claims its slots until resumed"),
        Command::Resume { .. } => format!("Resume {job}"),
        Command::Backfill {
            from, to, options, ..
        } => format!(
            "Backfill {job} from {} to {} at {} runs per second{}",
            utc(from),
            utc(to),
            options.per_second,
            if options.before_first_seen {
                ", reaching before the job was first registered"
            } else {
                ""
            }
        ),
        Command::RetryFailed { from, to, .. } => format!(
            "Retry every failed or dead run of {job} from {} to {}",
            utc(from),
            utc(to)
        ),
    }
}

pub(super) async fn submit(
    State(ui): State<Ui>,
    base: Base,
    Path((job, action)): Path<(String, String)>,
    Asked { by, form }: Asked,
) -> Response {
    if schedule_changes::ON_JOB.contains(&action.as_str()) {
        return schedule_changes::on_job(&ui, &base, &job, &action, &by, &form).await;
    }
    let command = match by.validate().and_then(|()| command(&job, &action, &form)) {
        Ok(command) => command,
        Err(e) => return admin_error(&base, &e),
    };
    if !form.confirmed() {
        return confirm(&ui, &base, &action, &command, &form).await;
    }
    let target = match &command {
        Command::Retry {
            slot, partition, ..
        }
        | Command::Cancel {
            slot, partition, ..
        } => base.run(&job, slot, partition),
        _ => base.job(&job),
    };
    match ui.admin.execute(command, &by).await {
        Ok(_) => done(&target, &action),
        Err(e) => admin_error(&base, &e),
    }
}

/// The confirmation page: what will happen (for a backfill, the dry run), and the button that does it.
async fn confirm(
    ui: &Ui,
    base: &Base,
    action: &str,
    command: &Command,
    form: &ChangeForm,
) -> Response {
    let job = command.job();
    let preview = match command {
        Command::Backfill {
            from, to, options, ..
        } => {
            let dry_run = Command::Backfill {
                job: job.to_owned(),
                from: *from,
                to: *to,
                options: BackfillOptions {
                    dry_run: true,
                    ..*options
                },
            };
            let by = ChangeRequest::new("preview", form.reason.trim());
            match ui.admin.execute(dry_run, &by).await {
                Ok(crate::Outcome::Backfilled(report)) => {
                    Some(preview(&report, options.before_first_seen))
                }
                Ok(_) => None,
                Err(e) => return admin_error(base, &e),
            }
        }
        Command::RetryFailed { from, to, .. } => match failed_runs(ui, job, *from, *to).await {
            Ok(runs) => Some(failed_preview(&runs)),
            Err(e) => return admin_error(base, &e),
        },
        _ => None,
    };
    let confirmation = Confirmation {
        action,
        url: format!("{}/{action}", base.job(job)),
        back: base.job(job),
        what: describe(command),
        preview,
    };
    confirm::page(base, &ui.settings, form, confirmation)
}

fn preview(report: &BackfillReport, before_first_seen: bool) -> Markup {
    html! {
        div.preview id="preview" {
            p { strong { (report.slots.len()) " slot(s) would be created" }
                ", " (report.existing) " already have a row and are left alone." }
            p.before-first-seen {
                @if before_first_seen {
                    strong { "Reaches before the job was first registered: " } "yes, history from before the job existed is backfilled."
                } @else {
                    "Before the job was first registered: no, the range starts after it."
                }
            }
            @if !report.slots.is_empty() {
                ul.slots {
                    @for slot in report.slots.iter().take(100) {
                        li { (utc(&slot.scheduled_at)) " · " small { (slot.wall.to_string()) " local" } }
                    }
                    @if report.slots.len() > 100 { li { "… and " (report.slots.len() - 100) " more" } }
                }
            }
        }
    }
}

/// The failed and dead runs of `job` in `[from, to)` (at most 1,000 of each), oldest first.
async fn failed_runs(
    ui: &Ui,
    job: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<RunRecord>, AdminError> {
    let mut runs = Vec::new();
    for status in [RunStatus::Failed, RunStatus::Dead] {
        let filter = RunFilter {
            job: Some(job.to_owned()),
            status: Some(status),
            from: Some(from),
            to: Some(to),
            limit: crate::MAX_PAGE,
            ..RunFilter::default()
        };
        runs.extend(ui.admin.runs(filter).await?);
    }
    runs.sort_by_key(|r| (r.key.scheduled_at, r.key.partition.clone()));
    Ok(runs)
}

fn failed_preview(runs: &[RunRecord]) -> Markup {
    html! {
        div.preview id="preview" {
            p { strong { (runs.len()) " run(s) would be retried" } ", each a new attempt of the same slot." }
            ul.slots {
                @for run in runs.iter().take(100) {
                    li { (utc(&run.key.scheduled_at))
                        @if !run.key.partition.is_empty() { " · " code { (run.key.partition) } }
                        " · " (run.status.as_str()) }
                }
                @if runs.len() > 100 { li { "… and " (runs.len() - 100) " more" } }
            }
        }
    }
}
