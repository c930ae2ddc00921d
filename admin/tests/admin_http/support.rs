//! What every route group's tests share: two jobs registered a year ago, runs in each status, and
//! requests through the router.

pub(crate) use std::sync::Arc;
pub(crate) use std::time::Duration;

pub(crate) use axum::Router;
pub(crate) use axum::body::Body;
pub(crate) use axum::http::{HeaderMap, Request, StatusCode, header};
pub(crate) use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
pub(crate) use http_body_util::BodyExt;
pub(crate) use serde_json::{Value, json};
pub(crate) use slotguard::store::{
    AdminStore, Claim, ClaimRequest, Finish, JobDefinition, Lease, ReplicaInfo, ReplicaStore,
    SlotKey, SlotStore, Trigger,
};
pub(crate) use slotguard::{ErrorClass, MemoryBackend, Overlap, Schedule};
pub(crate) use slotguard_admin::Admin;
pub(crate) use slotguard_admin::http::{Actor, MAX_BODY_BYTES, router};
pub(crate) use tower::ServiceExt;

use crate::registered::registered_a_year_ago;
use slotguard::store::SlotStoreExt as _;

pub(crate) const SETTLEMENT: &str = "daily-settlement";
pub(crate) const EVERY_SECOND: &str = "every-second";
/// 2026-03-08 02:00 in Seoul.
pub(crate) const SLOT: &str = "2026-03-07T17:00:00Z";

pub(crate) fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

pub(crate) fn definition(name: &str, cron: &str, zone: &str) -> JobDefinition {
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

/// A memory backend with two jobs registered a year ago, and the router over it mounted at
/// `/internal`.
pub(crate) async fn setup() -> (MemoryBackend, Router) {
    let backend = registered_a_year_ago(&[
        definition(SETTLEMENT, "0 2 * * *", "Asia/Seoul"),
        definition(EVERY_SECOND, "* * * * * *", "UTC"),
    ])
    .await;
    let app = Router::new().nest("/internal", router(Admin::new(backend.clone())));
    (backend, app)
}

pub(crate) fn claim_request(job: &str, slot: DateTime<Utc>, partition: &str) -> ClaimRequest {
    let wall = slot.with_timezone(&chrono_tz::Asia::Seoul).naive_local();
    ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: partition.to_owned(),
        },
        trigger: Trigger::Schedule,
        zone: "Asia/Seoul".to_owned(),
        wall,
        business_date: wall.date(),
        fingerprint: 7,
        stale_after: Duration::from_secs(30),
        overlap: Overlap::Allow,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    }
}

/// A `running` run of `slot`, held by `replica-a`.
pub(crate) async fn running(
    backend: &MemoryBackend,
    job: &str,
    slot: DateTime<Utc>,
    partition: &str,
) -> Lease {
    let claims = backend
        .claim("replica-a", &[claim_request(job, slot, partition)])
        .await
        .unwrap();
    match claims.as_slice() {
        [Claim::Won(lease)] => lease.clone(),
        other => panic!("claim not won: {other:?}"),
    }
}

/// A `failed` run of `slot` (one failed attempt, no retry planned).
pub(crate) async fn failed(
    backend: &MemoryBackend,
    job: &str,
    slot: DateTime<Utc>,
    partition: &str,
) {
    let lease = running(backend, job, slot, partition).await;
    let finish = Finish::failed(ErrorClass::Transient, "bank API timed out", None);
    assert!(
        backend
            .finish_one("replica-a", &lease, &finish)
            .await
            .unwrap()
    );
}

/// A `succeeded` run of `slot`.
pub(crate) async fn succeeded(backend: &MemoryBackend, job: &str, slot: DateTime<Utc>) {
    let lease = running(backend, job, slot, "").await;
    assert!(
        backend
            .finish_one("replica-a", &lease, &Finish::succeeded())
            .await
            .unwrap()
    );
}

pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) raw: String,
    pub(crate) body: Value,
}

impl Answer {
    pub(crate) fn error(&self) -> &str {
        self.body["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error kind in {}", self.raw))
    }

    pub(crate) fn message(&self) -> &str {
        self.body["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no message in {}", self.raw))
    }

    #[track_caller]
    pub(crate) fn expect(&self, status: StatusCode) -> &Self {
        assert_eq!(self.status, status, "answer: {}", self.raw);
        assert_eq!(
            self.headers[header::CONTENT_TYPE],
            "application/json",
            "answer: {}",
            self.raw
        );
        self
    }
}

pub(crate) async fn call(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let raw = String::from_utf8(bytes.to_vec()).unwrap();
    let body = serde_json::from_str(&raw).unwrap_or_else(|e| panic!("not JSON ({e}): {raw:?}"));
    Answer {
        status,
        headers,
        raw,
        body,
    }
}

pub(crate) async fn get(app: &Router, uri: &str) -> Answer {
    call(app, Request::get(uri).body(Body::empty()).unwrap()).await
}

pub(crate) async fn post_raw(app: &Router, uri: &str, body: impl Into<Body>) -> Answer {
    let request = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap();
    call(app, request).await
}

pub(crate) async fn post(app: &Router, uri: &str, body: Value) -> Answer {
    post_raw(app, uri, body.to_string()).await
}

/// Percent-encodes everything but unreserved characters, as a client puts a name in a path.
pub(crate) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub(crate) fn run_of(
    backend: &MemoryBackend,
    job: &str,
    slot: DateTime<Utc>,
) -> slotguard::store::RunRecord {
    backend
        .runs()
        .into_iter()
        .find(|r| r.key.job == job && r.key.scheduled_at == slot)
        .expect("run exists")
}

/// Midnight UTC `days` ago.
pub(crate) fn days_ago(days: i64) -> DateTime<Utc> {
    let today = Utc::now().date_naive();
    let day = today - chrono::Duration::days(days);
    Utc.with_ymd_and_hms(day.year(), day.month(), day.day(), 0, 0, 0)
        .unwrap()
}

/// Pauses the settlement job over HTTP.
pub(crate) async fn pause_settlement(app: &Router) {
    let reason = json!({"reason": "bank maintenance"});
    post(app, "/internal/jobs/daily-settlement/pause", reason)
        .await
        .expect(StatusCode::OK);
}
