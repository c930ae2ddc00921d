//! An actix-web server that embeds the scheduler. The axum admin router cannot be mounted in actix, so
//! the admin routes here call [`slotguard_admin::Admin`] directly: every operation the router offers
//! is one call away (see `docs/operations.md`); this example writes three of them.
//!
//! ```text
//! cargo run --example actix_server                                  # SQLite file in the temp dir
//! cargo run --example actix_server -- --addr 127.0.0.1:8080 --db ./slots.db
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example actix_server
//! ```
//!
//! ```text
//! curl localhost:3000/health
//! curl -H 'x-operator: alice' localhost:3000/internal/jobs
//! curl -X POST localhost:3000/internal/jobs/daily-settlement/retry \
//!   -H 'x-operator: alice' -H 'content-type: application/json' \
//!   -d '{"scheduleSlot": "2026-03-08T17:00:00Z", "reason": "bank API was down"}'
//! curl -X POST localhost:3000/internal/jobs/daily-settlement/trigger \
//!   -H 'x-operator: alice' -H 'content-type: application/json' -d '{"reason": "try it now"}'
//! curl localhost:3000/metrics
//! ```
//!
//! Actix runs on its own runtime (`#[actix_web::main]`, tokio underneath): the scheduler's tasks run on
//! the main thread's runtime, the HTTP workers on theirs. On SIGTERM or Ctrl-C the scheduler shuts down
//! first while the server still answers, then the server stops.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::error::InternalError;
use actix_web::http::StatusCode;
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, HttpMessage, HttpResponse, HttpServer, web};
use chrono::{DateTime, Utc};
use clap::Parser;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde::Deserialize;
use serde_json::{Value, json};
use slotguard::store::RunRecord;
use slotguard::{Job, JobContext, JobError, Scheduler};
use slotguard_admin::{Admin, AdminError, ChangeRequest, JobStatus};

/// Command line; every option can also come from the environment.
#[derive(Parser)]
#[command(about = "slotguard embedded in an actix-web server")]
struct Args {
    /// Address to listen on; port 0 picks a free one (the first line on stdout names it).
    #[arg(long, env = "ADDR", default_value = "127.0.0.1:3000")]
    addr: SocketAddr,
    /// SQLite file of the scheduler's store (default: slotguard-actix-example.db in the temp dir).
    #[arg(long, env = "SLOTGUARD_DB")]
    db: Option<PathBuf>,
    /// A `postgres://` URL switches the store to PostgreSQL; anything else is ignored.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only on a terminal: redirected logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();

    let prometheus = PrometheusBuilder::new().install_recorder()?;
    actix_web::rt::spawn(upkeep(prometheus.clone()));

    let builder = Scheduler::builder()
        .jobs(jobs())
        .grace_period(Duration::from_secs(10))
        .recovery_interval(Duration::from_secs(1));
    let builder = match args.database_url.filter(|url| url.starts_with("postgres")) {
        Some(url) => builder.backend(slotguard_postgres::PgBackend::connect(&url).await?),
        None => {
            let path = args
                .db
                .unwrap_or_else(|| std::env::temp_dir().join("slotguard-actix-example.db"));
            builder.backend(slotguard_sqlite::SqliteBackend::open(path).await?)
        }
    };
    let scheduler = builder.build()?;
    let admin = slotguard_admin::Admin::of(&scheduler).ok_or("the scheduler has no store")?;
    let handle = scheduler.try_start().await?;

    let signal = shutdown_signal()?;
    let admin = web::Data::new(admin);
    let prometheus = web::Data::new(prometheus);
    let listener = std::net::TcpListener::bind(args.addr)?;
    let addr = listener.local_addr()?;
    let server = HttpServer::new(move || {
        App::new()
            .app_data(admin.clone())
            .app_data(prometheus.clone())
            .route("/health", web::get().to(|| async { "ok" }))
            .route("/metrics", web::get().to(metrics))
            .service(
                web::scope("/internal")
                    .wrap(from_fn(require_operator))
                    .app_data(json_config())
                    .route("/jobs", web::get().to(list_jobs))
                    .route("/jobs/{job}/retry", web::post().to(retry))
                    .route("/jobs/{job}/trigger", web::post().to(trigger)),
            )
    })
    .workers(2)
    // The signals are ours: the scheduler stops before the server does.
    .disable_signals()
    .shutdown_timeout(10)
    .listen(listener)?
    .run();
    println!("listening on http://{addr}");

    let server_handle = server.handle();
    let scheduler = handle.clone();
    actix_web::rt::spawn(async move {
        signal.await;
        scheduler.shutdown().await;
        server_handle.stop(true).await;
    });
    server.await?;
    let report = handle.shutdown().await;
    println!(
        "stopped: {} run(s) in flight, finished in grace: {}, handed over: {}, took {:?}",
        report.in_flight, report.finished_in_grace, report.abandoned, report.took
    );
    Ok(())
}

/// The same demo jobs as the axum example.
fn jobs() -> Vec<Job> {
    vec![
        Job::new("daily-settlement", "0 2 * * *", settle)
            .tz("Asia/Seoul")
            .deadline(Duration::from_secs(2 * 3600)),
        Job::new(
            "refresh-rates",
            "* * * * * *",
            |ctx: JobContext| async move {
                tracing::debug!(slot = %ctx.scheduled_at(), "rates refreshed");
            },
        ),
    ]
}

async fn settle(ctx: JobContext) -> Result<(), JobError> {
    tracing::info!(
        business_date = %ctx.business_date(),
        key = ctx.idempotency_key(),
        token = ctx.fencing_token().unwrap_or_default(),
        "settling"
    );
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(500)) => Ok(()),
        () = ctx.cancelled() => Err(JobError::from("stopped before the bank answered")),
    }
}

// ---------------------------------------------------------------------------------------------
// Authentication: a stand-in

/// The operator a request is authenticated as.
#[derive(Clone)]
struct Operator(String);

/// A stand-in for real authentication (a session, a bearer token, a client certificate): requires an
/// `x-operator` header and records it as the actor of every change.
async fn require_operator(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let operator = req
        .headers()
        .get("x-operator")
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned);
    match operator {
        Some(operator) => {
            req.extensions_mut().insert(Operator(operator));
            Ok(next.call(req).await?.map_into_left_body())
        }
        None => {
            let answer = error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the admin API needs an operator (header x-operator)".into(),
            );
            Ok(req.into_response(answer).map_into_right_body())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Admin routes: each is one call to `Admin`

async fn list_jobs(admin: web::Data<Admin>) -> HttpResponse {
    match admin.jobs().await {
        Ok(jobs) => HttpResponse::Ok().json(json!({
            "jobs": jobs.iter().map(job_json).collect::<Vec<_>>(),
        })),
        Err(e) => admin_error(e),
    }
}

/// The body of a retry, as in the seed article: `{"scheduleSlot": "...", "reason": "..."}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RetryBody {
    schedule_slot: String,
    reason: String,
    #[serde(default)]
    partition: String,
}

async fn retry(
    admin: web::Data<Admin>,
    job: web::Path<String>,
    operator: web::ReqData<Operator>,
    body: web::Json<RetryBody>,
) -> HttpResponse {
    let slot = match DateTime::parse_from_rfc3339(&body.schedule_slot) {
        Ok(slot) => slot.with_timezone(&Utc),
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid",
                format!("invalid scheduleSlot: {e} (an RFC 3339 instant)"),
            );
        }
    };
    let by = ChangeRequest::new(operator.0.clone(), body.reason.clone());
    match admin.retry(&job, slot, &body.partition, &by).await {
        Ok(retried) => HttpResponse::Ok().json(run_json(&retried.run)),
        Err(e) => admin_error(e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerBody {
    reason: String,
}

async fn trigger(
    admin: web::Data<Admin>,
    job: web::Path<String>,
    operator: web::ReqData<Operator>,
    body: web::Json<TriggerBody>,
) -> HttpResponse {
    let by = ChangeRequest::new(operator.0.clone(), body.reason.clone());
    match admin.trigger(&job, &by).await {
        Ok(triggered) => HttpResponse::Ok().json(json!({
            "runId": triggered.run_id,
            "scheduledAt": triggered.scheduled_at,
        })),
        Err(e) => admin_error(e),
    }
}

fn job_json(job: &JobStatus) -> Value {
    let def = &job.record.definition;
    json!({
        "name": def.name,
        "cron": def.cron,
        "zone": def.zone,
        "guard": def.guard,
        "paused": job.record.paused,
        "active": job.active(),
        "nextSlots": job.next_slots,
        "lastRun": job.last_run.as_ref().map(run_json),
    })
}

fn run_json(run: &RunRecord) -> Value {
    json!({
        "id": run.id,
        "job": run.key.job,
        "scheduledAt": run.key.scheduled_at,
        "partition": run.key.partition,
        "businessDate": run.business_date,
        "status": run.status.as_str(),
        "trigger": run.trigger.as_str(),
        "attempt": run.attempt,
        "owner": run.owner,
        "token": run.token,
        "startedAt": run.started_at,
        "finishedAt": run.finished_at,
        "errorMessage": run.error_message,
    })
}

/// The admin API's errors, with the statuses and kinds of the axum router.
fn admin_error(e: AdminError) -> HttpResponse {
    let message = e.to_string();
    let (status, kind) = match e {
        AdminError::UnknownJob { .. } => (StatusCode::NOT_FOUND, "unknown_job"),
        AdminError::UnknownRun { .. } => (StatusCode::NOT_FOUND, "unknown_run"),
        AdminError::UnknownSchedule { .. } => (StatusCode::NOT_FOUND, "unknown_schedule"),
        AdminError::Refused { .. } | AdminError::PauseState { .. } => {
            (StatusCode::CONFLICT, "refused")
        }
        AdminError::ScheduleExists { .. } => (StatusCode::CONFLICT, "exists"),
        AdminError::StaleVersion { .. } => (StatusCode::CONFLICT, "stale_version"),
        AdminError::Invalid { .. } => (StatusCode::BAD_REQUEST, "invalid"),
        AdminError::Store(_) => (StatusCode::SERVICE_UNAVAILABLE, "store"),
    };
    error(status, kind, message)
}

fn error(status: StatusCode, kind: &str, message: String) -> HttpResponse {
    HttpResponse::build(status).json(json!({ "error": kind, "message": message }))
}

/// Malformed JSON bodies answer in the same shape as every other error.
fn json_config() -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(64 * 1024)
        .error_handler(|err, _req| {
            let answer = error(StatusCode::BAD_REQUEST, "invalid", err.to_string());
            InternalError::from_response(err, answer).into()
        })
}

// ---------------------------------------------------------------------------------------------
// Metrics and signals

async fn metrics(prometheus: web::Data<PrometheusHandle>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(prometheus.render())
}

async fn upkeep(prometheus: PrometheusHandle) {
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        prometheus.run_upkeep();
    }
}

fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + 'static> {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutdown signal: the scheduler stops claiming, then the server stops");
    })
}
