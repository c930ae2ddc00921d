//! Carrying out a [`Plan`]: reads through the admin API's methods, changes through
//! [`Admin::execute`], and the answer rendered with its exit code.

use std::io::Write as _;

use slotguard::store::{RunRecord, RunStatus};
use slotguard_admin::{Admin, ChangeRequest, Command, JobMissed, Outcome, finished};

use super::failure::{Failure, HOLIDAY_ARGS, failure, fields};
use super::plan::Plan;
use super::{STILL_GOING, UNSUCCESSFUL, show};

mod schedule;

/// What an operation prints, and its exit code.
pub(super) struct Answer {
    pub(super) text: String,
    pub(super) code: u8,
}

impl From<String> for Answer {
    fn from(text: String) -> Self {
        Answer { text, code: 0 }
    }
}

impl Plan {
    /// Asks the store, and renders the answer with its exit code.
    pub(super) async fn execute(self, admin: &Admin) -> Result<Answer, Failure> {
        Ok(Answer::from(match self {
            Plan::Jobs { json } => show::jobs(&admin.jobs().await?, json),
            Plan::Runs { filter, json } => show::runs(&admin.runs(filter).await?, json),
            Plan::Missed { query, json } => {
                let one = query.job.is_some();
                let whole = !one && query.after.is_none();
                let page = admin.missed_page(query).await?;
                if whole && page.next.is_none() {
                    // The whole listing in one page: say so when no job could be counted.
                    none_counted(&page.jobs)?;
                }
                show::missed(&page, one, json)
            }
            Plan::Run {
                job,
                at,
                partition,
                json,
            } => show::run(&admin.run(&job, at, &partition).await?, json),
            Plan::Change { command, by, wait } => {
                return change(admin, command, &by, wait).await;
            }
            Plan::Audit {
                job,
                before,
                limit,
                json,
            } => show::audit(
                &admin.audit_page(job.as_deref(), before, limit).await?,
                limit,
                json,
            ),
            Plan::Replicas { json } => show::replicas(&admin.replicas().await?, json),
            Plan::Schedule(plan) => plan.execute(admin).await?,
            Plan::Holiday {
                calendar,
                date,
                kind,
                name,
                by,
            } => {
                let written = admin
                    .override_holiday(&calendar, date, kind, name.as_deref(), &by)
                    .await
                    .map_err(fields(HOLIDAY_ARGS))?;
                show::holiday_written(&written)
            }
            Plan::Holidays { calendar, json } => {
                show::holidays(&admin.calendar_overrides(calendar.as_deref()).await?, json)
            }
            Plan::Skip {
                job,
                slot,
                partition,
                by,
                undo,
            } => schedule::skip(admin, (&job, slot, &partition), &by, undo).await?,
        }))
    }
}

/// A change through [`Admin::execute`], said as the CLI says it; `trigger --wait` then follows the
/// run for up to `wait`.
async fn change(
    admin: &Admin,
    command: Command,
    by: &ChangeRequest,
    wait: Option<std::time::Duration>,
) -> Result<Answer, Failure> {
    let job = command.job().to_owned();
    // `cancel` is said from what the run was: a running run's replica is told, a pending run
    // never starts.
    let was = match &command {
        Command::Cancel {
            job,
            slot,
            partition,
        } => Some(admin.run(job, *slot, partition).await?.status),
        _ => None,
    };
    let per_second = match &command {
        Command::Backfill { options, .. } => options.per_second,
        _ => 0.0,
    };
    let text = match admin.execute(command, by).await? {
        Outcome::Paused(record) | Outcome::Resumed(record) => show::paused(&record, &by.actor),
        Outcome::Retried(retried) => show::retried(&retried),
        Outcome::RetriedRange(report) => show::range_retried(&job, &report),
        Outcome::Cancelled(run) => show::cancelled(&run, was.unwrap_or(run.status)),
        Outcome::Backfilled(report) => show::backfilled(&report, per_second),
        Outcome::Triggered(triggered) => {
            let text = show::triggered(&job, &triggered);
            let Some(timeout) = wait else {
                return Ok(Answer::from(text));
            };
            // Said before the wait, so that a person sees what is being waited for.
            print(&text)?;
            let run = admin
                .wait(&job, triggered.scheduled_at, "", timeout)
                .await?;
            return Ok(Answer {
                text: show::waited(&run, timeout),
                code: outcome_code(&run),
            });
        }
    };
    Ok(Answer::from(text))
}

/// `missed` over every job fails (exit 1) when not one job could be counted: "0 missed" would be
/// an answer that was never found.
fn none_counted(found: &[JobMissed]) -> Result<(), Failure> {
    if found.is_empty() || found.iter().any(|j| j.missed.is_ok()) {
        return Ok(());
    }
    let reasons: Vec<String> = found
        .iter()
        .take(3)
        .filter_map(|j| {
            Some(format!(
                "{}: {}",
                show::shown(&j.job),
                j.missed.as_ref().err()?
            ))
        })
        .collect();
    let more = match found.len().saturating_sub(3) {
        0 => String::new(),
        n => format!("; and {n} more"),
    };
    Err(failure(format!(
        "no job's missed slots could be counted: {}{more}",
        reasons.join("; ")
    )))
}

/// `trigger --wait`'s exit code for the run as the wait left it.
fn outcome_code(run: &RunRecord) -> u8 {
    match run.status {
        _ if !finished(run) => STILL_GOING,
        RunStatus::Succeeded => 0,
        _ => UNSUCCESSFUL,
    }
}

/// Prints `text` now, on stdout.
fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| failure(format!("writing output: {e}")))
}
