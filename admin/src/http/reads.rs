//! The routes that read: jobs, runs, missed slots, the audit trail, replicas; and the fallbacks.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use slotguard::store::RunFilter;

use super::dto::{
    AuditDto, AuditRecordDto, JobMissedDto, JobStatusDto, JobsDto, MissedDto, MissedEverywhereDto,
    MissedSlotDto, ReplicaDto, ReplicasDto, RunDto, RunsDto,
};
use super::error::{ApiError, json};
use super::extract::{ApiPath, ApiQuery};
use crate::parse::{instant, maybe_instant, page, present, record_id, seconds, status};
use crate::{Admin, AdminError, MissedCursor, MissedQuery};

pub(super) async fn list_jobs(State(admin): State<Admin>) -> Result<Response, ApiError> {
    let jobs = admin.jobs().await?;
    Ok(json(
        StatusCode::OK,
        &JobsDto {
            jobs: jobs.iter().map(JobStatusDto::from).collect(),
        },
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunsQuery {
    status: Option<String>,
    from: Option<String>,
    to: Option<String>,
    partition: Option<String>,
    limit: Option<String>,
}

pub(super) async fn list_runs(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    ApiQuery(query): ApiQuery<RunsQuery>,
) -> Result<Response, ApiError> {
    let filter = RunFilter {
        job: Some(job),
        status: present(query.status.as_deref())
            .map(|s| status("status", s))
            .transpose()?,
        partition: query.partition,
        from: maybe_instant("from", query.from.as_deref())?,
        to: maybe_instant("to", query.to.as_deref())?,
        limit: page(query.limit.as_deref())?,
    };
    let runs = admin.runs(filter).await?;
    Ok(json(
        StatusCode::OK,
        &RunsDto {
            runs: runs.iter().map(RunDto::from).collect(),
        },
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RunQuery {
    partition: Option<String>,
    wait: Option<String>,
}

pub(super) async fn get_run(
    State(admin): State<Admin>,
    ApiPath((job, slot)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<RunQuery>,
) -> Result<Response, ApiError> {
    let slot = instant("slot", &slot)?;
    let partition = query.partition.as_deref().unwrap_or("");
    let run = match present(query.wait.as_deref()) {
        None => admin.run(&job, slot, partition).await?,
        Some(wait) => {
            admin
                .wait(&job, slot, partition, seconds("wait", wait)?)
                .await?
        }
    };
    Ok(json(StatusCode::OK, &RunDto::from(&run)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MissedParams {
    from: Option<String>,
    to: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

impl MissedParams {
    /// `from` (required), `to` (missed slots stop at now, so no `to` means up to now), `limit`
    /// and `cursor` (every job's listing only).
    fn query(self, job: Option<String>) -> Result<MissedQuery, AdminError> {
        let Some(from) = maybe_instant("from", self.from.as_deref())? else {
            return Err(AdminError::Invalid {
                field: "from",
                problem: "is required".into(),
            });
        };
        let to = maybe_instant("to", self.to.as_deref())?.unwrap_or(DateTime::<Utc>::MAX_UTC);
        let after = match (present(self.cursor.as_deref()), &job) {
            (None, _) => None,
            (Some(token), None) => Some(MissedCursor::parse(token)?),
            (Some(_), Some(_)) => {
                return Err(AdminError::Invalid {
                    field: "cursor",
                    problem: "one job's listing continues with `from` set to its `next`".into(),
                });
            }
        };
        Ok(MissedQuery {
            job,
            from,
            to,
            after,
            limit: page(self.limit.as_deref())?,
        })
    }
}

pub(super) async fn missed(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    ApiQuery(params): ApiQuery<MissedParams>,
) -> Result<Response, ApiError> {
    let page = admin.missed_page(params.query(Some(job))?).await?;
    Ok(json(
        StatusCode::OK,
        &MissedDto {
            missed: page.slots().map(MissedSlotDto::from).collect(),
            next: page.next.map(|c| c.from),
        },
    ))
}

pub(super) async fn missed_everywhere(
    State(admin): State<Admin>,
    ApiQuery(params): ApiQuery<MissedParams>,
) -> Result<Response, ApiError> {
    let page = admin.missed_page(params.query(None)?).await?;
    Ok(json(
        StatusCode::OK,
        &MissedEverywhereDto {
            next: page.next.as_ref().map(MissedCursor::token),
            jobs: page.jobs.into_iter().map(JobMissedDto::from).collect(),
        },
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditQuery {
    job: Option<String>,
    limit: Option<String>,
    before: Option<String>,
}

pub(super) async fn audit(
    State(admin): State<Admin>,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Response, ApiError> {
    // A job name is matched as given: only an empty one is an absent one.
    let job = query.job.as_deref().filter(|j| !j.is_empty());
    let before = present(query.before.as_deref())
        .map(|id| record_id("before", id))
        .transpose()?;
    let limit = page(query.limit.as_deref())?;
    let records = admin.audit_page(job, before, limit).await?;
    // A full page may have more after it; the client asks with `before` set to `next`.
    let next = (records.len() == limit)
        .then(|| records.last().map(|r| r.id))
        .flatten();
    Ok(json(
        StatusCode::OK,
        &AuditDto {
            audit: records.iter().map(AuditRecordDto::from).collect(),
            next,
        },
    ))
}

pub(super) async fn replicas(State(admin): State<Admin>) -> Result<Response, ApiError> {
    let replicas = admin.replicas().await?;
    Ok(json(
        StatusCode::OK,
        &ReplicasDto {
            replicas: replicas.iter().map(ReplicaDto::from).collect(),
        },
    ))
}

pub(super) async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route in the slotguard admin API".into(),
    )
}

pub(super) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route of the slotguard admin API does not take that method".into(),
    )
}
