//! The admin API's memory per request: the process's peak resident memory while the HTTP router
//! answers the largest missed-slots, runs and audit requests over 1,000 jobs in SQLite.
//!
//! ```text
//! cargo bench -p slotguard-benches --bench admin_memory
//! ```
//!
//! 1,000 jobs run every second, first registered 27 hours ago (as in issue 21's report, where one
//! `GET /missed` over 27 hours took the process past 1 GB): 97 million slots, none with a row but
//! the 100 runs each job gets by backfill (100,000 runs and as many audit records). One more job,
//! `dense`, has a run for each of its first 100,000 slots, so that a page of it looks at the most
//! slots a page may (100,000, compared with the store's rows 10,000 at a time) and finds none
//! missed. Each request goes through the router (no network) with the largest page the API accepts
//! (`limit=1000`).
//! Before each, the kernel's high-water mark of the process's resident memory is reset
//! (`/proc/self/clear_refs`, Linux); after it, `VmHWM` is the peak reached while answering. The
//! figure is that peak's rise over the resident memory before the request.

use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, Duration, DurationRound, Utc};
use http_body_util::BodyExt;
use slotguard::Schedule;
use slotguard::store::{
    AdminStore, AuditEntry, ClaimRequest, Enqueue, JobDefinition, SlotKey, Trigger,
};
use slotguard_admin::Admin;
use slotguard_admin::http::router;
use slotguard_sqlite::SqliteBackend;
use tower::ServiceExt;

const JOBS: usize = 1_000;
const RUNS_PER_JOB: usize = 100;
/// The runs of `dense`, one a second: every slot of one page's scan.
const DENSE_RUNS: usize = 100_000;
const HOURS: i64 = 27;

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(bench());
}

async fn bench() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("admin-memory.db");
    let backend = SqliteBackend::open(&path).await.expect("SQLite");
    let now = Utc::now()
        .duration_trunc(Duration::seconds(1))
        .expect("now");
    let from = now - Duration::hours(HOURS);
    let started = Instant::now();
    fill(&backend, &path, from).await;
    println!(
        "filled {JOBS} jobs (every second, first registered {HOURS} h ago) and {} runs in {:.1} s",
        JOBS * RUNS_PER_JOB,
        started.elapsed().as_secs_f64()
    );
    let app = Router::new().nest("/internal", router(Admin::new(backend.clone())));
    let end = from + Duration::seconds(DENSE_RUNS as i64);
    let (from, end) = (
        from.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    );
    let requests = [
        format!("/internal/missed?from={from}&limit=1000"),
        format!("/internal/missed?from={from}&to={end}&limit=1000&cursor=dense:{from}"),
        format!("/internal/jobs/job-0500/missed?from={from}&limit=1000"),
        format!("/internal/jobs/dense/missed?from={from}&to={end}&limit=1000"),
        "/internal/jobs/dense/runs?limit=1000".to_owned(),
        "/internal/audit?limit=1000".to_owned(),
    ];
    println!("| request | answer | time | peak RSS | rise over the RSS before |");
    println!("| --- | --- | --- | --- | --- |");
    for uri in &requests {
        measure(&app, uri).await;
    }
}

/// Answers `uri` and prints its peak memory.
async fn measure(app: &Router, uri: &str) {
    let before = reset_peak();
    let started = Instant::now();
    let response = app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).expect("a request"))
        .await
        .expect("an answer");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("a body")
        .to_bytes();
    let elapsed = started.elapsed();
    let peak = kib("VmHWM:");
    assert_eq!(
        status,
        StatusCode::OK,
        "{uri}: {}",
        String::from_utf8_lossy(&body)
    );
    println!(
        "| `GET {}` | {} kB | {:.0} ms | {:.1} MB | {:.1} MB |",
        uri.trim_start_matches("/internal"),
        body.len() / 1_000,
        elapsed.as_secs_f64() * 1e3,
        peak as f64 / 1024.0,
        peak.saturating_sub(before) as f64 / 1024.0
    );
}

/// Resets the process's resident-memory high-water mark to its current size, and returns that.
fn reset_peak() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM (Linux only)");
    kib("VmRSS:")
}

/// A line of `/proc/self/status`, in KiB.
fn kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// Registers the jobs, sets their first registration back to `from`, and backfills 100 runs each.
async fn fill(backend: &SqliteBackend, path: &std::path::Path, from: DateTime<Utc>) {
    let fingerprint = Schedule::parse("* * * * * *", "UTC")
        .expect("a schedule")
        .fingerprint();
    let mut names: Vec<String> = (0..JOBS).map(|i| format!("job-{i:04}")).collect();
    names.push("dense".to_owned());
    let definitions: Vec<JobDefinition> = names
        .iter()
        .map(|name| JobDefinition {
            name: name.clone(),
            cron: "* * * * * *".to_owned(),
            zone: "UTC".to_owned(),
            dst: "vixie".to_owned(),
            guard: "slot".to_owned(),
            fingerprint,
            calendar: None,
        })
        .collect();
    backend.register_jobs(&definitions).await.expect("register");
    let url = format!("sqlite:{}", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.expect("connect");
    sqlx::query("UPDATE slotguard_jobs SET registered_at = ?1")
        .bind(from.timestamp_millis())
        .execute(&pool)
        .await
        .expect("set the first registration back");
    pool.close().await;
    let audit = AuditEntry {
        action: "backfill".to_owned(),
        actor: "bench".to_owned(),
        reason: "fill".to_owned(),
    };
    for name in &names[..JOBS] {
        let slots = (0..RUNS_PER_JOB).map(|i| from + Duration::minutes(i as i64));
        enqueue(backend, name, slots, fingerprint, &audit).await;
    }
    let dense: Vec<DateTime<Utc>> = (0..DENSE_RUNS)
        .map(|i| from + Duration::seconds(i as i64))
        .collect();
    for chunk in dense.chunks(1_000) {
        enqueue(backend, "dense", chunk.iter().copied(), fingerprint, &audit).await;
    }
}

/// Backfill runs of `name` at `slots`, in one call.
async fn enqueue(
    backend: &SqliteBackend,
    name: &str,
    slots: impl Iterator<Item = DateTime<Utc>>,
    fingerprint: u64,
    audit: &AuditEntry,
) {
    let runs: Vec<Enqueue> = slots
        .map(|at| Enqueue {
            request: ClaimRequest {
                key: SlotKey {
                    job: name.to_owned(),
                    scheduled_at: at,
                    partition: String::new(),
                },
                trigger: Trigger::Backfill,
                zone: "UTC".to_owned(),
                wall: at.naive_utc(),
                business_date: at.date_naive(),
                fingerprint,
                stale_after: std::time::Duration::from_secs(30),
                overlap: slotguard::Overlap::Allow,
                calendar: None,
                ahead: false,
                defer_if_contended: false,
            },
            not_before: at,
        })
        .collect();
    backend.enqueue(&runs, audit).await.expect("enqueue");
}
