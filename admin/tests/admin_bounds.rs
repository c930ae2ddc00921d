//! What an operator's request may not do, through the axum router on the memory backend: ask for an
//! unbounded listing, count or backfill slots from before the job existed, or reach before 1970.
#![cfg(feature = "http")]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, Utc};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use slotguard::store::{AdminStore, JobDefinition};
use slotguard::{MemoryBackend, Schedule, TokioClock};
use slotguard_admin::Admin;
use slotguard_admin::http::router;
use tower::ServiceExt;

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

/// `jobs` every-second jobs (`tick-000`, …) and a daily one, registered `ago` before now, behind
/// `/internal`.
async fn setup(jobs: usize, ago: chrono::Duration) -> (MemoryBackend, Router) {
    // The store's clock runs `ago` behind: it registers the jobs then, and the admin reads now.
    let clock = TokioClock::starting_at(Utc::now() - ago);
    let backend = MemoryBackend::with_clock(Arc::new(clock));
    let mut definitions: Vec<JobDefinition> = (0..jobs)
        .map(|i| definition(&format!("tick-{i:03}"), "* * * * * *", "UTC"))
        .collect();
    definitions.push(definition("daily-settlement", "0 2 * * *", "Asia/Seoul"));
    backend.register_jobs(&definitions).await.unwrap();
    let app = Router::new().nest("/internal", router(Admin::new(backend.clone())));
    (backend, app)
}

async fn call(app: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (status, body)
}

async fn get(app: &Router, uri: &str) -> (StatusCode, Value) {
    call(app, Request::get(uri).body(Body::empty()).unwrap()).await
}

async fn post(app: &Router, uri: &str, body: &Value) -> (StatusCode, Value) {
    let request = Request::post(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    call(app, request).await
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The instant the store first registered `job`, as `GET /jobs` answers it.
async fn registered_at(app: &Router, job: &str) -> DateTime<Utc> {
    let (status, body) = get(app, "/internal/jobs").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let found = body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == job)
        .unwrap_or_else(|| panic!("{job} not listed: {body}"));
    let text = found["registeredAt"]
        .as_str()
        .or_else(|| found["seenAt"].as_str())
        .unwrap_or_else(|| panic!("no registeredAt: {found}"));
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

/// Every slot the missed listing of every job answers, page by page.
fn slots_of(body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for job in body["jobs"].as_array().unwrap() {
        for slot in job["missed"].as_array().into_iter().flatten() {
            out.push((
                job["job"].as_str().unwrap().to_owned(),
                slot["scheduledAt"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

#[tokio::test]
async fn the_missed_listing_of_every_job_is_paged_by_limit_and_continued_by_its_cursor() {
    // Every job first seen an hour ago: 3,600 slots each are missed.
    let (_backend, app) = setup(3, chrono::Duration::hours(1)).await;
    let from = rfc3339(Utc::now() - chrono::Duration::minutes(30));
    let (status, first) = get(&app, &format!("/internal/missed?from={from}&limit=7")).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let page = slots_of(&first);
    assert_eq!(page.len(), 7, "one page of 7 slots: {first}");
    let cursor = first["next"].as_str().expect("a cursor to continue");
    let (status, second) = get(
        &app,
        &format!("/internal/missed?from={from}&limit=7&cursor={cursor}"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    let next = slots_of(&second);
    assert_eq!(next.len(), 7);
    assert!(
        next.iter().all(|s| !page.contains(s)),
        "the second page repeats nothing of the first: {page:?} {next:?}"
    );
    // One job's listing is paged by the same rule, and continued from `next`.
    let (status, one) = get(
        &app,
        &format!("/internal/jobs/tick-001/missed?from={from}&limit=5"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_eq!(one["missed"].as_array().unwrap().len(), 5, "{one}");
    assert!(one["next"].is_string(), "{one}");
    let (status, refused) = get(&app, &format!("/internal/missed?from={from}&limit=1001")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["field"], "limit");
}

#[tokio::test]
async fn missed_slots_start_when_the_job_was_first_registered() {
    let (_backend, app) = setup(1, chrono::Duration::zero()).await;
    let first_seen = registered_at(&app, "tick-000").await;
    let from = rfc3339(first_seen - chrono::Duration::hours(2));
    let (status, body) = get(&app, &format!("/internal/jobs/tick-000/missed?from={from}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for slot in body["missed"].as_array().unwrap() {
        let at = DateTime::parse_from_rfc3339(slot["scheduledAt"].as_str().unwrap()).unwrap();
        assert!(
            at >= first_seen - chrono::Duration::seconds(1),
            "slot {at} is before the job was first registered ({first_seen})"
        );
    }
    let (status, everywhere) = get(&app, &format!("/internal/missed?from={from}")).await;
    assert_eq!(status, StatusCode::OK, "{everywhere}");
    let before: Vec<_> = slots_of(&everywhere)
        .into_iter()
        .filter(|(_, at)| {
            DateTime::parse_from_rfc3339(at).unwrap() < first_seen - chrono::Duration::seconds(1)
        })
        .collect();
    assert!(before.is_empty(), "missed before registration: {before:?}");
}

#[tokio::test]
async fn a_backfill_before_1970_is_refused_naming_the_first_slot_accepted() {
    let (_backend, app) = setup(0, chrono::Duration::zero()).await;
    let body = json!({"from": "0000-01-01T00:00:00Z", "to": "0000-01-05T00:00:00Z",
        "perSecond": 1000, "dryRun": false, "reason": "x"});
    let (status, answer) = post(&app, "/internal/jobs/daily-settlement/backfill", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains("1970"), "{message}");
    // 02:00 in Seoul on 1970-01-01 is 1969-12-31T17:00Z, before the epoch: the first slot accepted
    // is the next day's.
    assert!(
        message.contains("1970-01-01T17:00:00Z"),
        "names the first slot accepted: {message}"
    );
}

#[tokio::test]
async fn a_backfill_before_the_job_was_first_registered_must_say_so() {
    let (_backend, app) = setup(0, chrono::Duration::zero()).await;
    let first_seen = registered_at(&app, "daily-settlement").await;
    let from = rfc3339(first_seen - chrono::Duration::days(5));
    let to = rfc3339(first_seen - chrono::Duration::days(1));
    let body = json!({"from": from, "to": to, "dryRun": false, "reason": "history"});
    let (status, answer) = post(&app, "/internal/jobs/daily-settlement/backfill", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("beforeFirstSeen"),
        "{answer}"
    );
    let body = json!({"from": from, "to": to, "dryRun": false, "reason": "history",
        "beforeFirstSeen": true});
    let (status, answer) = post(&app, "/internal/jobs/daily-settlement/backfill", &body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["created"], 4, "{answer}");
}

#[tokio::test]
async fn the_audit_trail_is_paged_by_limit_and_continued_by_its_next_id() {
    let (_backend, app) = setup(0, chrono::Duration::zero()).await;
    // A paused job cannot be paused again: pause, resume, pause.
    for (action, reason) in [("pause", "one"), ("resume", "two"), ("pause", "three")] {
        let body = json!({"reason": reason, "actor": "ops"});
        let path = format!("/internal/jobs/daily-settlement/{action}");
        let (status, answer) = post(&app, &path, &body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let (status, first) = get(&app, "/internal/audit?limit=2").await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let reasons = |page: &Value| -> Vec<String> {
        let records = page["audit"].as_array().unwrap();
        records
            .iter()
            .map(|r| r["reason"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(reasons(&first), ["three", "two"]);
    let next = first["next"].as_i64().expect("a full page has a next");
    let (status, second) = get(&app, &format!("/internal/audit?limit=2&before={next}")).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(reasons(&second), ["one"]);
    assert!(second["next"].is_null(), "{second}");
    let (status, refused) = get(&app, "/internal/audit?before=x").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["field"], "before");
}
