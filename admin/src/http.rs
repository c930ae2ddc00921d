//! The admin API over HTTP: an [axum](https://docs.rs/axum) [`Router`] that speaks JSON, behind the
//! cargo feature `axum`.
//!
//! # No authentication
//!
//! **The router authenticates no one and authorizes nothing.** Anyone who can reach it can retry,
//! cancel, trigger, backfill, pause and resume jobs. Mount it only behind the application's own
//! middleware (session, bearer token, mTLS identity, network policy), and put the operator's identity
//! in the request as an [`Actor`] extension so that the audit trail names who asked rather than what
//! the request body claims:
//!
//! ```no_run
//! use axum::extract::Request;
//! use axum::http::StatusCode;
//! use axum::middleware::{self, Next};
//! use axum::response::Response;
//! use axum::Router;
//! use slotguard_admin::Admin;
//! use slotguard_admin::http::{self, Actor};
//!
//! /// The application's own check: returns the operator a request is authenticated as.
//! fn authenticated_operator(req: &Request) -> Option<String> {
//!     # let _ = req;
//!     unimplemented!("verify a session, a bearer token or a client certificate")
//! }
//!
//! async fn operators_only(mut req: Request, next: Next) -> Result<Response, StatusCode> {
//!     let operator = authenticated_operator(&req).ok_or(StatusCode::UNAUTHORIZED)?;
//!     // Recorded as the actor of every change, whatever the body says.
//!     req.extensions_mut().insert(Actor(operator));
//!     Ok(next.run(req).await)
//! }
//!
//! # fn app(admin: Admin) -> Router {
//! let app: Router = Router::new().nest(
//!     "/internal",
//!     // `layer` guards every path under the prefix, unknown ones too; `route_layer` would guard
//!     // only the routes that match.
//!     http::router(admin).layer(middleware::from_fn(operators_only)),
//! );
//! # app }
//! ```
//!
//! # Routes
//!
//! Mount the router under a prefix with [`Router::nest`] (for example `/internal`). Slots are RFC 3339
//! instants (`2026-03-08T02:00:00+09:00`, `2026-03-07T17:00:00Z`); in a query string write `+` as `%2B`
//! (a bare `+` that decodes to a space before the offset is accepted too).
//!
//! | method | path | query / body | answer |
//! | --- | --- | --- | --- |
//! | `GET` | `/jobs` | | `{"jobs": [job with nextSlots, lastRun, active and replicas]}` |
//! | `GET` | `/jobs/{job}/runs` | `?status=&from=&to=&partition=&limit=` | `{"runs": [run with attempts]}` |
//! | `GET` | `/jobs/{job}/runs/{slot}` | `?partition=&wait=` | run with attempts |
//! | `GET` | `/jobs/{job}/missed` | `?from=&to=&limit=` (`to` defaults to now) | `{"missed": [slot], "next": from or null}` |
//! | `GET` | `/missed` | `?from=&to=&limit=&cursor=` (`to` defaults to now) | `{"jobs": [{"job", "missed": [slot]} or {"job", "error", "message", "field"}], "next": cursor or null}`: every job |
//! | `POST` | `/jobs/{job}/retry` | `{"scheduleSlot", "reason", "actor"?, "partition"?}` | run, with `jobPaused` and `message` (what happens next) |
//! | `POST` | `/jobs/{job}/retry-failed` | `{"from", "to", "reason", "actor"?, "partition"?}` | `{"retried": [slot], "changed": [slot]}` |
//! | `POST` | `/jobs/{job}/cancel` | `{"scheduleSlot", "reason", "actor"?, "partition"?}` | run |
//! | `POST` | `/jobs/{job}/trigger` | `{"reason", "actor"?}` | `{"runId", "scheduledAt", "paused", "replicas", "message"}` |
//! | `POST` | `/jobs/{job}/backfill` | `{"from", "to", "dryRun"?, "perSecond"?, "beforeFirstSeen"?, "reason", "actor"?}` | backfill report |
//! | `POST` | `/jobs/{job}/pause` | `{"reason", "actor"?}` | job; `409 refused` if already paused (who paused it stays) |
//! | `POST` | `/jobs/{job}/resume` | `{"reason", "actor"?}` | job; `409 refused` if not paused (nothing audited) |
//! | `GET` | `/audit` | `?job=&limit=&before=` | `{"audit": [record], "next": id or null}` |
//! | `GET` | `/replicas` | | `{"replicas": [replica]}`: every recorded process, alive or gone |
//!
//! An empty query parameter is an absent one, except `partition`: `?partition=` means the
//! unpartitioned runs, no `partition` at all means every partition. `limit` is a whole number from 1
//! to 1,000 ([`MAX_PAGE`](crate::MAX_PAGE)), 50 when absent; `limit=0` or `limit=100000` is `400
//! invalid` with `field: "limit"`, as in the CLI and the Rust API ([`check_page`](crate::check_page)),
//! never capped. Runs are listed newest slot first; the audit trail newest first.
//!
//! Missed slots are pages too ([`Admin::missed_page`]): at most `limit` slots, oldest first, job by
//! job, counted from when each job was first registered, and `next` to continue: one job's listing
//! continues with `from` set to `next`; every job's with `cursor` set to `next` (URL-encoded, the
//! same `from` and `to`). A page that looked at 100,000 schedule slots
//! ([`MAX_SCAN_SLOTS`](crate::MAX_SCAN_SLOTS)) ends there, possibly empty, with a `next`: follow
//! `next` until it is `null`. The audit trail continues with `before` set to its `next` (the last
//! record's id, given when the page is full). Instants before 1970 are `400 invalid`. A backfill that starts before
//! the job was first registered (`registeredAt` of `GET /jobs`) is `400 invalid` unless
//! `beforeFirstSeen` is `true`.
//!
//! `wait=N` (seconds, 0 to 3,600, [`MAX_WAIT`](crate::MAX_WAIT)) answers once the run is finished
//! ([`finished`](crate::finished): succeeded, failed, dead, skipped, or abandoned with no next
//! attempt) or `N` seconds have passed, whichever is first, as [`Admin::wait`] does; check `status`.
//! `retry-failed` retries every `failed` or `dead` run with a slot in `[from, to)` (every partition
//! unless `partition` is given), one audit entry each, at most
//! [`MAX_RETRY_RUNS`](crate::MAX_RETRY_RUNS); `changed` lists those that changed before their turn.
//!
//! `slot` is accepted as another name of `scheduleSlot`. `actor` defaults to `"http"`, and an
//! [`Actor`] extension replaces it. `dryRun` defaults to `true` and `perSecond` to `1.0`
//! (from [`MIN_PER_SECOND`](crate::MIN_PER_SECOND) to [`MAX_PER_SECOND`](crate::MAX_PER_SECOND)). Unknown
//! fields and query parameters are refused rather than ignored, so a misspelt `partition` cannot
//! retry the wrong run. Bodies must be `application/json` and at most [`MAX_BODY_BYTES`].
//!
//! # Errors
//!
//! Every answer is JSON (`application/json`, `nosniff`, with `<`, `>` and `&` escaped), errors
//! included: `{"error": kind, "message": text}`, plus `field` for `invalid` (the body key or query
//! parameter as the request writes it, such as `perSecond` or `scheduleSlot`, or `range` for a
//! `from`/`to` pair) and `runStatus` for `refused`.
//!
//! | status | `error` | when |
//! | --- | --- | --- |
//! | 400 | `invalid` | a malformed or out-of-bounds field, date, query or JSON body |
//! | 404 | `unknown_job`, `unknown_run`, `not_found` | no such job, run or route |
//! | 405 | `method_not_allowed` | a known path with another method |
//! | 409 | `refused` | the run's status does not allow the change (retrying a running run) |
//! | 413 | `payload_too_large` | a body over [`MAX_BODY_BYTES`]; nothing was changed |
//! | 415 | `unsupported_media_type` | a body without `content-type: application/json` |
//! | 503 | `store` | the store could not be asked; nothing was changed |
//!
//! A job name that breaks the rule jobs are registered under ([`check_job_name`](slotguard::check_job_name):
//! a NUL, a newline, a `:`, over 200 characters) is `404 unknown_job`, and such a partition key
//! ([`check_partition`](slotguard::check_partition)) is `400 invalid` with `field: "partition"`, on every
//! store: bad input is never sent to the store, and never answered 503.
//!
//! The router has a JSON fallback for unknown paths under its prefix. To [`Router::merge`] it into a
//! router that has a fallback of its own, call [`Router::reset_fallback`] on it first.
#![cfg_attr(docsrs, doc(cfg(feature = "http")))]

use axum::Router;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Extension, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{
    Admin, AdminError, BackfillOptions, BackfillReport, ChangeRequest, DEFAULT_PAGE, JobMissed,
    JobStatus, MissedCursor, MissedQuery, MissedSlot, RangeRetry, Triggered, parse_page, shown,
};
use slotguard::store::{
    AttemptRecord, AuditRecord, JobRecord, ReplicaRecord, RunFilter, RunRecord, RunStatus, SlotKey,
    UnknownRunStatus,
};

/// The largest request body accepted, in bytes; a larger one is refused with 413 and changes nothing.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The actor recorded when neither the request body nor an [`Actor`] extension names one.
pub const DEFAULT_ACTOR: &str = "http";

/// The operator a request is authenticated as, put in the request's extensions by the application's
/// middleware. When present it is the actor of every change made by the request, and the body's
/// `actor` is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor(pub String);

/// The admin API as an axum router, with no state left for the caller to provide. See the
/// [module documentation](self) for the routes, the errors, and the authentication it does not do.
pub fn router(admin: Admin) -> Router {
    Router::new()
        .route("/jobs", get(list_jobs))
        .route("/jobs/{job}/runs", get(list_runs))
        .route("/jobs/{job}/runs/{slot}", get(get_run))
        .route("/jobs/{job}/missed", get(missed))
        .route("/jobs/{job}/retry", post(retry))
        .route("/jobs/{job}/retry-failed", post(retry_failed))
        .route("/jobs/{job}/cancel", post(cancel))
        .route("/jobs/{job}/trigger", post(trigger))
        .route("/jobs/{job}/backfill", post(backfill))
        .route("/jobs/{job}/pause", post(pause))
        .route("/jobs/{job}/resume", post(resume))
        .route("/missed", get(missed_everywhere))
        .route("/audit", get(audit))
        .route("/replicas", get(replicas))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(admin)
}

// ---------------------------------------------------------------------------------------------
// Handlers

async fn list_jobs(State(admin): State<Admin>) -> Result<Response, ApiError> {
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
struct RunsQuery {
    status: Option<String>,
    from: Option<String>,
    to: Option<String>,
    partition: Option<String>,
    limit: Option<String>,
}

async fn list_runs(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    ApiQuery(query): ApiQuery<RunsQuery>,
) -> Result<Response, ApiError> {
    let filter = RunFilter {
        job: Some(job),
        status: present(query.status).map(|s| run_status(&s)).transpose()?,
        partition: query.partition,
        from: present(query.from)
            .map(|t| instant("from", &t))
            .transpose()?,
        to: present(query.to).map(|t| instant("to", &t)).transpose()?,
        limit: limit(query.limit)?,
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
struct RunQuery {
    partition: Option<String>,
    wait: Option<String>,
}

async fn get_run(
    State(admin): State<Admin>,
    ApiPath((job, slot)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<RunQuery>,
) -> Result<Response, ApiError> {
    let slot = instant("slot", &slot)?;
    let partition = query.partition.as_deref().unwrap_or("");
    let run = match present(query.wait) {
        None => admin.run(&job, slot, partition).await?,
        Some(wait) => {
            admin
                .wait(&job, slot, partition, seconds("wait", &wait)?)
                .await?
        }
    };
    Ok(json(StatusCode::OK, &RunDto::from(&run)))
}

/// The body of a retry of every failed run in a range.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RangeRetryBody {
    from: String,
    to: String,
    reason: String,
    actor: Option<String>,
    partition: Option<String>,
}

async fn retry_failed(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<RangeRetryBody>,
) -> Result<Response, ApiError> {
    let range = (instant("from", &body.from)?, instant("to", &body.to)?);
    let by = change_request(actor, body.actor, body.reason);
    let report = admin
        .retry_failed(&job, range, body.partition.as_deref(), &by)
        .await?;
    Ok(json(StatusCode::OK, &RangeRetryDto::from(&report)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MissedParams {
    from: Option<String>,
    to: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

impl MissedParams {
    /// `from` (required), `to` (missed slots stop at now, so no `to` means up to now), `limit`
    /// and `cursor` (every job's listing only).
    fn query(self, job: Option<String>) -> Result<MissedQuery, ApiError> {
        let from = match present(self.from) {
            Some(from) => instant("from", &from)?,
            None => return Err(missing("from")),
        };
        let to = match present(self.to) {
            Some(to) => instant("to", &to)?,
            None => DateTime::<Utc>::MAX_UTC,
        };
        let after = match (present(self.cursor), &job) {
            (None, _) => None,
            (Some(token), None) => Some(MissedCursor::parse(&token)?),
            (Some(_), Some(_)) => {
                return Err(AdminError::Invalid {
                    field: "cursor",
                    problem: "one job's listing continues with `from` set to its `next`".into(),
                }
                .into());
            }
        };
        Ok(MissedQuery {
            job,
            from,
            to,
            after,
            limit: limit(self.limit)?,
        })
    }
}

async fn missed(
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

async fn missed_everywhere(
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

/// The body of a retry or a cancellation.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SlotChangeBody {
    #[serde(alias = "slot")]
    schedule_slot: String,
    reason: String,
    actor: Option<String>,
    partition: Option<String>,
}

async fn retry(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<SlotChangeBody>,
) -> Result<Response, ApiError> {
    let slot = instant("scheduleSlot", &body.schedule_slot)?;
    let by = change_request(actor, body.actor, body.reason);
    let partition = body.partition.unwrap_or_default();
    let retried = admin.retry(&job, slot, &partition, &by).await?;
    Ok(json(
        StatusCode::OK,
        &RetriedDto {
            run: RunDto::from(&retried.run),
            job_paused: retried.job_paused,
            message: retried.outlook(),
        },
    ))
}

async fn cancel(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<SlotChangeBody>,
) -> Result<Response, ApiError> {
    let slot = instant("scheduleSlot", &body.schedule_slot)?;
    let by = change_request(actor, body.actor, body.reason);
    let partition = body.partition.unwrap_or_default();
    let run = admin.cancel(&job, slot, &partition, &by).await?;
    Ok(json(StatusCode::OK, &RunDto::from(&run)))
}

/// The body of a trigger, a pause or a resume.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ChangeBody {
    reason: String,
    actor: Option<String>,
}

async fn trigger(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<ChangeBody>,
) -> Result<Response, ApiError> {
    let by = change_request(actor, body.actor, body.reason);
    let triggered = admin.trigger(&job, &by).await?;
    Ok(json(StatusCode::OK, &TriggeredDto::from(&triggered)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BackfillBody {
    from: String,
    to: String,
    dry_run: Option<bool>,
    per_second: Option<f64>,
    before_first_seen: Option<bool>,
    reason: String,
    actor: Option<String>,
}

async fn backfill(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<BackfillBody>,
) -> Result<Response, ApiError> {
    let from = instant("from", &body.from)?;
    let to = instant("to", &body.to)?;
    let defaults = BackfillOptions::default();
    let options = BackfillOptions {
        dry_run: body.dry_run.unwrap_or(defaults.dry_run),
        per_second: body.per_second.unwrap_or(defaults.per_second),
        before_first_seen: body.before_first_seen.unwrap_or(defaults.before_first_seen),
    };
    let by = change_request(actor, body.actor, body.reason);
    let report = admin.backfill(&job, from, to, options, &by).await?;
    Ok(json(StatusCode::OK, &BackfillDto::from(&report)))
}

async fn pause(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<ChangeBody>,
) -> Result<Response, ApiError> {
    let by = change_request(actor, body.actor, body.reason);
    let record = admin.pause(&job, &by).await?;
    Ok(json(StatusCode::OK, &JobDto::from(&record)))
}

async fn resume(
    State(admin): State<Admin>,
    ApiPath(job): ApiPath<String>,
    actor: Option<Extension<Actor>>,
    ApiJson(body): ApiJson<ChangeBody>,
) -> Result<Response, ApiError> {
    let by = change_request(actor, body.actor, body.reason);
    let record = admin.resume(&job, &by).await?;
    Ok(json(StatusCode::OK, &JobDto::from(&record)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    job: Option<String>,
    limit: Option<String>,
    before: Option<String>,
}

async fn audit(
    State(admin): State<Admin>,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Response, ApiError> {
    let job = present(query.job);
    let before = present(query.before)
        .map(|id| {
            id.trim().parse::<i64>().map_err(|_| AdminError::Invalid {
                field: "before",
                problem: format!("`{}` is not the id of an audit record", shown(&id)),
            })
        })
        .transpose()?;
    let limit = limit(query.limit)?;
    let records = admin.audit_page(job.as_deref(), before, limit).await?;
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

async fn replicas(State(admin): State<Admin>) -> Result<Response, ApiError> {
    let replicas = admin.replicas().await?;
    Ok(json(
        StatusCode::OK,
        &ReplicasDto {
            replicas: replicas.iter().map(ReplicaDto::from).collect(),
        },
    ))
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route in the slotguard admin API".into(),
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route of the slotguard admin API does not take that method".into(),
    )
}

// ---------------------------------------------------------------------------------------------
// Input

/// The change request of a body: the authenticated [`Actor`] if the middleware set one, else the
/// body's actor, else [`DEFAULT_ACTOR`]. `Admin` validates both fields.
fn change_request(
    authenticated: Option<Extension<Actor>>,
    actor: Option<String>,
    reason: String,
) -> ChangeRequest {
    let actor = match authenticated {
        Some(Extension(Actor(actor))) => actor,
        None => actor.unwrap_or_else(|| DEFAULT_ACTOR.to_owned()),
    };
    ChangeRequest::new(actor, reason)
}

/// An empty query parameter (`?from=`) is the same as a missing one.
fn present(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty())
}

/// A page size by the admin API's rule ([`parse_page`]); empty or absent is [`DEFAULT_PAGE`].
fn limit(value: Option<String>) -> Result<usize, AdminError> {
    present(value).map_or(Ok(DEFAULT_PAGE), |text| parse_page(&text))
}

/// A number of seconds, whole or not, from 0 to [`MAX_WAIT`](crate::MAX_WAIT).
fn seconds(field: &'static str, text: &str) -> Result<std::time::Duration, AdminError> {
    let value: f64 = text.trim().parse().map_err(|_| AdminError::Invalid {
        field,
        problem: format!("`{}` is not a number of seconds", shown(text)),
    })?;
    let max = crate::MAX_WAIT.as_secs_f64();
    if !(0.0..=max).contains(&value) {
        return Err(AdminError::Invalid {
            field,
            problem: format!(
                "{} is out of range: expected 0 to {max} seconds",
                shown(text)
            ),
        });
    }
    Ok(std::time::Duration::from_secs_f64(value))
}

fn missing(field: &'static str) -> ApiError {
    AdminError::Invalid {
        field,
        problem: "is required".into(),
    }
    .into()
}

/// An RFC 3339 instant. A query string decodes `+` to a space, so `…T02:00:00 09:00` is read as
/// `…T02:00:00+09:00`.
fn instant(field: &'static str, text: &str) -> Result<DateTime<Utc>, AdminError> {
    let parsed = DateTime::parse_from_rfc3339(text).or_else(|first| match text.rfind(' ') {
        Some(i) if i > "2026-03-08".len() => {
            DateTime::parse_from_rfc3339(&format!("{}+{}", &text[..i], &text[i + 1..]))
                .map_err(|_| first)
        }
        _ => Err(first),
    });
    parsed
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| AdminError::Invalid {
            field,
            problem: format!(
                "`{}` is not an RFC 3339 instant such as 2026-03-08T02:00:00+09:00 ({e})",
                shown(text)
            ),
        })
}

fn run_status(text: &str) -> Result<RunStatus, AdminError> {
    text.parse()
        .map_err(|e: UnknownRunStatus| AdminError::Invalid {
            field: "status",
            problem: e.to_string(),
        })
}

/// `axum::Json` with this module's error answers.
struct ApiJson<T>(T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(ApiError::from(rejection)),
        }
    }
}

/// `axum::extract::Query` with this module's error answers.
struct ApiQuery<T>(T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::from(rejection)),
        }
    }
}

/// `axum::extract::Path` with this module's error answers.
struct ApiPath<T>(T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(ApiError::from(rejection)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors

/// An error answer: `{"error": kind, "message": text}` with its status.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    field: Option<&'static str>,
    run_status: Option<RunStatus>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ErrorDto<'a> {
    error: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_status: Option<&'a str>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: String) -> Self {
        ApiError {
            status,
            kind,
            message,
            field: None,
            run_status: None,
        }
    }

    /// An extractor's rejection, in this module's shape: malformed input is `400 invalid` (axum
    /// answers 422 for JSON of the wrong shape), an oversized body `413`, a body that is not JSON
    /// `415`.
    fn rejected(status: StatusCode, text: String) -> Self {
        match status {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                status,
                "payload_too_large",
                format!("{text} (at most {MAX_BODY_BYTES} bytes are accepted)"),
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ApiError::new(status, "unsupported_media_type", text)
            }
            s if s.is_client_error() => ApiError::new(StatusCode::BAD_REQUEST, "invalid", text),
            s => ApiError::new(s, "internal", text),
        }
    }
}

impl From<AdminError> for ApiError {
    fn from(error: AdminError) -> Self {
        let message = error.to_string();
        match error {
            AdminError::UnknownJob { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_job", message)
            }
            AdminError::UnknownRun { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_run", message)
            }
            AdminError::Refused { status, .. } => ApiError {
                run_status: Some(status),
                ..ApiError::new(StatusCode::CONFLICT, "refused", message)
            },
            AdminError::PauseState { .. } => {
                ApiError::new(StatusCode::CONFLICT, "refused", message)
            }
            AdminError::Invalid { field, .. } => ApiError {
                field: Some(field),
                ..ApiError::new(StatusCode::BAD_REQUEST, "invalid", message)
            },
            AdminError::Store(_) => {
                tracing::warn!(error = %message, "slotguard admin API: store error");
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store", message)
            }
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        ApiError::rejected(rejection.status(), rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::rejected(rejection.status(), rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::rejected(rejection.status(), rejection.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        json(
            self.status,
            &ErrorDto {
                error: self.kind,
                message: &self.message,
                field: self.field,
                run_status: self.run_status.map(RunStatus::as_str),
            },
        )
    }
}

/// A JSON answer. `<`, `>` and `&` are written as `\u003c`, `\u003e` and `\u0026` (they can only
/// occur inside JSON strings, where the escapes mean the same), so that echoed input can never be
/// read as markup, whatever a client sniffs.
fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    let (status, text) = match serde_json::to_string(body) {
        Ok(text) => (status, text),
        Err(error) => {
            tracing::error!(%error, "slotguard admin API: could not write an answer");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                r#"{"error":"internal","message":"could not write the answer"}"#.to_owned(),
            )
        }
    };
    let text = text
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    let mut response = (status, text).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

// ---------------------------------------------------------------------------------------------
// Answers

#[derive(Serialize)]
struct JobsDto {
    jobs: Vec<JobStatusDto>,
}

/// A job as `GET /jobs` lists it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JobStatusDto {
    #[serde(flatten)]
    job: JobDto,
    next_slots: Vec<DateTime<Utc>>,
    last_run: Option<RunSummaryDto>,
    active: bool,
    replicas: Vec<String>,
}

impl From<&JobStatus> for JobStatusDto {
    fn from(status: &JobStatus) -> Self {
        JobStatusDto {
            job: JobDto::from(&status.record),
            next_slots: status.next_slots.clone(),
            last_run: status.last_run.as_ref().map(RunSummaryDto::from),
            active: status.active(),
            replicas: status.replicas.clone(),
        }
    }
}

/// A job's stored definition and pause state.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JobDto {
    name: String,
    cron: String,
    zone: String,
    dst: String,
    guard: String,
    fingerprint: String,
    paused: bool,
    paused_by: Option<String>,
    paused_reason: Option<String>,
    paused_at: Option<DateTime<Utc>>,
    registered_at: DateTime<Utc>,
    seen_at: DateTime<Utc>,
}

impl From<&JobRecord> for JobDto {
    fn from(record: &JobRecord) -> Self {
        let def = &record.definition;
        JobDto {
            name: def.name.clone(),
            cron: def.cron.clone(),
            zone: def.zone.clone(),
            dst: def.dst.clone(),
            guard: def.guard.clone(),
            fingerprint: fingerprint(def.fingerprint),
            paused: record.paused,
            paused_by: record.paused_by.clone(),
            paused_reason: record.paused_reason.clone(),
            paused_at: record.paused_at,
            registered_at: record.registered_at,
            seen_at: record.seen_at,
        }
    }
}

/// The newest run of a job, in brief.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunSummaryDto {
    id: i64,
    scheduled_at: DateTime<Utc>,
    partition: String,
    status: &'static str,
    trigger: &'static str,
    attempt: u32,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    error_message: Option<String>,
}

impl From<&RunRecord> for RunSummaryDto {
    fn from(run: &RunRecord) -> Self {
        RunSummaryDto {
            id: run.id,
            scheduled_at: run.key.scheduled_at,
            partition: run.key.partition.clone(),
            status: run.status.as_str(),
            trigger: run.trigger.as_str(),
            attempt: run.attempt,
            started_at: run.started_at,
            finished_at: run.finished_at,
            error_message: run.error_message.clone(),
        }
    }
}

#[derive(Serialize)]
struct RunsDto {
    runs: Vec<RunDto>,
}

/// A run with its attempts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RunDto {
    id: i64,
    job: String,
    scheduled_at: DateTime<Utc>,
    partition: String,
    status: &'static str,
    trigger: &'static str,
    attempt: u32,
    owner: Option<String>,
    token: i64,
    heartbeat_at: Option<DateTime<Utc>>,
    stale_after_ms: u64,
    next_attempt_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    error_class: Option<String>,
    error_message: Option<String>,
    zone: String,
    wall_time: NaiveDateTime,
    business_date: NaiveDate,
    fingerprint: String,
    attempts: Vec<AttemptDto>,
}

impl From<&RunRecord> for RunDto {
    fn from(run: &RunRecord) -> Self {
        RunDto {
            id: run.id,
            job: run.key.job.clone(),
            scheduled_at: run.key.scheduled_at,
            partition: run.key.partition.clone(),
            status: run.status.as_str(),
            trigger: run.trigger.as_str(),
            attempt: run.attempt,
            owner: run.owner.clone(),
            token: run.token,
            heartbeat_at: run.heartbeat_at,
            stale_after_ms: u64::try_from(run.stale_after.as_millis()).unwrap_or(u64::MAX),
            next_attempt_at: run.next_attempt_at,
            created_at: run.created_at,
            updated_at: run.updated_at,
            started_at: run.started_at,
            finished_at: run.finished_at,
            error_class: run.error_class.clone(),
            error_message: run.error_message.clone(),
            zone: run.zone.clone(),
            wall_time: run.wall_time,
            business_date: run.business_date,
            fingerprint: fingerprint(run.fingerprint),
            attempts: run.attempts.iter().map(AttemptDto::from).collect(),
        }
    }
}

/// One attempt of a run.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttemptDto {
    attempt: u32,
    owner: String,
    token: i64,
    status: &'static str,
    started_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    message: Option<String>,
}

impl From<&AttemptRecord> for AttemptDto {
    fn from(attempt: &AttemptRecord) -> Self {
        AttemptDto {
            attempt: attempt.attempt,
            owner: attempt.owner.clone(),
            token: attempt.token,
            status: attempt.status.as_str(),
            started_at: attempt.started_at,
            finished_at: attempt.finished_at,
            message: attempt.message.clone(),
        }
    }
}

#[derive(Serialize)]
struct MissedDto {
    missed: Vec<MissedSlotDto>,
    /// The `from` of the next page; `null` when the range is done.
    next: Option<DateTime<Utc>>,
}

#[derive(Serialize)]
struct MissedEverywhereDto {
    jobs: Vec<JobMissedDto>,
    /// The `cursor` of the next page; `null` when the range is done.
    next: Option<String>,
}

/// One job's missed slots, or why they were not counted (the error answer's fields).
#[derive(Serialize)]
struct JobMissedDto {
    job: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    missed: Option<Vec<MissedSlotDto>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'static str>,
}

impl From<JobMissed> for JobMissedDto {
    fn from(part: JobMissed) -> Self {
        let (missed, error) = match part.missed {
            Ok(slots) => (Some(slots.iter().map(MissedSlotDto::from).collect()), None),
            Err(e) => (None, Some(ApiError::from(e))),
        };
        JobMissedDto {
            job: part.job,
            missed,
            error: error.as_ref().map(|e| e.kind),
            field: error.as_ref().and_then(|e| e.field),
            message: error.map(|e| e.message),
        }
    }
}

/// A slot of the schedule with no row.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MissedSlotDto {
    scheduled_at: DateTime<Utc>,
    wall_time: NaiveDateTime,
    business_date: NaiveDate,
}

impl From<&MissedSlot> for MissedSlotDto {
    fn from(slot: &MissedSlot) -> Self {
        MissedSlotDto {
            scheduled_at: slot.scheduled_at,
            wall_time: slot.wall,
            business_date: slot.business_date,
        }
    }
}

/// A retried run, with what happens to it next.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RetriedDto {
    #[serde(flatten)]
    run: RunDto,
    job_paused: bool,
    message: &'static str,
}

/// A manual run.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TriggeredDto {
    run_id: i64,
    scheduled_at: DateTime<Utc>,
    paused: bool,
    /// The live replicas running the job when the run was created.
    replicas: Vec<String>,
    message: String,
}

impl From<&Triggered> for TriggeredDto {
    fn from(triggered: &Triggered) -> Self {
        TriggeredDto {
            run_id: triggered.run_id,
            scheduled_at: triggered.scheduled_at,
            paused: triggered.paused,
            replicas: triggered.replicas.clone(),
            message: triggered.outlook(),
        }
    }
}

/// What a backfill created, or would create.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BackfillDto {
    dry_run: bool,
    slots: Vec<MissedSlotDto>,
    created: usize,
    existing: usize,
    last_due: Option<DateTime<Utc>>,
}

impl From<&BackfillReport> for BackfillDto {
    fn from(report: &BackfillReport) -> Self {
        BackfillDto {
            dry_run: report.dry_run,
            slots: report.slots.iter().map(MissedSlotDto::from).collect(),
            created: report.created,
            existing: report.existing,
            last_due: report.last_due,
        }
    }
}

/// What a retry of every failed run in a range did.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RangeRetryDto {
    retried: Vec<SlotKeyDto>,
    changed: Vec<SlotKeyDto>,
}

/// One slot of a job.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SlotKeyDto {
    scheduled_at: DateTime<Utc>,
    partition: String,
}

impl From<&RangeRetry> for RangeRetryDto {
    fn from(report: &RangeRetry) -> Self {
        let keys = |keys: &[SlotKey]| {
            keys.iter()
                .map(|k| SlotKeyDto {
                    scheduled_at: k.scheduled_at,
                    partition: k.partition.clone(),
                })
                .collect()
        };
        RangeRetryDto {
            retried: keys(&report.retried),
            changed: keys(&report.changed),
        }
    }
}

#[derive(Serialize)]
struct AuditDto {
    audit: Vec<AuditRecordDto>,
    /// The `before` of the next page: the last record's id when the page is full, else `null`.
    next: Option<i64>,
}

/// One change in the audit trail.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AuditRecordDto {
    id: i64,
    job: String,
    run_id: Option<i64>,
    scheduled_at: Option<DateTime<Utc>>,
    action: String,
    actor: String,
    reason: String,
    at: DateTime<Utc>,
}

impl From<&AuditRecord> for AuditRecordDto {
    fn from(record: &AuditRecord) -> Self {
        AuditRecordDto {
            id: record.id,
            job: record.job.clone(),
            run_id: record.run_id,
            scheduled_at: record.scheduled_at,
            action: record.entry.action.clone(),
            actor: record.entry.actor.clone(),
            reason: record.entry.reason.clone(),
            at: record.at,
        }
    }
}

#[derive(Serialize)]
struct ReplicasDto {
    replicas: Vec<ReplicaDto>,
}

/// A scheduler process as it recorded itself.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplicaDto {
    id: String,
    host: String,
    pid: u32,
    version: String,
    roles: Vec<String>,
    jobs: Vec<String>,
    runs_held: u32,
    started_at: DateTime<Utc>,
    heartbeat_at: DateTime<Utc>,
    gone_after_ms: u64,
    alive: bool,
}

impl From<&ReplicaRecord> for ReplicaDto {
    fn from(record: &ReplicaRecord) -> Self {
        let info = &record.info;
        ReplicaDto {
            id: info.id.clone(),
            host: info.host.clone(),
            pid: info.pid,
            version: info.version.clone(),
            roles: info.roles.clone(),
            jobs: info.jobs.clone(),
            runs_held: info.runs_held,
            started_at: record.started_at,
            heartbeat_at: record.heartbeat_at,
            gone_after_ms: u64::try_from(info.gone_after.as_millis()).unwrap_or(u64::MAX),
            alive: record.alive,
        }
    }
}

/// A schedule fingerprint as 16 hex digits: a `u64` does not survive a JavaScript number.
fn fingerprint(value: u64) -> String {
    format!("{value:016x}")
}
