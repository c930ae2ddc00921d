//! The routes that change: each reads its body into a [`Command`], hands it to
//! [`Admin::execute`] with who asks and why, and answers the [`Outcome`].

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::Actor;
use super::dto::{BackfillDto, JobDto, RangeRetryDto, RetriedDto, RunDto, TriggeredDto};
use super::error::{ApiError, json};
use super::extract::{ApiJson, ApiPath, change_request};
use crate::parse::instant;
use crate::{Admin, BackfillOptions, ChangeRequest, Command, Outcome};

/// Carries out `command` and answers what it did.
async fn execute(admin: &Admin, command: Command, by: ChangeRequest) -> Result<Response, ApiError> {
    let outcome = admin.execute(command, &by).await?;
    Ok(match &outcome {
        Outcome::Paused(job) | Outcome::Resumed(job) => json(StatusCode::OK, &JobDto::from(job)),
        Outcome::Retried(retried) => json(
            StatusCode::OK,
            &RetriedDto {
                run: RunDto::from(&retried.run),
                job_paused: retried.job_paused,
                message: retried.outlook(),
            },
        ),
        Outcome::RetriedRange(report) => json(StatusCode::OK, &RangeRetryDto::from(report)),
        Outcome::Cancelled(run) => json(StatusCode::OK, &RunDto::from(run)),
        Outcome::Triggered(triggered) => json(StatusCode::OK, &TriggeredDto::from(triggered)),
        Outcome::Backfilled(report) => json(StatusCode::OK, &BackfillDto::from(report)),
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

pub(super) async fn retry(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<SlotChangeBody>,
) -> Result<Response, ApiError> {
    let command = Command::Retry {
        job,
        slot: instant("scheduleSlot", &body.schedule_slot)?,
        partition: body.partition.unwrap_or_default(),
    };
    let by = change_request(actor, body.actor, body.reason);
    execute(&admin, command, by).await
}

pub(super) async fn cancel(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<SlotChangeBody>,
) -> Result<Response, ApiError> {
    let command = Command::Cancel {
        job,
        slot: instant("scheduleSlot", &body.schedule_slot)?,
        partition: body.partition.unwrap_or_default(),
    };
    let by = change_request(actor, body.actor, body.reason);
    execute(&admin, command, by).await
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

pub(super) async fn retry_failed(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<RangeRetryBody>,
) -> Result<Response, ApiError> {
    let command = Command::RetryFailed {
        job,
        from: instant("from", &body.from)?,
        to: instant("to", &body.to)?,
        partition: body.partition,
    };
    let by = change_request(actor, body.actor, body.reason);
    execute(&admin, command, by).await
}

/// The body of a trigger, a pause or a resume.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ChangeBody {
    reason: String,
    actor: Option<String>,
}

pub(super) async fn trigger(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<ChangeBody>,
) -> Result<Response, ApiError> {
    let by = change_request(actor, body.actor, body.reason);
    execute(&admin, Command::Trigger { job }, by).await
}

pub(super) async fn pause(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<ChangeBody>,
) -> Result<Response, ApiError> {
    let by = change_request(actor, body.actor, body.reason);
    execute(&admin, Command::Pause { job }, by).await
}

pub(super) async fn resume(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<ChangeBody>,
) -> Result<Response, ApiError> {
    let by = change_request(actor, body.actor, body.reason);
    execute(&admin, Command::Resume { job }, by).await
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

pub(super) async fn backfill(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<BackfillBody>,
) -> Result<Response, ApiError> {
    let defaults = BackfillOptions::default();
    let command = Command::Backfill {
        job,
        from: instant("from", &body.from)?,
        to: instant("to", &body.to)?,
        options: BackfillOptions {
            dry_run: body.dry_run.unwrap_or(defaults.dry_run),
            per_second: body.per_second.unwrap_or(defaults.per_second),
            before_first_seen: body.before_first_seen.unwrap_or(defaults.before_first_seen),
        },
    };
    let by = change_request(actor, body.actor, body.reason);
    execute(&admin, command, by).await
}
