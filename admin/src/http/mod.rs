//! The admin API over HTTP: an [axum](https://docs.rs/axum) [`Router`] that speaks JSON, behind the
//! cargo feature `http`.
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
//! Mount the router under a prefix with [`Router::nest`] (for example `/internal`). Slots and the
//! other instants are read by the [one rule of every front end](crate::parse): RFC 3339
//! (`2026-03-08T02:00:00+09:00`, `2026-03-07T17:00:00Z`), or a wall time or date without an offset,
//! read in UTC; in a query string write `+` as `%2B` (a bare `+` that decodes to a blank before the
//! offset is accepted too).
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
//! | `POST` | `/jobs/{job}/skip` | `{"scheduleSlot", "partition"?, "reason", "actor"?}` | run (`skipped`); `409 refused` if the slot has a row |
//! | `POST` | `/jobs/{job}/unskip` | `{"scheduleSlot", "partition"?, "reason", "actor"?}` | `{"unskipped": true}`; `404 unknown_run` once a replica claimed it |
//! | `GET` | `/schedules` | `?job=&after=&limit=` | `{"schedules": [schedule], "next": id or null}` |
//! | `POST` | `/schedules` | `{"id", "job", "cron", "tz", "dst"?, "partition"?, "startAt"?, "endAt"?, "remainingRuns"?, "paused"?, "note"?, "pauseOnFailure"?, "reason", "actor"?}` | `201` schedule; `409 exists` |
//! | `POST` | `/schedules/preview` | the fields of `POST /schedules` without `id` and `reason`, `"count"`? (1 to 1,000, default 5) | `{"next": [slot]}`; nothing is stored |
//! | `GET` | `/schedules/{id}` | | schedule |
//! | `PATCH` | `/schedules/{id}` | `{"version", …fields to change (`null` clears), "reason", "actor"?}` | schedule; `409 stale_version` |
//! | `GET` | `/schedules/{id}/history` | | `{"versions": [schedule]}`: every version, oldest first, removals included (`next` empty) |
//! | `GET` | `/schedules/{id}/missed` | `?from=&to=&limit=` (`to` defaults to now) | `{"partition", "missed": [slot], "next": from or null}`: the schedule's slots with no row |
//! | `DELETE` | `/schedules/{id}` | `{"version"?, "reason", "actor"?}`, or `?version=&reason=&actor=` without a body | the removed version (`"removed": true`) |
//! | `GET` | `/audit` | `?job=&limit=&before=` | `{"audit": [record], "next": id or null}` |
//! | `GET` | `/replicas` | | `{"replicas": [replica]}`: every recorded process, alive or gone |
//! | `GET` | `/calendar-overrides` | `?calendar=` | `{"overrides": [override]}`: the latest of each calendar and date, by calendar and date |
//! | `POST` | `/calendar-overrides` | `{"calendar", "date", "kind": "add" or "remove", "name"? (required to add), "reason", "actor"?}` | `201` override; `400 invalid` with `field` `calendar` (not a builtin nor a registered job's), `date`, `kind`, `name` |
//!
//! An empty query parameter is an absent one, except `partition`: `?partition=` means the
//! unpartitioned runs, no `partition` at all means every partition. `limit` is a whole number from 1
//! to 1,000 ([`MAX_PAGE`](crate::MAX_PAGE)), 50 when absent; `limit=0` or `limit=100000` is `400
//! invalid` with `field: "limit"`, as in the CLI and the Rust API ([`check_page`](crate::check_page)),
//! never capped. Runs are listed newest slot first; the audit trail newest first.
//!
//! An override is answered as `{"calendar", "date", "kind", "name", "reason", "changedBy",
//! "changedAt", "effectiveAt"}`; running schedulers follow it from `effectiveAt` (see
//! docs/time.md).
//!
//! A schedule is answered as `{"id", "version", "source": "api", "job", "cron", "tz", "dst",
//! "partition", "startAt", "endAt", "remainingRuns", "paused", "note", "pauseOnFailure", "removed", "effectiveAt",
//! "changedBy", "changedAt", "reason", "next"}`: `next` holds its next 5 slots under the versions in
//! force at each, `effectiveAt` when the version takes effect (half a second after it was stored; see
//! docs/schedules.md). A change without `remainingRuns` keeps counting down the runs left.
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
//! | 404 | `unknown_job`, `unknown_run`, `unknown_schedule`, `not_found` | no such job, run, schedule or route |
//! | 405 | `method_not_allowed` | a known path with another method |
//! | 409 | `refused` | the run's status does not allow the change (retrying a running run) |
//! | 409 | `exists`, `stale_version` | a schedule added twice; a change read at an older version than the latest |
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

mod calendars;
mod changes;
mod dto;
mod error;
mod extract;
mod reads;
mod schedules;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

use crate::Admin;

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
        .route("/jobs", get(reads::list_jobs))
        .route("/jobs/{job}/runs", get(reads::list_runs))
        .route("/jobs/{job}/runs/{slot}", get(reads::get_run))
        .route("/jobs/{job}/missed", get(reads::missed))
        .route("/jobs/{job}/retry", post(changes::retry))
        .route("/jobs/{job}/retry-failed", post(changes::retry_failed))
        .route("/jobs/{job}/cancel", post(changes::cancel))
        .route("/jobs/{job}/trigger", post(changes::trigger))
        .route("/jobs/{job}/backfill", post(changes::backfill))
        .route("/jobs/{job}/pause", post(changes::pause))
        .route("/jobs/{job}/resume", post(changes::resume))
        .route("/jobs/{job}/skip", post(schedules::skip))
        .route("/jobs/{job}/unskip", post(schedules::unskip))
        .route("/schedules", get(schedules::list).post(schedules::add))
        .route("/schedules/preview", post(schedules::preview))
        .route(
            "/schedules/{id}",
            get(schedules::get_one)
                .patch(schedules::change)
                .delete(schedules::remove),
        )
        .route("/schedules/{id}/missed", get(schedules::missed))
        .route("/schedules/{id}/history", get(schedules::history))
        .route("/missed", get(reads::missed_everywhere))
        .route("/audit", get(reads::audit))
        .route("/replicas", get(reads::replicas))
        .route(
            "/calendar-overrides",
            get(calendars::list).post(calendars::write),
        )
        .fallback(reads::not_found)
        .method_not_allowed_fallback(reads::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(admin)
}
