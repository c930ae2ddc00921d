//! The admin router over HTTP against a real PostgreSQL store: every operation, the concurrency
//! cases and bad input. Each test works in a schema of its own, dropped at the end.

use slotguard::store::{AdminStoreExt as _, SlotStoreExt as _};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use chrono::{DateTime, Utc};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use slotguard::store::{
    AdminStore, Claim, ClaimRequest, Finish, JobDefinition, Lease, SlotKey, SlotStore, Trigger,
};
use slotguard::{ErrorClass, Overlap, Schedule};
use slotguard_admin::Admin;
use slotguard_admin::http::router;
use slotguard_postgres::PgBackend;
use slotguard_tests::pg::{TestSchema, database_url};
use sqlx::Connection;
use tower::ServiceExt;

const SETTLEMENT: &str = "daily-settlement";
const TICK: &str = "tick";

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// A schema of this test's own (`sg_http_{tag}_<random>`), dropped when the value is dropped.
fn schema(tag: &str) -> TestSchema {
    TestSchema::with_prefix(&format!("sg_http_{tag}"))
}

fn definition(name: &str, cron: &str, zone: &str) -> JobDefinition {
    JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: zone.to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: Schedule::parse(cron, zone).unwrap().fingerprint(),
        calendar: None,
    }
}

fn request(job: &str, slot: DateTime<Utc>) -> ClaimRequest {
    let wall = slot.with_timezone(&chrono_tz::Asia::Seoul).naive_local();
    ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: String::new(),
        },
        trigger: Trigger::Schedule,
        zone: "Asia/Seoul".into(),
        wall,
        business_date: wall.date(),
        fingerprint: 1,
        stale_after: Duration::from_secs(60),
        overlap: Overlap::Allow,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    }
}

async fn claim(store: &PgBackend, job: &str, slot: DateTime<Utc>) -> Lease {
    let claims = store
        .claim("replica-a", &[request(job, slot)])
        .await
        .unwrap();
    match claims.into_iter().next() {
        Some(Claim::Won(lease)) => lease,
        other => panic!("{other:?}"),
    }
}

/// A store with two jobs first registered on 2025-12-01 (before the slots the test lists and
/// backfills): one failed and one running settlement slot.
async fn setup(schema: &TestSchema) -> (PgBackend, Router) {
    let store = PgBackend::builder(&database_url())
        .schema(schema.name.clone())
        .pool_size(10)
        .connect()
        .await
        .unwrap();
    store
        .register_jobs(&[
            definition(SETTLEMENT, "0 2 * * *", "Asia/Seoul"),
            definition(TICK, "* * * * * *", "UTC"),
        ])
        .await
        .unwrap();
    let backdate = format!("UPDATE \"{}\".jobs SET registered_at = $1", schema.name);
    let mut conn = sqlx::PgConnection::connect(&database_url()).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(backdate))
        .bind(at("2025-12-01T00:00:00Z"))
        .execute(&mut conn)
        .await
        .unwrap();
    let failed = claim(&store, SETTLEMENT, at("2026-03-07T17:00:00Z")).await;
    let finish = Finish::failed(ErrorClass::Transient, "bank API timed out", None);
    assert!(
        store
            .finish_one("replica-a", &failed, &finish)
            .await
            .unwrap()
    );
    claim(&store, SETTLEMENT, at("2026-03-08T17:00:00Z")).await;
    let app = Router::new().nest("/internal", router(Admin::new(store.clone())));
    (store, app)
}

async fn call(app: &Router, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    let (status, value, _) = call_raw(app, method, uri, body).await;
    (status, value)
}

/// The status, the body as JSON, and the body as sent.
async fn call_raw(
    app: &Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value, String) {
    let mut builder = Request::builder().method(method).uri(uri);
    let body = match body {
        Some(v) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Body::from(v.to_string())
        }
        None => Body::empty(),
    };
    let response = app
        .clone()
        .oneshot(builder.body(body).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_seed_retry_call_works_as_written_and_eight_concurrent_retries_make_one_attempt() {
    let schema = schema("retry");
    let (store, app) = setup(&schema).await;
    let body = json!({"scheduleSlot": "2026-03-07T17:00:00Z", "reason": "bank API was down"});
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (app, body) = (app.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            call(
                &app,
                "POST",
                "/internal/jobs/daily-settlement/retry",
                Some(body),
            )
            .await
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        let (status, value) = t.await.unwrap();
        if status == StatusCode::CONFLICT {
            assert!(
                value["message"].as_str().unwrap().contains("pending"),
                "{value}"
            );
        }
        statuses.push(status);
    }
    statuses.sort();
    assert_eq!(
        statuses.iter().filter(|s| **s == StatusCode::OK).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CONFLICT)
            .count(),
        7
    );
    // The replica running the job takes exactly one new attempt.
    let due = store
        .claim_due(
            "replica-b",
            &[slotguard::store::DueSpec {
                job: SETTLEMENT.into(),
                max_attempts: 3,
                overlap: slotguard::Overlap::Allow,
                limit: None,
                cluster_limit: None,
                ahead: std::time::Duration::ZERO,
            }],
            10,
        )
        .await
        .unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].lease.attempt, 2);
    let (status, audit) = call(&app, "GET", "/internal/audit?job=daily-settlement", None).await;
    assert_eq!(status, StatusCode::OK);
    let entries = audit["audit"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{audit}");
    assert_eq!(entries[0]["actor"], "http");
    assert_eq!(entries[0]["reason"], "bank API was down");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_answers_over_http_on_postgres() {
    let schema = schema("ops");
    let (_store, app) = setup(&schema).await;

    let (status, jobs) = call(&app, "GET", "/internal/jobs", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 2, "{jobs}");

    let (status, runs) = call(
        &app,
        "GET",
        "/internal/jobs/daily-settlement/runs?status=failed",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");

    // Retry of a running run: refused, with the reason.
    let running = json!({"scheduleSlot": "2026-03-08T17:00:00Z", "reason": "again"});
    let (status, err) = call(
        &app,
        "POST",
        "/internal/jobs/daily-settlement/retry",
        Some(running.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        err["message"].as_str().unwrap().contains("running"),
        "{err}"
    );

    // Cancel it instead.
    let (status, run) = call(
        &app,
        "POST",
        "/internal/jobs/daily-settlement/cancel",
        Some(running),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["status"], "failed");

    // Missed slots of the settlement over three days: the two with rows are not missed.
    let (status, missed) = call(
        &app,
        "GET",
        "/internal/jobs/daily-settlement/missed?from=2026-03-06T00:00:00Z&to=2026-03-09T00:00:00Z",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(missed["missed"].as_array().unwrap().len(), 1, "{missed}");

    // Backfill: dry run, then for real.
    let range =
        json!({"from": "2026-03-06T00:00:00Z", "to": "2026-03-09T00:00:00Z", "reason": "gap"});
    let (status, plan) = call(
        &app,
        "POST",
        "/internal/jobs/daily-settlement/backfill",
        Some(range),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{plan}");
    assert_eq!(
        (plan["dryRun"].as_bool(), plan["created"].as_u64()),
        (Some(true), Some(0))
    );
    let range = json!({"from": "2026-03-06T00:00:00Z", "to": "2026-03-09T00:00:00Z", "reason": "gap", "dryRun": false});
    let (status, done) = call(
        &app,
        "POST",
        "/internal/jobs/daily-settlement/backfill",
        Some(range),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["created"], 1);

    // A million per-second slots: refused, nothing created.
    let huge = json!({"from": "2026-01-01T00:00:00Z", "to": "2026-01-13T00:00:00Z", "reason": "x", "dryRun": false});
    let (status, err) = call(&app, "POST", "/internal/jobs/tick/backfill", Some(huge)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let (_, runs) = call(&app, "GET", "/internal/jobs/tick/runs", None).await;
    assert!(runs["runs"].as_array().unwrap().is_empty());

    // Trigger, pause, resume.
    let why = json!({"reason": "by hand", "actor": "ops"});
    let (status, t) = call(
        &app,
        "POST",
        "/internal/jobs/tick/trigger",
        Some(why.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{t}");
    let (status, job) = call(&app, "POST", "/internal/jobs/tick/pause", Some(why.clone())).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(job["paused"], true, "{job}");
    let (_, jobs) = call(&app, "GET", "/internal/jobs", None).await;
    assert!(
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["name"] == "tick" && j["paused"] == true)
    );
    let (status, job) = call(&app, "POST", "/internal/jobs/tick/resume", Some(why)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(job["paused"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_error_and_changes_nothing() {
    let schema = schema("bad");
    let (store, app) = setup(&schema).await;
    for name in [
        "x'%3B%20DROP%20TABLE%20jobs%3B%20--",
        "%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "nope",
    ] {
        let body = json!({"scheduleSlot": "2026-03-07T17:00:00Z", "reason": "r"});
        let (status, err, raw) = call_raw(
            &app,
            "POST",
            &format!("/internal/jobs/{name}/retry"),
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name}: {err}");
        assert_eq!(err["error"], "unknown_job");
        assert!(!raw.contains('<'), "markup is escaped on the wire: {raw}");
    }
    let unknown_slot = json!({"scheduleSlot": "2020-01-01T00:00:00Z", "reason": "r"});
    let (status, err) = call(
        &app,
        "POST",
        "/internal/jobs/daily-settlement/retry",
        Some(unknown_slot),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(err["error"], "unknown_run");
    let bad_date = json!({"scheduleSlot": "yesterday at two", "reason": "r"});
    let (status, err) = call(
        &app,
        "POST",
        "/internal/jobs/daily-settlement/retry",
        Some(bad_date),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let huge = json!({"scheduleSlot": "2026-03-07T17:00:00Z", "reason": "x".repeat(1 << 20)});
    let (status, _) = call(
        &app,
        "POST",
        "/internal/jobs/daily-settlement/retry",
        Some(huge),
    )
    .await;
    assert!(
        status == StatusCode::PAYLOAD_TOO_LARGE || status == StatusCode::BAD_REQUEST,
        "{status}"
    );
    assert!(
        store.audit_log(None, 10).await.unwrap().is_empty(),
        "nothing was changed"
    );
    let failed = AdminStore::runs(
        &store,
        &slotguard::store::RunFilter {
            job: Some(SETTLEMENT.into()),
            status: Some(slotguard::store::RunStatus::Failed),
            limit: 10,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(failed.len(), 1, "the failed run is untouched");
}
