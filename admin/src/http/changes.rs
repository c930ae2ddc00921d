//! The routes that change: each reads its body into a [`Command`], hands it to
//! [`Admin::execute`] with who asks and why, and answers the [`Outcome`].

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::dto::{BackfillDto, JobDto, RangeRetryDto, RetriedDto, RunDto, TriggeredDto};
use super::error::{ApiError, json};
use super::extract::JobChange;
use crate::parse::instant;
use crate::{Admin, AdminError, BackfillOptions, Command, Outcome};

/// A change body: what every one says (who and why), and the command it asks for on `job`.
pub(super) trait ChangeBody {
    /// The body's `actor` and `reason`.
    fn who(&self) -> (Option<String>, String);
}

/// Carries out the command `command` reads from the change, and answers what it did.
async fn execute<B: ChangeBody>(
    admin: &Admin,
    change: JobChange<B>,
    command: impl FnOnce(String, &B) -> Result<Command, AdminError>,
) -> Result<Response, ApiError> {
    let (actor, reason) = change.body.who();
    let by = change.by(actor, reason);
    let command = command(change.job, &change.body)?;
    Ok(match admin.execute(command, &by).await? {
        Outcome::Paused(job) | Outcome::Resumed(job) => json(StatusCode::OK, &JobDto::from(&job)),
        Outcome::Retried(retried) => json(
            StatusCode::OK,
            &RetriedDto {
                run: RunDto::from(&retried.run),
                job_paused: retried.job_paused,
                message: retried.outlook(),
            },
        ),
        Outcome::RetriedRange(report) => json(StatusCode::OK, &RangeRetryDto::from(&report)),
        Outcome::Cancelled(run) => json(StatusCode::OK, &RunDto::from(&run)),
        Outcome::Triggered(triggered) => json(StatusCode::OK, &TriggeredDto::from(&triggered)),
        Outcome::Backfilled(report) => json(StatusCode::OK, &BackfillDto::from(&report)),
    })
}

/// The body of a retry or a cancellation.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SlotChangeBody {
    #[serde(alias = "slot")]
    schedule_slot: String,
    reason: String,
    actor: Option<String>,
    partition: Option<String>,
}

impl SlotChangeBody {
    /// The slot and the partition (empty for an unpartitioned run).
    fn slot(&self) -> Result<(DateTime<Utc>, String), AdminError> {
        let slot = instant("scheduleSlot", &self.schedule_slot)?;
        Ok((slot, self.partition.clone().unwrap_or_default()))
    }
}

impl ChangeBody for SlotChangeBody {
    fn who(&self) -> (Option<String>, String) {
        (self.actor.clone(), self.reason.clone())
    }
}

pub(super) async fn retry(
    State(admin): State<Admin>,
    change: JobChange<SlotChangeBody>,
) -> Result<Response, ApiError> {
    execute(&admin, change, |job, body| {
        let (slot, partition) = body.slot()?;
        Ok(Command::Retry {
            job,
            slot,
            partition,
        })
    })
    .await
}

pub(super) async fn cancel(
    State(admin): State<Admin>,
    change: JobChange<SlotChangeBody>,
) -> Result<Response, ApiError> {
    execute(&admin, change, |job, body| {
        let (slot, partition) = body.slot()?;
        Ok(Command::Cancel {
            job,
            slot,
            partition,
        })
    })
    .await
}

/// The body of a retry of every failed run in a range.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RangeRetryBody {
    from: String,
    to: String,
    reason: String,
    actor: Option<String>,
    partition: Option<String>,
}

impl ChangeBody for RangeRetryBody {
    fn who(&self) -> (Option<String>, String) {
        (self.actor.clone(), self.reason.clone())
    }
}

pub(super) async fn retry_failed(
    State(admin): State<Admin>,
    change: JobChange<RangeRetryBody>,
) -> Result<Response, ApiError> {
    execute(&admin, change, |job, body| {
        Ok(Command::RetryFailed {
            job,
            from: instant("from", &body.from)?,
            to: instant("to", &body.to)?,
            partition: body.partition.clone(),
        })
    })
    .await
}

/// The body of a trigger, a pause or a resume.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct JobBody {
    reason: String,
    actor: Option<String>,
}

impl ChangeBody for JobBody {
    fn who(&self) -> (Option<String>, String) {
        (self.actor.clone(), self.reason.clone())
    }
}

pub(super) async fn trigger(
    State(admin): State<Admin>,
    change: JobChange<JobBody>,
) -> Result<Response, ApiError> {
    execute(&admin, change, |job, _| Ok(Command::Trigger { job })).await
}

pub(super) async fn pause(
    State(admin): State<Admin>,
    change: JobChange<JobBody>,
) -> Result<Response, ApiError> {
    execute(&admin, change, |job, _| Ok(Command::Pause { job })).await
}

pub(super) async fn resume(
    State(admin): State<Admin>,
    change: JobChange<JobBody>,
) -> Result<Response, ApiError> {
    execute(&admin, change, |job, _| Ok(Command::Resume { job })).await
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct BackfillBody {
    from: String,
    to: String,
    dry_run: Option<bool>,
    per_second: Option<f64>,
    before_first_seen: Option<bool>,
    reason: String,
    actor: Option<String>,
}

impl ChangeBody for BackfillBody {
    fn who(&self) -> (Option<String>, String) {
        (self.actor.clone(), self.reason.clone())
    }
}

pub(super) async fn backfill(
    State(admin): State<Admin>,
    change: JobChange<BackfillBody>,
) -> Result<Response, ApiError> {
    execute(&admin, change, |job, body| {
        let defaults = BackfillOptions::default();
        Ok(Command::Backfill {
            job,
            from: instant("from", &body.from)?,
            to: instant("to", &body.to)?,
            options: BackfillOptions {
                dry_run: body.dry_run.unwrap_or(defaults.dry_run),
                per_second: body.per_second.unwrap_or(defaults.per_second),
                before_first_seen: body.before_first_seen.unwrap_or(defaults.before_first_seen),
            },
        })
    })
    .await
}
