//! An axum server that embeds the scheduler: its jobs run inside the web application, the admin API and
//! the web dashboard are mounted under `/internal` behind the application's own authentication (HTTP
//! basic auth here), and `/metrics` serves the scheduler's metrics to Prometheus.
//!
//! ```text
//! cargo run --example axum_server                                   # SQLite file in the temp dir
//! cargo run --example axum_server -- --addr 127.0.0.1:8080 --db ./slots.db
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example axum_server
//! OPERATORS='alice:change-me,bob:s3cret' cargo run --example axum_server
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 cargo run --example axum_server   # + traces
//! ```
//!
//! Then open <http://localhost:3000/internal/dashboard> (user `alice`, password `change-me`), or from
//! another terminal:
//!
//! ```text
//! curl localhost:3000/health
//! curl localhost:3000/internal/jobs                                 # 401: no operator
//! curl -u alice:change-me localhost:3000/internal/jobs
//! curl -u alice:change-me localhost:3000/internal/dashboard         # the dashboard's jobs page
//! curl -X POST localhost:3000/internal/jobs/daily-settlement/trigger \
//!   -u alice:change-me -H 'content-type: application/json' -d '{"reason": "try it now"}'
//! curl -u alice:change-me localhost:3000/internal/jobs/daily-settlement/runs
//! curl -u alice:change-me localhost:3000/internal/audit
//! curl -X POST localhost:3000/internal/schedules \
//!   -u alice:change-me -H 'content-type: application/json' \
//!   -d '{"id": "acme", "job": "daily-settlement", "cron": "*/10 * * * * *", "tz": "Asia/Seoul",
//!        "partition": "acme", "reason": "acme settles every 10 s"}'   # a schedule added at run time
//! curl -u alice:change-me 'localhost:3000/internal/jobs/daily-settlement/runs?partition=acme'
//! curl localhost:3000/metrics
//! ```
//!
//! SIGTERM or Ctrl-C shuts down gracefully: the scheduler stops claiming, waits for running jobs (the
//! grace period), hands the rest over to another replica, and the server keeps answering until then.
//!
//! The first line on stdout is `listening on http://ADDR`; logs go to stderr (`RUST_LOG` filters them).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use clap::Parser;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::SpanExporter;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use slotguard::{Job, JobContext, JobError, RetryPolicy, Scheduler};
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::http::{self, Actor};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Command line; every option can also come from the environment.
#[derive(Parser)]
#[command(about = "slotguard embedded in an axum server")]
struct Args {
    /// Address to listen on; port 0 picks a free one (the first line on stdout names it).
    #[arg(long, env = "ADDR", default_value = "127.0.0.1:3000")]
    addr: SocketAddr,
    /// SQLite file of the scheduler's store (default: slotguard-axum-example.db in the temp dir).
    #[arg(long, env = "SLOTGUARD_DB")]
    db: Option<PathBuf>,
    /// A `postgres://` URL switches the store to PostgreSQL; anything else is ignored.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The operators allowed in, as `name:password` pairs separated by commas (HTTP basic auth).
    #[arg(
        long,
        env = "OPERATORS",
        default_value = "alice:change-me",
        hide_env_values = true
    )]
    operators: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let traces = telemetry()?;
    let args = Args::parse();

    // The recorder must be installed before the scheduler records anything.
    // Durations as histograms (the exporter's default is a summary): buckets aggregate across
    // replicas, which the shipped alert rules need (deploy/prometheus, docs/metrics.md).
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("_seconds".to_owned()),
            &[
                0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0,
            ],
        )?
        .install_recorder()?;
    tokio::spawn(upkeep(prometheus.clone()));

    // Every replica of the application runs the same scheduler on the same store.
    let builder = Scheduler::builder()
        .jobs(jobs())
        .grace_period(Duration::from_secs(10))
        // Manual triggers and retries from /internal start within a second instead of ten.
        .recovery_interval(Duration::from_secs(1));
    let builder = match args.database_url.filter(|url| url.starts_with("postgres")) {
        Some(url) => builder.backend(slotguard_postgres::PgBackend::connect(&url).await?),
        None => {
            let path = args
                .db
                .unwrap_or_else(|| std::env::temp_dir().join("slotguard-axum-example.db"));
            builder.backend(slotguard_sqlite::SqliteBackend::open(path).await?)
        }
    };
    let scheduler = builder.build()?;
    // Taken before `try_start`, which consumes the scheduler.
    let admin = slotguard_admin::Admin::of(&scheduler).ok_or("the scheduler has no store")?;
    let handle = scheduler.try_start().await?;

    let operators = Operators::parse(&args.operators)?;
    // The JSON API at /internal, the dashboard at /internal/dashboard.
    let internal = http::router(admin.clone()).nest("/dashboard", Dashboard::new(admin).router());
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(move || metrics(prometheus.clone())))
        .nest(
            "/internal",
            // `layer`, not `route_layer`: unknown paths under /internal need an operator too.
            internal.layer(middleware::from_fn_with_state(operators, require_operator)),
        );

    // Listen for SIGTERM before announcing the address: a signal sent right after it is not lost.
    let signal = shutdown_signal()?;
    let listener = tokio::net::TcpListener::bind(args.addr).await?;
    println!("listening on http://{}", listener.local_addr()?);

    // On the signal the scheduler shuts down first (no new claims, running jobs finish or are handed
    // over) while the server still answers health checks and scrapes; then the server stops.
    axum::serve(listener, app)
        .with_graceful_shutdown(handle.clone().shutdown_on(signal))
        .await?;
    let report = handle.shutdown().await;
    println!(
        "stopped: {} run(s) in flight, finished in grace: {}, handed over: {}, took {:?}",
        report.in_flight, report.finished_in_grace, report.abandoned, report.took
    );
    if let Some(provider) = traces {
        // Sends the last batch; the exporter's HTTP client blocks, so not on a runtime thread.
        tokio::task::spawn_blocking(move || provider.shutdown()).await??;
    }
    Ok(())
}

/// Logs on stderr (stdout's first line is the address, for scripts and tests), filtered by
/// `RUST_LOG`, and, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, traces over OTLP/HTTP to it at
/// `info` whatever `RUST_LOG` says: one trace per run, the jobs' own spans inside
/// (docs/observability.md). The provider is returned to be shut down last.
fn telemetry() -> Result<Option<SdkTracerProvider>, Box<dyn std::error::Error>> {
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // Colours only on a terminal: redirected logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        );
    let provider = match std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT") {
        // The exporter reads the endpoint (and OTEL_EXPORTER_OTLP_HEADERS, ...) itself.
        Some(_) => Some(
            SdkTracerProvider::builder()
                .with_resource(
                    Resource::builder()
                        .with_service_name("slotguard-axum-example")
                        .build(),
                )
                .with_batch_exporter(SpanExporter::builder().with_http().build()?)
                .build(),
        ),
        None => None,
    };
    let traces = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("slotguard"))
            .with_filter(LevelFilter::INFO)
    });
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
    Ok(provider)
}

/// The demo jobs.
fn jobs() -> Vec<Job> {
    vec![
        // The seed article's job: every night at 02:00 in Seoul, at the `slot` level (the default with
        // a store), retried with the article's backoff, and overdue if not settled by 04:00. Trigger it
        // from /internal to see it run now.
        Job::new("daily-settlement", "0 2 * * *", settle)
            .tz("Asia/Seoul")
            .retry(RetryPolicy::exponential(
                5,
                Duration::from_secs(30),
                Duration::from_secs(3600),
            ))
            .deadline(Duration::from_secs(2 * 3600)),
        // Every second, so that /metrics and /internal have something to show at once.
        Job::new(
            "refresh-rates",
            "* * * * * *",
            |ctx: JobContext| async move {
                tracing::debug!(slot = %ctx.scheduled_at(), "rates refreshed");
            },
        ),
    ]
}

/// A settlement: the idempotency key and the fencing token go with every side effect (see
/// `examples/settlement.rs` for what the receiving database does with them).
async fn settle(ctx: JobContext) -> Result<(), JobError> {
    tracing::info!(
        business_date = %ctx.business_date(),
        key = ctx.idempotency_key(),
        token = ctx.fencing_token().unwrap_or_default(),
        attempt = ctx.attempt(),
        "settling"
    );
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(500)) => Ok(()),
        () = ctx.cancelled() => Err(JobError::from("stopped before the bank answered")),
    }
}

/// The operators allowed in: `name:password` pairs.
#[derive(Clone)]
struct Operators(std::sync::Arc<Vec<(String, String)>>);

impl Operators {
    fn parse(list: &str) -> Result<Self, String> {
        let pairs = list
            .split(',')
            .map(|pair| match pair.trim().split_once(':') {
                Some((name, password)) if !name.is_empty() && !password.is_empty() => {
                    Ok((name.to_owned(), password.to_owned()))
                }
                _ => Err("OPERATORS: expected name:password pairs separated by commas".to_owned()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Operators(std::sync::Arc::new(pairs)))
    }

    /// The operator an `Authorization: Basic …` header names, if its password is right.
    fn check(&self, header: &str) -> Option<String> {
        let encoded = header.strip_prefix("Basic ")?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()?;
        let (name, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
        self.0
            .iter()
            .find(|(n, p)| n == name && p == password)
            .map(|(n, _)| n.clone())
    }
}

/// The application's authentication: HTTP basic auth against the `OPERATORS` list. The admin router
/// and the dashboard authenticate no one: anyone who reaches them can retry, cancel, trigger, backfill
/// and pause jobs. This layer lets operators in, and records the operator as the actor of every change
/// (the body's `actor` is then ignored). A real application may check a session, a bearer token or a
/// client certificate here instead; serve basic auth over TLS only.
async fn require_operator(
    axum::extract::State(operators): axum::extract::State<Operators>,
    mut req: Request,
    next: Next,
) -> Response {
    let operator = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| operators.check(value));
    match operator {
        Some(operator) => {
            req.extensions_mut().insert(Actor(operator));
            next.run(req).await
        }
        None => (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                "Basic realm=\"slotguard\", charset=\"UTF-8\"",
            )],
            axum::Json(serde_json::json!({
                "error": "unauthorized",
                "message": "the admin API needs an operator (HTTP basic auth)",
            })),
        )
            .into_response(),
    }
}

/// The Prometheus text format.
async fn metrics(prometheus: PrometheusHandle) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        prometheus.render(),
    )
}

/// The exporter's histograms are drained by upkeep; without a listener of its own, that is our job.
async fn upkeep(prometheus: PrometheusHandle) {
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        prometheus.run_upkeep();
    }
}

/// Completes on SIGTERM (what orchestrators send) or Ctrl-C.
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
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
