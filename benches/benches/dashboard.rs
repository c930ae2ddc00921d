//! The dashboard at scale: every page's server time with 1,000 jobs and 1,000,000 runs (one attempt
//! each) in PostgreSQL.
//!
//! ```text
//! cargo bench -p slotguard-benches --bench dashboard
//! ```
//!
//! The runs are written by SQL in a fresh schema (dropped afterwards): each job runs every 5 minutes
//! and has its newest 1,000 slots, 1 % failed, 1 % skipped, the rest succeeded, plus one running run
//! per ten jobs. Each page is asked for through the router (no network), `ROUNDS` times after one
//! warm-up; the figures are the median and the slowest. Override the server with
//! `SLOTGUARD_TEST_DATABASE_URL`; `SLOTGUARD_BENCH_KEEP=1` keeps the schema (named on the last line).

use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, DurationRound, Utc};
use http_body_util::BodyExt;
use slotguard::Schedule;
use slotguard::store::{AdminStore, JobDefinition};
use slotguard_admin::Admin;
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::http::Actor;
use slotguard_postgres::PgBackend;
use slotguard_tests::pg::{TestSchema, database_url};
use sqlx::AssertSqlSafe;
use tower::ServiceExt;

const JOBS: usize = 1_000;
const RUNS_PER_JOB: usize = 1_000;
const ROUNDS: usize = 15;
const BUDGET: Duration = Duration::from_millis(200);

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(bench());
}

async fn bench() {
    let schema = TestSchema::with_prefix("sg_dash");
    let backend = PgBackend::builder(&database_url())
        .schema(schema.name.clone())
        .connect()
        .await
        .expect("PostgreSQL");
    let now = Utc::now()
        .duration_trunc(chrono::Duration::minutes(5))
        .expect("now");
    let started = Instant::now();
    fill(&backend, &schema.name, now).await;
    println!(
        "filled {JOBS} jobs and {} runs in {:.1} s",
        JOBS * RUNS_PER_JOB,
        started.elapsed().as_secs_f64()
    );
    probe(&backend, now).await;
    let app = Router::new()
        .nest("/ui", Dashboard::new(Admin::new(backend.clone())).router())
        .layer(axum::Extension(Actor("bench".into())));
    let slot =
        (now - chrono::Duration::minutes(5)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let pages = [
        ("jobs", "/ui".to_owned()),
        (
            "jobs, searched and filtered",
            "/ui?q=05&guard=slot&state=active".to_owned(),
        ),
        ("job", "/ui/jobs/job-0500".to_owned()),
        (
            "job, failed only",
            "/ui/jobs/job-0500?status=failed".to_owned(),
        ),
        ("run", format!("/ui/jobs/job-0500/runs/{slot}")),
        ("failures", "/ui/failures".to_owned()),
        ("missed slots (default: last hour)", "/ui/missed".to_owned()),
        (
            "missed slots (24 h)",
            format!(
                "/ui/missed?from={}",
                (now - chrono::Duration::days(1)).format("%Y-%m-%dT%H:%M")
            ),
        ),
        (
            "missed slots (24 h, all missed)",
            format!(
                "/ui/missed?from={}&to={}",
                (now - chrono::Duration::days(5)).format("%Y-%m-%dT%H:%M"),
                (now - chrono::Duration::days(4)).format("%Y-%m-%dT%H:%M")
            ),
        ),
        ("audit", "/ui/audit".to_owned()),
        ("replicas", "/ui/replicas".to_owned()),
    ];
    println!("right after the load (ANALYZE only):");
    time_pages(&app, &pages).await;
    // What autovacuum leaves behind in a table that has settled: pages marked all-visible, so an
    // index-only scan reads no table rows.
    for table in ["job_runs", "job_run_attempts"] {
        let vacuum = format!(r#"VACUUM (ANALYZE) "{}".{table}"#, schema.name);
        sqlx::query(AssertSqlSafe(vacuum))
            .execute(backend.pool())
            .await
            .expect("vacuum");
    }
    println!("after VACUUM:");
    time_pages(&app, &pages).await;
    backend.pool().close().await;
    if std::env::var_os("SLOTGUARD_BENCH_KEEP").is_some() {
        println!("kept schema {}", schema.name);
        std::mem::forget(schema);
    }
}

/// Times every page and prints a table row for each.
async fn time_pages(app: &Router, pages: &[(&str, String)]) {
    println!(
        "| page | median | slowest | size | within {} ms |",
        BUDGET.as_millis()
    );
    println!("| --- | --- | --- | --- | --- |");
    for (name, uri) in pages {
        let (median, slowest, size) = time_page(app, uri).await;
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {} kB | {} |",
            median.as_secs_f64() * 1e3,
            slowest.as_secs_f64() * 1e3,
            size / 1000,
            if slowest < BUDGET { "yes" } else { "no" }
        );
    }
}

/// The median and slowest time of `ROUNDS` requests for `uri`, after one warm-up, and the page's
/// size in bytes.
async fn time_page(app: &Router, uri: &str) -> (Duration, Duration, usize) {
    let mut times = Vec::with_capacity(ROUNDS);
    let mut size = 0;
    for round in 0..=ROUNDS {
        let started = Instant::now();
        let response = app
            .clone()
            .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
            .await
            .expect("an answer");
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let took = started.elapsed();
        assert_eq!(
            status,
            StatusCode::OK,
            "{uri}: {}",
            String::from_utf8_lossy(&body)
        );
        if round > 0 {
            times.push(took);
        }
        size = body.len();
    }
    times.sort();
    (times[times.len() / 2], times[times.len() - 1], size)
}

async fn fill(backend: &PgBackend, schema: &str, now: DateTime<Utc>) {
    let fingerprint = Schedule::parse("*/5 * * * *", "UTC")
        .expect("schedule")
        .fingerprint();
    let jobs: Vec<JobDefinition> = (0..JOBS)
        .map(|i| JobDefinition {
            name: format!("job-{i:04}"),
            cron: "*/5 * * * *".into(),
            zone: "UTC".into(),
            dst: "vixie".into(),
            guard: "slot".into(),
            fingerprint,
            calendar: None,
        })
        .collect();
    backend.register_jobs(&jobs).await.expect("jobs");
    // Registered before the oldest run, as in an installation that has run for a while: missed
    // slots count from a job's first registration, so a job registered just now would have none to
    // look for.
    let registered =
        format!(r#"UPDATE "{schema}".jobs SET registered_at = now() - interval '30 days'"#);
    sqlx::query(sqlx::AssertSqlSafe(registered))
        .execute(backend.pool())
        .await
        .expect("registered a month ago");
    let runs = format!(
        r#"
INSERT INTO "{schema}".job_runs (job_name, scheduled_at, status, attempt, owner, fencing_token,
    stale_after, started_at, finished_at, error_class, error_message, zone, wall_time,
    business_date, "trigger", schedule_fingerprint)
SELECT 'job-' || lpad(j::text, 4, '0'), at, st, 1, 'replica-' || (k % 3), j::bigint * 100000 + k,
       interval '30 seconds', at, CASE WHEN st = 'running' THEN NULL ELSE at + interval '2 seconds' END,
       CASE WHEN st = 'failed' THEN 'transient' END,
       CASE WHEN st = 'failed' THEN 'upstream said 503' WHEN st = 'skipped' THEN 'paused' END,
       'UTC', at AT TIME ZONE 'UTC', (at AT TIME ZONE 'UTC')::date, 'schedule', 0
FROM generate_series(0, {jobs} - 1) AS j,
     generate_series(1, {runs}) AS k,
     LATERAL (SELECT $1::timestamptz - k * interval '5 minutes' AS at,
                     CASE WHEN k = 1 AND j % 10 = 0 THEN 'running'
                          WHEN (j + k) % 100 = 0 THEN 'failed'
                          WHEN (j + k) % 100 = 1 THEN 'skipped'
                          ELSE 'succeeded' END AS st) AS s
"#,
        jobs = JOBS,
        runs = RUNS_PER_JOB,
    );
    sqlx::query(AssertSqlSafe(runs))
        .bind(now)
        .execute(backend.pool())
        .await
        .expect("runs");
    let attempts = format!(
        r#"
INSERT INTO "{schema}".job_run_attempts (run_id, attempt, owner, fencing_token, started_at,
    finished_at, status, message)
SELECT id, 1, owner, fencing_token, started_at, finished_at, status, error_message
FROM "{schema}".job_runs
"#
    );
    sqlx::query(AssertSqlSafe(attempts))
        .execute(backend.pool())
        .await
        .expect("attempts");
    sqlx::query(AssertSqlSafe(format!(r#"ANALYZE "{schema}".job_runs"#)))
        .execute(backend.pool())
        .await
        .expect("analyze");
    sqlx::query(AssertSqlSafe(format!(
        r#"ANALYZE "{schema}".job_run_attempts"#
    )))
    .execute(backend.pool())
    .await
    .expect("analyze");
}

/// The store calls the pages make, timed alone.
async fn probe(backend: &PgBackend, now: DateTime<Utc>) {
    use slotguard::store::{RunFilter, RunStatus};
    let jobs = backend.jobs().await.expect("jobs");
    let names: Vec<String> = jobs.iter().map(|j| j.definition.name.clone()).collect();
    let t = Instant::now();
    backend.latest_runs(&names).await.expect("latest");
    println!("probe: latest_runs {:?}", t.elapsed());
    for (status, limit) in [
        (RunStatus::Failed, 100),
        (RunStatus::Dead, 100),
        (RunStatus::Abandoned, 100),
        (RunStatus::Running, 1000),
    ] {
        let filter = RunFilter {
            status: Some(status),
            limit,
            ..RunFilter::default()
        };
        let t = Instant::now();
        let n = AdminStore::runs(backend, &filter)
            .await
            .expect("runs")
            .len();
        println!("probe: {status} runs ({n}) {:?}", t.elapsed());
    }
    let day = now - chrono::Duration::days(1);
    let t = Instant::now();
    let times = backend
        .slot_times_of(&names, day, now)
        .await
        .expect("times");
    let n: usize = times.iter().map(Vec::len).sum();
    println!("probe: slot_times_of, 24 h ({n} slots) {:?}", t.elapsed());
    let t = Instant::now();
    let query = slotguard_admin::MissedQuery {
        job: None,
        from: day,
        to: now,
        after: None,
        limit: slotguard_admin::MAX_PAGE,
    };
    let missed = Admin::new(backend.clone()).missed_page(query).await;
    println!(
        "probe: missed_page, 24 h ({} jobs in the first page) {:?}",
        missed.expect("missed").jobs.len(),
        t.elapsed()
    );
}
