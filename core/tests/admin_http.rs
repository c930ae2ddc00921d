//! The admin API over HTTP: every route, its errors, and hostile input, through the axum router.
#![cfg(feature = "axum")]

use slotguard::store::{AdminStoreExt as _, SlotStoreExt as _};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use chrono::{DateTime, Datelike, NaiveDate, TimeZone, Utc};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use slotguard::admin::Admin;
use slotguard::admin::http::{Actor, MAX_BODY_BYTES, router};
use slotguard::store::{
    AdminStore, Claim, ClaimRequest, Finish, JobDefinition, Lease, ReplicaInfo, ReplicaStore,
    SlotKey, SlotStore, Trigger,
};
use slotguard::{ErrorClass, MemoryBackend, Overlap, Schedule};
use tower::ServiceExt;

#[path = "support/registered.rs"]
mod registered;
use registered::registered_a_year_ago;

const SETTLEMENT: &str = "daily-settlement";
const EVERY_SECOND: &str = "every-second";
/// 2026-03-08 02:00 in Seoul.
const SLOT: &str = "2026-03-07T17:00:00Z";

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn definition(name: &str, cron: &str, zone: &str) -> JobDefinition {
    JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: zone.to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: Schedule::parse(cron, zone).unwrap().fingerprint(),
    }
}

/// A memory backend with two jobs registered a year ago, and the router over it mounted at
/// `/internal`.
async fn setup() -> (MemoryBackend, Router) {
    let backend = registered_a_year_ago(&[
        definition(SETTLEMENT, "0 2 * * *", "Asia/Seoul"),
        definition(EVERY_SECOND, "* * * * * *", "UTC"),
    ])
    .await;
    let app = Router::new().nest("/internal", router(Admin::new(backend.clone())));
    (backend, app)
}

fn claim_request(job: &str, slot: DateTime<Utc>, partition: &str) -> ClaimRequest {
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
    }
}

/// A `running` run of `slot`, held by `replica-a`.
async fn running(
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
        [Claim::Won(lease)] => *lease,
        other => panic!("claim not won: {other:?}"),
    }
}

/// A `failed` run of `slot` (one failed attempt, no retry planned).
async fn failed(backend: &MemoryBackend, job: &str, slot: DateTime<Utc>, partition: &str) {
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
async fn succeeded(backend: &MemoryBackend, job: &str, slot: DateTime<Utc>) {
    let lease = running(backend, job, slot, "").await;
    assert!(
        backend
            .finish_one("replica-a", &lease, &Finish::succeeded())
            .await
            .unwrap()
    );
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    raw: String,
    body: Value,
}

impl Answer {
    fn error(&self) -> &str {
        self.body["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error kind in {}", self.raw))
    }

    fn message(&self) -> &str {
        self.body["message"]
            .as_str()
            .unwrap_or_else(|| panic!("no message in {}", self.raw))
    }

    #[track_caller]
    fn expect(&self, status: StatusCode) -> &Self {
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

async fn call(app: &Router, request: Request<Body>) -> Answer {
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

async fn get(app: &Router, uri: &str) -> Answer {
    call(app, Request::get(uri).body(Body::empty()).unwrap()).await
}

async fn post_raw(app: &Router, uri: &str, body: impl Into<Body>) -> Answer {
    let request = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
        .unwrap();
    call(app, request).await
}

async fn post(app: &Router, uri: &str, body: Value) -> Answer {
    post_raw(app, uri, body.to_string()).await
}

/// Percent-encodes everything but unreserved characters, as a client puts a name in a path.
fn encode(text: &str) -> String {
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

fn run_of(backend: &MemoryBackend, job: &str, slot: DateTime<Utc>) -> slotguard::store::RunRecord {
    backend
        .runs()
        .into_iter()
        .find(|r| r.key.job == job && r.key.scheduled_at == slot)
        .expect("run exists")
}

/// Midnight UTC `days` ago.
fn days_ago(days: i64) -> DateTime<Utc> {
    let today = Utc::now().date_naive();
    let day = today - chrono::Duration::days(days);
    Utc.with_ymd_and_hms(day.year(), day.month(), day.day(), 0, 0, 0)
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Routes

#[tokio::test]
async fn lists_jobs_with_schedule_next_slots_and_last_run() {
    let (backend, app) = setup().await;
    failed(&backend, SETTLEMENT, at(SLOT), "").await;

    let answer = get(&app, "/internal/jobs").await;
    answer.expect(StatusCode::OK);
    let jobs = answer.body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    let job = jobs.iter().find(|j| j["name"] == SETTLEMENT).unwrap();
    assert_eq!(job["cron"], "0 2 * * *");
    assert_eq!(job["zone"], "Asia/Seoul");
    assert_eq!(job["dst"], "vixie");
    assert_eq!(job["guard"], "slot");
    assert_eq!(job["paused"], false);
    assert_eq!(job["pausedBy"], Value::Null);
    assert_eq!(job["fingerprint"].as_str().unwrap().len(), 16);
    let next: Vec<DateTime<Utc>> = job["nextSlots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| at(s.as_str().unwrap()))
        .collect();
    assert_eq!(next.len(), 3);
    assert!(next[0] > Utc::now() - chrono::Duration::seconds(5));
    assert!(
        next.iter()
            .all(|s| s.format("%H:%M:%S").to_string() == "17:00:00")
    );
    let last = &job["lastRun"];
    assert_eq!(last["scheduledAt"], SLOT);
    assert_eq!(last["status"], "failed");
    assert_eq!(last["trigger"], "schedule");
    assert_eq!(last["attempt"], 1);
    assert_eq!(last["errorMessage"], "bank API timed out");

    let other = jobs.iter().find(|j| j["name"] == EVERY_SECOND).unwrap();
    assert_eq!(other["lastRun"], Value::Null);
}

/// `GET /replicas` lists every recorded process, alive or gone, and `GET /jobs` says which live
/// replicas run each job.
#[tokio::test]
async fn lists_replicas_and_which_run_each_job() {
    let (backend, app) = setup().await;
    let answer = get(&app, "/internal/replicas").await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body, json!({"replicas": []}));
    let jobs = get(&app, "/internal/jobs").await.body;
    assert!(
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["active"] == false && j["replicas"] == json!([]))
    );

    let replica = |id: &str, gone_after: Duration| ReplicaInfo {
        id: id.to_owned(),
        host: "web-1".to_owned(),
        pid: 17,
        version: "0.1.0".to_owned(),
        roles: vec!["all".to_owned()],
        jobs: vec![SETTLEMENT.to_owned()],
        runs_held: 2,
        gone_after,
    };
    backend
        .record_replica(&replica("web-1:17:ab12", Duration::from_secs(30)))
        .await
        .unwrap();
    backend
        .record_replica(&replica("web-2:9:cd34", Duration::ZERO))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;

    let answer = get(&app, "/internal/replicas").await;
    answer.expect(StatusCode::OK);
    let listed = answer.body["replicas"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    let live = &listed[0];
    assert_eq!(live["id"], "web-1:17:ab12");
    assert_eq!(live["host"], "web-1");
    assert_eq!(live["pid"], 17);
    assert_eq!(live["version"], "0.1.0");
    assert_eq!(live["roles"], json!(["all"]));
    assert_eq!(live["jobs"], json!([SETTLEMENT]));
    assert_eq!(live["runsHeld"], 2);
    assert_eq!(live["goneAfterMs"], 30_000);
    assert_eq!(live["alive"], true);
    assert!(at(live["heartbeatAt"].as_str().unwrap()) >= at(live["startedAt"].as_str().unwrap()));
    assert_eq!(
        listed[1]["alive"], false,
        "a zero threshold is gone at once"
    );

    let jobs = get(&app, "/internal/jobs").await.body;
    let jobs = jobs["jobs"].as_array().unwrap();
    let settlement = jobs.iter().find(|j| j["name"] == SETTLEMENT).unwrap();
    assert_eq!(settlement["active"], true);
    assert_eq!(settlement["replicas"], json!(["web-1:17:ab12"]));
    let other = jobs.iter().find(|j| j["name"] == EVERY_SECOND).unwrap();
    assert_eq!(other["active"], false);

    post(&app, "/internal/replicas", json!({}))
        .await
        .expect(StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn lists_runs_with_attempts_and_filters() {
    let (backend, app) = setup().await;
    let day = chrono::Duration::days(1);
    failed(&backend, SETTLEMENT, at(SLOT) - day, "").await;
    succeeded(&backend, SETTLEMENT, at(SLOT)).await;
    failed(&backend, SETTLEMENT, at(SLOT), "kr").await;
    running(&backend, SETTLEMENT, at(SLOT) + day, "").await;

    let answer = get(&app, "/internal/jobs/daily-settlement/runs").await;
    answer.expect(StatusCode::OK);
    let runs = answer.body["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    // Newest slot first.
    assert_eq!(runs[0]["status"], "running");
    assert_eq!(runs[0]["owner"], "replica-a");
    assert_eq!(runs[0]["job"], SETTLEMENT);
    assert_eq!(runs[0]["staleAfterMs"], 30_000);
    let attempts = runs[0]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[0]["status"], "running");
    assert_eq!(attempts[0]["owner"], "replica-a");

    let answer = get(&app, "/internal/jobs/daily-settlement/runs?status=failed").await;
    answer.expect(StatusCode::OK);
    let runs = answer.body["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r["status"] == "failed"));
    assert_eq!(runs[0]["attempts"][0]["status"], "failed");
    assert_eq!(runs[0]["attempts"][0]["message"], "bank API timed out");
    assert_eq!(runs[0]["errorClass"], "transient");

    let answer = get(&app, "/internal/jobs/daily-settlement/runs?partition=kr").await;
    answer.expect(StatusCode::OK);
    let runs = answer.body["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["partition"], "kr");

    // `+` written as `%2B`, and a bare `+` that the query string turned into a space.
    for from in ["2026-03-08T02:00:00%2B09:00", "2026-03-08T02:00:00+09:00"] {
        let uri = format!(
            "/internal/jobs/daily-settlement/runs?from={from}&to=2026-03-08T17:00:00Z&partition="
        );
        let answer = get(&app, &uri).await;
        answer.expect(StatusCode::OK);
        let runs = answer.body["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1, "{}", answer.raw);
        assert_eq!(runs[0]["status"], "succeeded");
        assert_eq!(runs[0]["wallTime"], "2026-03-08T02:00:00");
        assert_eq!(runs[0]["businessDate"], "2026-03-08");
    }

    let answer = get(&app, "/internal/jobs/daily-settlement/runs?limit=1").await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["runs"].as_array().unwrap().len(), 1);

    // Empty parameters are no filter.
    let answer = get(
        &app,
        "/internal/jobs/daily-settlement/runs?status=&from=&to=&limit=",
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["runs"].as_array().unwrap().len(), 4);

    let answer = get(&app, "/internal/jobs/daily-settlement/runs?status=exploded").await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "status");
    assert!(answer.message().contains("pending, running"));

    for limit in ["1001", "-1", "ten"] {
        let answer = get(
            &app,
            &format!("/internal/jobs/daily-settlement/runs?limit={limit}"),
        )
        .await;
        answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(answer.body["field"], "limit");
    }

    let answer = get(&app, "/internal/jobs/daily-settlement/runs?stauts=failed").await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert!(answer.message().contains("stauts"), "{}", answer.raw);
}

/// Issue 15, bug 5: one rule for page sizes on every listing, in HTTP as in the CLI and the Rust
/// API: 1 to 1,000, 50 when absent; `limit=0` and `limit=100000` are refused, never capped.
#[tokio::test]
async fn limits_follow_one_rule_on_every_listing() {
    let (_backend, app) = setup().await;
    let by = json!({"reason": "limits", "actor": "ops"});
    // Three audit records: a pause, a resume, a pause (a second pause in a row is refused).
    for action in ["pause", "resume", "pause"] {
        post(
            &app,
            &format!("/internal/jobs/daily-settlement/{action}"),
            by.clone(),
        )
        .await
        .expect(StatusCode::OK);
    }
    for path in ["/internal/jobs/daily-settlement/runs", "/internal/audit"] {
        for limit in [
            "0",
            "100000",
            "1001",
            "-1",
            "18446744073709551616",
            "ten",
            "1.5",
        ] {
            let answer = get(&app, &format!("{path}?limit={limit}")).await;
            answer.expect(StatusCode::BAD_REQUEST);
            assert_eq!(answer.body["field"], "limit", "{path} {limit}");
            assert!(
                answer.message().contains("1 to 1000"),
                "{path} {limit}: {}",
                answer.raw
            );
        }
        for limit in ["1", "1000", ""] {
            get(&app, &format!("{path}?limit={limit}"))
                .await
                .expect(StatusCode::OK);
        }
    }
    let audit = get(&app, "/internal/audit?limit=2").await;
    assert_eq!(audit.body["audit"].as_array().unwrap().len(), 2);
    let audit = get(&app, "/internal/audit").await;
    assert_eq!(audit.body["audit"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn the_rust_api_refuses_the_limits_http_refuses() {
    let (backend, _app) = setup().await;
    let admin = Admin::new(backend);
    let filter = |limit| slotguard::store::RunFilter {
        job: Some(SETTLEMENT.to_owned()),
        limit,
        ..slotguard::store::RunFilter::default()
    };
    for limit in [0, 1001, 100_000] {
        let err = admin.runs(filter(limit)).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("invalid limit: {limit} is out of range: expected 1 to 1000")
        );
        let err = admin.audit(None, limit).await.unwrap_err();
        assert!(matches!(
            err,
            slotguard::admin::AdminError::Invalid { field: "limit", .. }
        ));
    }
    assert_eq!(slotguard::store::RunFilter::default().limit, 50);
    admin.runs(filter(1)).await.unwrap();
    admin
        .runs(slotguard::store::RunFilter::default())
        .await
        .unwrap();
    admin.audit(None, 1000).await.unwrap();
}

#[tokio::test]
async fn reads_one_run_by_slot_in_any_offset_and_partition() {
    let (backend, app) = setup().await;
    failed(&backend, SETTLEMENT, at(SLOT), "").await;
    failed(&backend, SETTLEMENT, at(SLOT), "kr").await;

    for slot in [
        SLOT,
        "2026-03-08T02:00:00+09:00",
        "2026-03-08T02:00:00%2B09:00",
    ] {
        let answer = get(
            &app,
            &format!("/internal/jobs/daily-settlement/runs/{slot}"),
        )
        .await;
        answer.expect(StatusCode::OK);
        assert_eq!(answer.body["scheduledAt"], SLOT);
        assert_eq!(answer.body["partition"], "");
        assert_eq!(answer.body["status"], "failed");
        assert_eq!(answer.body["attempts"].as_array().unwrap().len(), 1);
    }
    let answer = get(
        &app,
        &format!("/internal/jobs/daily-settlement/runs/{SLOT}?partition=kr"),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["partition"], "kr");
}

#[tokio::test]
async fn lists_missed_slots() {
    let (backend, app) = setup().await;
    // Slots at 17:00 UTC of the 5 days before `to`; one of them ran.
    let from = days_ago(10);
    let to = days_ago(5);
    succeeded(
        &backend,
        SETTLEMENT,
        days_ago(8) + chrono::Duration::hours(17),
    )
    .await;

    let uri = format!(
        "/internal/jobs/daily-settlement/missed?from={}&to={}",
        from.to_rfc3339(),
        to.to_rfc3339()
    );
    let answer = get(&app, &uri).await;
    answer.expect(StatusCode::OK);
    let missed = answer.body["missed"].as_array().unwrap();
    assert_eq!(missed.len(), 4, "{}", answer.raw);
    assert_eq!(
        at(missed[0]["scheduledAt"].as_str().unwrap()),
        from + chrono::Duration::hours(17)
    );
    assert_eq!(
        missed[0]["wallTime"].as_str().unwrap().get(10..),
        Some("T02:00:00")
    );
    let business: NaiveDate = missed[0]["businessDate"].as_str().unwrap().parse().unwrap();
    assert_eq!(business, (from + chrono::Duration::days(1)).date_naive());

    // `to` defaults to now.
    let uri = format!(
        "/internal/jobs/daily-settlement/missed?from={}",
        encode(&days_ago(3).to_rfc3339())
    );
    let answer = get(&app, &uri).await;
    answer.expect(StatusCode::OK);
    let count = answer.body["missed"].as_array().unwrap().len();
    assert!((3..=4).contains(&count), "{}", answer.raw);

    let answer = get(&app, "/internal/jobs/daily-settlement/missed").await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "from");
    missed_slots_of_every_job(&app, from, to).await;
}

/// `/missed` answers every job, a page of 50 slots: the settlement's four slots, then the first 46
/// of the every-second job's 432,000, and a cursor to continue.
async fn missed_slots_of_every_job(app: &Router, from: DateTime<Utc>, to: DateTime<Utc>) {
    let uri = format!(
        "/internal/missed?from={}&to={}",
        encode(&from.to_rfc3339()),
        encode(&to.to_rfc3339())
    );
    let answer = get(app, &uri).await;
    answer.expect(StatusCode::OK);
    let jobs = answer.body["jobs"].as_array().unwrap();
    let part = |name: &str| {
        let found = jobs.iter().find(|j| j["job"] == name);
        found.unwrap_or_else(|| panic!("{name} in {}", answer.raw))
    };
    let settlement = part(SETTLEMENT);
    assert_eq!(settlement["missed"].as_array().unwrap().len(), 4);
    assert!(settlement.get("error").is_none(), "{}", answer.raw);
    let every_second = part(EVERY_SECOND);
    assert_eq!(every_second["missed"].as_array().unwrap().len(), 46);
    assert!(every_second.get("error").is_none(), "{}", answer.raw);
    let next = answer.body["next"].as_str().unwrap();
    let resume = from + chrono::Duration::seconds(46);
    assert_eq!(
        next,
        format!(
            "{EVERY_SECOND}:{}",
            resume.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    );
    let backwards = format!(
        "/internal/missed?from={}&to={}",
        encode(&to.to_rfc3339()),
        encode(&from.to_rfc3339())
    );
    let answer = get(app, &backwards).await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "range");
    get(app, "/internal/missed")
        .await
        .expect(StatusCode::BAD_REQUEST);
}

/// The seed's request, as the article wrote it.
#[tokio::test]
async fn retry_as_written_in_the_article() {
    let (backend, app) = setup().await;
    failed(&backend, SETTLEMENT, at(SLOT), "").await;

    let answer = post_raw(
        &app,
        "/internal/jobs/daily-settlement/retry",
        r#"{"scheduleSlot": "2026-03-08T02:00:00+09:00", "reason": "bank API was down at 02:00"}"#,
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["status"], "pending");
    assert_eq!(answer.body["scheduledAt"], SLOT);
    assert!(answer.body["nextAttemptAt"].is_string());

    let run = run_of(&backend, SETTLEMENT, at(SLOT));
    assert_eq!(run.status.as_str(), "pending");
    let audit = backend.audit_log(None, 10).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].entry.action, "retry");
    assert_eq!(audit[0].entry.actor, "http");
    assert_eq!(audit[0].entry.reason, "bank API was down at 02:00");
    assert_eq!(audit[0].run_id, Some(run.id));
    assert_eq!(audit[0].scheduled_at, Some(at(SLOT)));
}

#[tokio::test]
async fn retry_takes_slot_actor_partition_and_the_authenticated_actor() {
    let (backend, app) = setup().await;
    failed(&backend, SETTLEMENT, at(SLOT), "kr").await;
    failed(&backend, SETTLEMENT, at(SLOT), "jp").await;

    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/retry",
        json!({"slot": SLOT, "reason": "rerun kr", "actor": "ops@example.com", "partition": "kr"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["partition"], "kr");

    // The middleware's actor wins over the body's.
    let request = Request::post("/internal/jobs/daily-settlement/retry")
        .header(header::CONTENT_TYPE, "application/json")
        .extension(Actor("alice@example.com".into()))
        .body(Body::from(
            json!({"scheduleSlot": SLOT, "reason": "rerun jp", "actor": "mallory", "partition": "jp"})
                .to_string(),
        ))
        .unwrap();
    call(&app, request).await.expect(StatusCode::OK);

    let answer = get(&app, "/internal/audit?job=daily-settlement").await;
    answer.expect(StatusCode::OK);
    let audit = answer.body["audit"].as_array().unwrap();
    assert_eq!(audit.len(), 2);
    // Newest first.
    assert_eq!(audit[0]["actor"], "alice@example.com");
    assert_eq!(audit[0]["reason"], "rerun jp");
    assert_eq!(audit[1]["actor"], "ops@example.com");

    // Both names at once is ambiguous.
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/retry",
        json!({"slot": SLOT, "scheduleSlot": SLOT, "reason": "twice"}),
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    // So is a misspelt partition: it would retry the wrong run.
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/retry",
        json!({"slot": SLOT, "reason": "typo", "partiton": "kr"}),
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert!(answer.message().contains("partiton"), "{}", answer.raw);
}

#[tokio::test]
async fn cancels_a_running_run_and_refuses_a_finished_one() {
    let (backend, app) = setup().await;
    running(&backend, SETTLEMENT, at(SLOT), "").await;

    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/cancel",
        json!({"scheduleSlot": SLOT, "reason": "stuck on a lock", "actor": "ops"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["status"], "failed");
    assert_eq!(answer.body["errorClass"], "permanent");
    assert_eq!(answer.body["attempts"][0]["status"], "abandoned");

    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/cancel",
        json!({"scheduleSlot": SLOT, "reason": "again"}),
    )
    .await;
    answer.expect(StatusCode::CONFLICT);
    assert_eq!(answer.error(), "refused");
    assert_eq!(answer.body["runStatus"], "failed");
}

#[tokio::test]
async fn triggers_a_manual_run() {
    let (backend, app) = setup().await;
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/trigger",
        json!({"reason": "settle again after the fix"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    let run_id = answer.body["runId"].as_i64().unwrap();
    let slot = at(answer.body["scheduledAt"].as_str().unwrap());
    let run = run_of(&backend, SETTLEMENT, slot);
    assert_eq!(run.id, run_id);
    assert_eq!(run.trigger, Trigger::Manual);
    assert_eq!(run.status.as_str(), "pending");
    let audit = backend.audit_log(Some(SETTLEMENT), 10).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].entry.action, "trigger");
    assert_eq!(audit[0].entry.actor, "http");
}

/// Pauses the settlement job over HTTP.
async fn pause_settlement(app: &Router) {
    let reason = json!({"reason": "bank maintenance"});
    post(app, "/internal/jobs/daily-settlement/pause", reason)
        .await
        .expect(StatusCode::OK);
}

/// Issue 15, bug 10: a paused job's manual run waits for the resume, and the answer says so rather
/// than promising a start within one recovery poll.
#[tokio::test]
async fn triggering_a_paused_job_says_the_run_waits_for_the_resume() {
    let (_backend, app) = setup().await;
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/trigger",
        json!({"reason": "now"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["paused"], false, "{}", answer.raw);
    let message = answer.body["message"].as_str().unwrap();
    // No replica is recorded: the answer says so (issue 21) rather than promising a start.
    assert!(
        message.contains("no live replica runs the job"),
        "{message}"
    );
    assert_eq!(answer.body["replicas"], json!([]), "{}", answer.raw);

    pause_settlement(&app).await;
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/trigger",
        json!({"reason": "now"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["paused"], true, "{}", answer.raw);
    let message = answer.body["message"].as_str().unwrap();
    assert!(message.contains("runs after it is resumed"), "{message}");
    assert!(!message.contains("recovery poll"), "{message}");
}

/// The same for a retry: the answer is the run, plus whether its job is paused and what that means.
#[tokio::test]
async fn retrying_a_slot_of_a_paused_job_says_the_attempt_waits_for_the_resume() {
    let (backend, app) = setup().await;
    let slots = [at(SLOT), at(SLOT) - chrono::Duration::days(1)];
    for slot in slots {
        failed(&backend, SETTLEMENT, slot, "").await;
    }
    let retry = |slot: DateTime<Utc>| {
        let body = json!({"scheduleSlot": slot.to_rfc3339(), "reason": "bank is back"});
        post(&app, "/internal/jobs/daily-settlement/retry", body)
    };
    let answer = retry(slots[0]).await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["status"], "pending", "{}", answer.raw);
    assert_eq!(answer.body["jobPaused"], false, "{}", answer.raw);
    let message = answer.body["message"].as_str().unwrap();
    assert!(message.contains("within one recovery poll"), "{message}");

    pause_settlement(&app).await;
    let answer = retry(slots[1]).await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["status"], "pending", "{}", answer.raw);
    assert_eq!(answer.body["jobPaused"], true, "{}", answer.raw);
    let message = answer.body["message"].as_str().unwrap();
    assert!(
        message.contains("starts after the job is resumed"),
        "{message}"
    );
    assert!(!message.contains("recovery poll"), "{message}");
}

#[tokio::test]
async fn backfills_after_a_dry_run() {
    let (backend, app) = setup().await;
    let from = days_ago(10).to_rfc3339();
    let to = days_ago(5).to_rfc3339();

    // The default is a dry run.
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/backfill",
        json!({"from": from, "to": to, "reason": "outage week"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["dryRun"], true);
    assert_eq!(answer.body["created"], 0);
    assert_eq!(answer.body["slots"].as_array().unwrap().len(), 5);
    assert!(backend.runs().is_empty());
    assert!(backend.audit_log(None, 10).await.unwrap().is_empty());

    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/backfill",
        json!({"from": from, "to": to, "dryRun": false, "perSecond": 2.0, "reason": "outage week", "actor": "ops"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["dryRun"], false);
    assert_eq!(answer.body["created"], 5);
    assert_eq!(answer.body["existing"], 0);
    assert!(answer.body["lastDue"].is_string());
    let runs = backend.runs();
    assert_eq!(runs.len(), 5);
    assert!(runs.iter().all(|r| r.trigger == Trigger::Backfill));
    let audit = backend.audit_log(None, 10).await.unwrap();
    assert_eq!(audit.len(), 5);
    assert!(
        audit
            .iter()
            .all(|a| a.entry.action == "backfill" && a.entry.actor == "ops")
    );

    // Nothing is missing any more.
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/backfill",
        json!({"from": from, "to": to, "dryRun": false, "reason": "again"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["created"], 0);
    assert_eq!(answer.body["existing"], 5, "{}", answer.raw);
    assert_eq!(backend.runs().len(), 5);

    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/backfill",
        json!({"from": from, "to": to, "perSecond": 0.0, "reason": "zero"}),
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "perSecond");
}

#[tokio::test]
async fn refuses_a_backfill_of_a_million_slots() {
    let (backend, app) = setup().await;
    let to = Utc::now() - chrono::Duration::minutes(1);
    let from = to - chrono::Duration::seconds(1_000_000);
    for dry_run in [true, false] {
        let answer = post(
            &app,
            "/internal/jobs/every-second/backfill",
            json!({"from": from.to_rfc3339(), "to": to.to_rfc3339(), "dryRun": dry_run, "reason": "storm"}),
        )
        .await;
        answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(answer.error(), "invalid");
        assert_eq!(answer.body["field"], "range");
    }
    // A range small enough to scan but with more missing slots than one backfill creates.
    let answer = post(
        &app,
        "/internal/jobs/every-second/backfill",
        json!({"from": (to - chrono::Duration::seconds(5_000)).to_rfc3339(), "to": to.to_rfc3339(), "dryRun": false, "reason": "storm"}),
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert!(
        answer.message().contains("split the range"),
        "{}",
        answer.raw
    );
    assert!(backend.runs().is_empty());
    assert!(backend.audit_log(None, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_backfill_rate_out_of_bounds_is_400_and_creates_nothing() {
    let (backend, app) = setup().await;
    let (from, to) = (days_ago(10).to_rfc3339(), days_ago(5).to_rfc3339());
    // Tiny rates panicked (1e-300, 1e-12) or put the runs centuries ahead (1e-10).
    for rate in [1e-300, 1e-12, 1e-10, 0.000_999, 1_000.1, 1e300, -1.0] {
        let answer = post(
            &app,
            "/internal/jobs/daily-settlement/backfill",
            json!({"from": from, "to": to, "dryRun": false, "perSecond": rate, "reason": "slow"}),
        )
        .await;
        answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(answer.body["field"], "perSecond", "{rate}: {}", answer.raw);
        assert!(answer.message().contains("0.001 to 1000"), "{}", answer.raw);
    }
    assert!(backend.runs().is_empty());

    // The slowest rate accepted: the fifth run is due 4,000 s after the first.
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/backfill",
        json!({"from": from, "to": to, "dryRun": false, "perSecond": 0.001, "reason": "slow"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["created"], 5);
    let due: Vec<_> = backend
        .runs()
        .iter()
        .filter_map(|r| r.next_attempt_at)
        .collect();
    let (first, last) = (due.iter().min().unwrap(), due.iter().max().unwrap());
    assert_eq!(*last - *first, chrono::Duration::seconds(4_000));
}

#[tokio::test]
async fn pause_and_resume_show_in_the_job_list() {
    let (_backend, app) = setup().await;
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/pause",
        json!({"reason": "bank maintenance", "actor": "ops@example.com"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["paused"], true);

    let jobs = get(&app, "/internal/jobs").await;
    jobs.expect(StatusCode::OK);
    let job = jobs.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == SETTLEMENT)
        .unwrap()
        .clone();
    assert_eq!(job["paused"], true);
    assert_eq!(job["pausedBy"], "ops@example.com");
    assert_eq!(job["pausedReason"], "bank maintenance");
    assert!(job["pausedAt"].is_string());

    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/resume",
        json!({"reason": "maintenance over"}),
    )
    .await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["paused"], false);
    let jobs = get(&app, "/internal/jobs").await;
    let job = jobs.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == SETTLEMENT)
        .unwrap()
        .clone();
    // The pause stays on show as it was; the resume is in the audit trail.
    assert_eq!(job["paused"], false);
    assert_eq!(job["pausedBy"], "ops@example.com");
    assert_eq!(job["pausedReason"], "bank maintenance");

    let audit = get(&app, "/internal/audit?limit=1").await;
    audit.expect(StatusCode::OK);
    let records = audit.body["audit"].as_array().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["action"], "resume");
    assert_eq!(records[0]["job"], SETTLEMENT);
    assert_eq!(records[0]["runId"], Value::Null);
    let audit = get(&app, "/internal/audit").await;
    assert_eq!(audit.body["audit"].as_array().unwrap().len(), 2);
    let audit = get(&app, "/internal/audit?job=every-second").await;
    audit.expect(StatusCode::OK);
    assert!(audit.body["audit"].as_array().unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Refusals

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_eight_concurrent_retries_exactly_one_is_accepted() {
    let (backend, app) = setup().await;
    failed(&backend, SETTLEMENT, at(SLOT), "").await;

    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let app = app.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                post(
                    &app,
                    "/internal/jobs/daily-settlement/retry",
                    json!({"scheduleSlot": SLOT, "reason": format!("operator {i}")}),
                )
                .await
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for task in tasks {
        let answer = task.await.unwrap();
        if answer.status == StatusCode::CONFLICT {
            assert_eq!(answer.error(), "refused");
            assert_eq!(answer.body["runStatus"], "pending");
        }
        statuses.push(answer.status);
    }
    assert_eq!(statuses.iter().filter(|s| **s == StatusCode::OK).count(), 1);
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::CONFLICT)
            .count(),
        7
    );
    assert_eq!(backend.audit_log(None, 100).await.unwrap().len(), 1);
}

#[tokio::test]
async fn retry_of_a_running_run_is_refused_saying_it_is_running() {
    let (backend, app) = setup().await;
    running(&backend, SETTLEMENT, at(SLOT), "").await;
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/retry",
        json!({"scheduleSlot": SLOT, "reason": "impatient"}),
    )
    .await;
    answer.expect(StatusCode::CONFLICT);
    assert_eq!(answer.error(), "refused");
    assert_eq!(answer.body["runStatus"], "running");
    assert!(
        answer.message().contains("the run is running"),
        "{}",
        answer.raw
    );
    assert_eq!(
        run_of(&backend, SETTLEMENT, at(SLOT)).status.as_str(),
        "running"
    );
    assert!(backend.audit_log(None, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn unknown_jobs_and_slots_are_404() {
    let (_backend, app) = setup().await;
    let slot_body = json!({"scheduleSlot": SLOT, "reason": "r"});
    let reason_body = json!({"reason": "r"});
    for answer in [
        get(&app, "/internal/jobs/nightly/runs").await,
        get(&app, &format!("/internal/jobs/nightly/runs/{SLOT}")).await,
        get(&app, &format!("/internal/jobs/nightly/missed?from={SLOT}")).await,
        get(&app, "/internal/audit?job=nightly").await,
        post(&app, "/internal/jobs/nightly/retry", slot_body.clone()).await,
        post(&app, "/internal/jobs/nightly/cancel", slot_body.clone()).await,
        post(&app, "/internal/jobs/nightly/trigger", reason_body.clone()).await,
        post(&app, "/internal/jobs/nightly/pause", reason_body.clone()).await,
        post(&app, "/internal/jobs/nightly/resume", reason_body.clone()).await,
        post(
            &app,
            "/internal/jobs/nightly/backfill",
            json!({"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "reason": "r"}),
        )
        .await,
    ] {
        answer.expect(StatusCode::NOT_FOUND);
        assert_eq!(answer.error(), "unknown_job");
        assert!(answer.message().contains("`nightly`"), "{}", answer.raw);
    }

    for answer in [
        get(
            &app,
            &format!("/internal/jobs/daily-settlement/runs/{SLOT}"),
        )
        .await,
        post(
            &app,
            "/internal/jobs/daily-settlement/retry",
            slot_body.clone(),
        )
        .await,
        post(&app, "/internal/jobs/daily-settlement/cancel", slot_body).await,
    ] {
        answer.expect(StatusCode::NOT_FOUND);
        assert_eq!(answer.error(), "unknown_run");
        assert!(
            answer.message().contains("2026-03-07T17:00:00Z"),
            "{}",
            answer.raw
        );
    }

    let answer = get(&app, "/internal/nope").await;
    answer.expect(StatusCode::NOT_FOUND);
    assert_eq!(answer.error(), "not_found");
    let answer = get(&app, "/internal/jobs/daily-settlement/retry").await;
    answer.expect(StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(answer.error(), "method_not_allowed");
}

#[tokio::test]
async fn malformed_dates_are_400_json() {
    let (backend, app) = setup().await;
    failed(&backend, SETTLEMENT, at(SLOT), "").await;
    for slot in [
        "yesterday",
        "2026-03-08",
        "2026-03-08T02:00:00",
        "2026-13-08T02:00:00Z",
        "",
    ] {
        let answer = post(
            &app,
            "/internal/jobs/daily-settlement/retry",
            json!({"scheduleSlot": slot, "reason": "r"}),
        )
        .await;
        answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(answer.error(), "invalid");
        assert_eq!(answer.body["field"], "scheduleSlot");
        assert!(answer.message().contains("RFC 3339"), "{}", answer.raw);
    }
    let answer = get(&app, "/internal/jobs/daily-settlement/runs/not-a-date").await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "slot");
    let answer = get(&app, "/internal/jobs/daily-settlement/runs?from=soon").await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "from");
    let answer = get(
        &app,
        "/internal/jobs/daily-settlement/missed?from=2026-03-01T00:00:00Z&to=%3Cb%3E",
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "to");
    assert!(!answer.raw.contains('<'), "{}", answer.raw);
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/backfill",
        json!({"from": "2026-03-01", "to": SLOT, "reason": "r"}),
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "from");
    // Reversed ranges.
    let answer = get(
        &app,
        "/internal/jobs/daily-settlement/missed?from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z",
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "range");
    assert_eq!(
        run_of(&backend, SETTLEMENT, at(SLOT)).status.as_str(),
        "failed"
    );
    assert!(backend.audit_log(None, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn malformed_json_is_400_json() {
    let (backend, app) = setup().await;
    failed(&backend, SETTLEMENT, at(SLOT), "").await;
    for body in [
        "",
        "{",
        "not json",
        r#"{"scheduleSlot": "2026-03-07T17:00:00Z", "reason": }"#,
        r#"["2026-03-07T17:00:00Z", "reason"]"#,
        r#"{"scheduleSlot": "2026-03-07T17:00:00Z"}"#,
        r#"{"scheduleSlot": 17, "reason": "r"}"#,
        r#"{"scheduleSlot": "2026-03-07T17:00:00Z", "reason": null}"#,
    ] {
        let answer = post_raw(&app, "/internal/jobs/daily-settlement/retry", body).await;
        answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(answer.error(), "invalid", "{body}");
        assert!(!answer.message().is_empty());
    }
    // Empty and oversized text fields are the admin API's to refuse.
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/retry",
        json!({"scheduleSlot": SLOT, "reason": "  "}),
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "reason");
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/retry",
        json!({"scheduleSlot": SLOT, "reason": "r", "actor": "a".repeat(200)}),
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "actor");

    // A body that is not declared JSON.
    let request = Request::post("/internal/jobs/daily-settlement/retry")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from(
            json!({"scheduleSlot": SLOT, "reason": "r"}).to_string(),
        ))
        .unwrap();
    let answer = call(&app, request).await;
    answer.expect(StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(answer.error(), "unsupported_media_type");

    assert_eq!(
        run_of(&backend, SETTLEMENT, at(SLOT)).status.as_str(),
        "failed"
    );
    assert!(backend.audit_log(None, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_one_megabyte_reason_is_refused_and_changes_nothing() {
    let (backend, app) = setup().await;
    failed(&backend, SETTLEMENT, at(SLOT), "").await;
    let reason = "x".repeat(1024 * 1024);
    let body = json!({"scheduleSlot": SLOT, "reason": reason}).to_string();
    assert!(body.len() > MAX_BODY_BYTES);

    let answer = post_raw(&app, "/internal/jobs/daily-settlement/retry", body.clone()).await;
    assert!(
        answer.status == StatusCode::PAYLOAD_TOO_LARGE || answer.status == StatusCode::BAD_REQUEST,
        "{}",
        answer.raw
    );
    answer.expect(answer.status);
    assert!(answer.raw.len() < 1024, "the reason is not echoed");

    // Without a length header, streamed.
    let stream = futures::stream::iter(
        body.into_bytes()
            .chunks(8192)
            .map(|c| Ok::<_, std::io::Error>(c.to_vec()))
            .collect::<Vec<_>>(),
    );
    let request = Request::post("/internal/jobs/daily-settlement/pause")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap();
    let answer = call(&app, request).await;
    answer.expect(StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(answer.error(), "payload_too_large");

    // Under the body limit but over the reason limit.
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/retry",
        json!({"scheduleSlot": SLOT, "reason": "y".repeat(10_000)}),
    )
    .await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "reason");

    assert_eq!(
        run_of(&backend, SETTLEMENT, at(SLOT)).status.as_str(),
        "failed"
    );
    assert!(backend.audit_log(None, 10).await.unwrap().is_empty());
    let jobs = get(&app, "/internal/jobs").await;
    assert!(
        jobs.body["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["paused"] == false)
    );
}

#[tokio::test]
async fn hostile_job_names_are_unknown_and_escaped() {
    let (backend, app) = setup().await;
    for name in [
        "x'; DROP TABLE jobs; --",
        "<script>alert(1)</script>",
        "\"><img src=x onerror=alert(1)>",
        "line\nbreak\r\u{0}",
        "../../etc/passwd",
        "daily-settlement/../daily-settlement",
        &"A".repeat(10_000),
    ] {
        let path = encode(name);
        for answer in [
            get(&app, &format!("/internal/jobs/{path}/runs")).await,
            post(
                &app,
                &format!("/internal/jobs/{path}/pause"),
                json!({"reason": "r"}),
            )
            .await,
            get(&app, &format!("/internal/audit?job={path}")).await,
        ] {
            answer.expect(StatusCode::NOT_FOUND);
            assert_eq!(answer.error(), "unknown_job");
            assert_eq!(answer.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert!(
                !answer.raw.contains('<') && !answer.raw.contains('>'),
                "{}",
                answer.raw
            );
            let message = answer.message();
            assert!(message.starts_with("unknown job `"), "{message}");
            assert!(!message.chars().any(char::is_control), "{message:?}");
            assert!(message.len() < 300, "{message}");
        }
    }
    let answer = get(
        &app,
        &format!("/internal/jobs/{}/runs", encode("x'; DROP TABLE jobs; --")),
    )
    .await;
    assert!(
        answer.message().contains("DROP TABLE jobs"),
        "{}",
        answer.raw
    );
    let answer = get(&app, &format!("/internal/jobs/{}/runs", encode("<script>"))).await;
    assert!(
        answer.raw.contains("\\u003cscript\\u003e"),
        "{}",
        answer.raw
    );
    assert!(answer.message().contains("<script>"), "{}", answer.raw);

    // Invalid UTF-8 in the path.
    let answer = get(&app, "/internal/jobs/%FF%FE/runs").await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.error(), "invalid");

    assert!(backend.audit_log(None, 10).await.unwrap().is_empty());
    let jobs = get(&app, "/internal/jobs").await;
    assert_eq!(jobs.body["jobs"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn partitions_with_control_characters_are_400() {
    let (backend, app) = setup().await;
    let slot = at(SLOT);
    failed(&backend, SETTLEMENT, slot, "").await;
    for answer in [
        get(&app, "/internal/jobs/daily-settlement/runs?partition=%00").await,
        get(
            &app,
            &format!("/internal/jobs/daily-settlement/runs/{SLOT}?partition=a%0Ab"),
        )
        .await,
        post(
            &app,
            "/internal/jobs/daily-settlement/retry",
            json!({"scheduleSlot": SLOT, "partition": "a\u{0}b", "reason": "r"}),
        )
        .await,
    ] {
        answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(answer.body["field"], "partition", "{}", answer.raw);
        assert!(
            !answer.message().chars().any(char::is_control),
            "{}",
            answer.raw
        );
    }
    assert!(backend.audit_log(None, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_store_outage_is_503() {
    let (backend, app) = setup().await;
    failed(&backend, SETTLEMENT, at(SLOT), "").await;
    backend.set_unavailable(true);
    for answer in [
        get(&app, "/internal/jobs").await,
        post(
            &app,
            "/internal/jobs/daily-settlement/retry",
            json!({"scheduleSlot": SLOT, "reason": "r"}),
        )
        .await,
    ] {
        answer.expect(StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.error(), "store");
        assert!(answer.message().contains("unavailable"), "{}", answer.raw);
    }
    backend.set_unavailable(false);
    assert_eq!(
        run_of(&backend, SETTLEMENT, at(SLOT)).status.as_str(),
        "failed"
    );
}

// ---------------------------------------------------------------------------------------------
// No request panics: every request type, with values near and past every bound

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    /// A job name: a registered one, or anything.
    fn job() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => Just(SETTLEMENT.to_owned()),
            2 => Just(EVERY_SECOND.to_owned()),
            1 => Just("a\0b".to_owned()),
            2 => any::<String>(),
        ]
    }

    /// An instant as text: recent days (ranges that hold slots), the ends of RFC 3339, any instant
    /// of years 0 to 9999 in any offset, or anything.
    fn instant() -> impl Strategy<Value = String> {
        let any_instant = (
            0i32..=9999,
            1u32..=12,
            1u32..=28,
            0u32..86_400,
            0u32..1000,
            -1439i32..=1439,
        )
            .prop_map(|(y, mo, d, s, ms, off)| {
                let sign = if off < 0 { '-' } else { '+' };
                let (h, m) = (off.abs() / 60, off.abs() % 60);
                format!(
                    "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}{sign}{h:02}:{m:02}",
                    s / 3600,
                    s / 60 % 60,
                    s % 60
                )
            });
        prop_oneof![
            4 => (1i64..12).prop_map(|d| days_ago(d).to_rfc3339()),
            1 => Just("0000-01-01T00:00:00Z".to_owned()),
            1 => Just("9999-12-31T23:59:59.999+00:00".to_owned()),
            1 => Just("0000-01-01T00:00:00+23:59".to_owned()),
            2 => any_instant,
            1 => any::<String>(),
        ]
    }

    /// A number as JSON: tiny, huge, negative, integral, or not a number at all.
    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            2 => prop::sample::select(vec![1e-300, 5e-324, 1e-12, 1e-10, 1e-3, 1e3, 1e300, f64::MAX, -1.0, 0.0]).prop_map(Value::from),
            2 => any::<f64>().prop_map(Value::from),
            1 => any::<i64>().prop_map(Value::from),
            1 => any::<String>().prop_map(Value::from),
            1 => Just(Value::Null),
        ]
    }

    /// A query value: a page size, a status, an instant, or anything.
    fn query_value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u128>().prop_map(|n| n.to_string()),
            Just("failed".to_owned()),
            instant(),
            any::<String>(),
        ]
    }

    fn text() -> impl Strategy<Value = Value> {
        prop_oneof![
            3 => Just(Value::from("proptest")),
            1 => any::<String>().prop_map(Value::from),
            1 => Just(Value::Null),
        ]
    }

    /// A request of any route: a method, a path with query, and a body (`None` for a GET).
    fn request() -> impl Strategy<Value = (String, Option<Value>)> {
        let q = |key: &'static str| {
            prop::option::of(query_value()).prop_map(move |v| {
                v.map(|v| format!("{key}={}&", encode(&v)))
                    .unwrap_or_default()
            })
        };
        let runs = (
            job(),
            q("status"),
            q("from"),
            q("to"),
            q("partition"),
            q("limit"),
        )
            .prop_map(|(j, a, b, c, d, e)| {
                (format!("/jobs/{}/runs?{a}{b}{c}{d}{e}", encode(&j)), None)
            });
        // The only run is finished, so no wait outlasts a read.
        let wait = prop::option::of(prop_oneof![
            4 => prop::sample::select(vec!["0", "0.05", "3600", "3601", "-1", "1e300", "NaN", "inf"]).prop_map(str::to_owned),
            1 => any::<String>(),
        ])
        .prop_map(|v| v.map(|v| format!("wait={}&", encode(&v))).unwrap_or_default());
        let run = (job(), instant(), q("partition"), wait).prop_map(|(j, s, p, w)| {
            (
                format!("/jobs/{}/runs/{}?{p}{w}", encode(&j), encode(&s)),
                None,
            )
        });
        let retry_failed = (
            job(),
            instant(),
            instant(),
            text(),
            prop::option::of(any::<String>()),
        )
            .prop_map(|(j, from, to, reason, partition)| {
                let body =
                    json!({"from": from, "to": to, "reason": reason, "partition": partition});
                (format!("/jobs/{}/retry-failed", encode(&j)), Some(body))
            });
        let missed = (job(), q("from"), q("to"))
            .prop_map(|(j, a, b)| (format!("/jobs/{}/missed?{a}{b}", encode(&j)), None));
        let audit = (q("job"), q("limit")).prop_map(|(a, b)| (format!("/audit?{a}{b}"), None));
        let slot_change = (
            job(),
            prop::sample::select(vec!["retry", "cancel"]),
            instant(),
            text(),
            text(),
            prop::option::of(any::<String>()),
        )
            .prop_map(|(j, action, slot, reason, actor, partition)| {
                let body = json!({"scheduleSlot": slot, "reason": reason, "actor": actor, "partition": partition});
                (format!("/jobs/{}/{action}", encode(&j)), Some(body))
            });
        let change = (
            job(),
            prop::sample::select(vec!["trigger", "pause", "resume"]),
            text(),
            text(),
        )
            .prop_map(|(j, action, reason, actor)| {
                (
                    format!("/jobs/{}/{action}", encode(&j)),
                    Some(json!({"reason": reason, "actor": actor})),
                )
            });
        let backfill = (job(), instant(), instant(), prop::option::of(any::<bool>()), number(), text())
            .prop_map(|(j, from, to, dry_run, per_second, reason)| {
                let body = json!({"from": from, "to": to, "dryRun": dry_run.map_or(Value::Bool(false), Value::Bool), "perSecond": per_second, "reason": reason});
                (format!("/jobs/{}/backfill", encode(&j)), Some(body))
            });
        // Boxed: the union of nine unboxed strategies overflows a test thread's stack in debug.
        prop_oneof![
            1 => Just(("/jobs".to_owned(), None)).boxed(),
            1 => runs.boxed(),
            1 => run.boxed(),
            1 => missed.boxed(),
            1 => audit.boxed(),
            1 => slot_change.boxed(),
            1 => retry_failed.boxed(),
            1 => change.boxed(),
            4 => backfill.boxed(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the request, the answer is JSON with a 2xx or 4xx status, and nothing panics.
        #[test]
        fn no_request_panics((path, body) in request()) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let answer = runtime.block_on(async {
                let (backend, app) = setup().await;
                failed(&backend, SETTLEMENT, days_ago(3) - chrono::Duration::hours(7), "").await;
                let uri = format!("/internal{path}");
                match body {
                    None => get(&app, &uri).await,
                    Some(body) => post(&app, &uri, body).await,
                }
            });
            prop_assert!(
                answer.status.is_success() || answer.status.is_client_error(),
                "{path}: {} {}", answer.status, answer.raw
            );
            // `field` names a key as the request writes it: camelCase, never snake_case.
            if let Some(field) = answer.body["field"].as_str() {
                prop_assert!(!field.contains('_'), "{path}: {}", answer.raw);
            }
        }
    }
}

/// Issue 15, item 13: every failed slot of a range is retried, one audit entry each; other slots
/// and other statuses are left alone.
#[tokio::test]
async fn retries_every_failed_slot_of_a_range() {
    let (backend, app) = setup().await;
    let day = |d: u32| Utc.with_ymd_and_hms(2026, 3, d, 17, 0, 0).unwrap();
    failed(&backend, SETTLEMENT, day(2), "").await;
    failed(&backend, SETTLEMENT, day(3), "acme").await;
    succeeded(&backend, SETTLEMENT, day(4)).await;
    failed(&backend, SETTLEMENT, day(5), "").await;
    failed(&backend, SETTLEMENT, day(9), "").await; // outside the range
    let body = json!({
        "from": "2026-03-01T00:00:00Z",
        "to": "2026-03-08T00:00:00Z",
        "reason": "bank API was down",
        "actor": "ops",
    });
    let answer = post(
        &app,
        "/internal/jobs/daily-settlement/retry-failed",
        body.clone(),
    )
    .await;
    answer.expect(StatusCode::OK);
    let slots: Vec<(&str, &str)> = answer.body["retried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["scheduledAt"].as_str().unwrap(),
                k["partition"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        slots,
        [
            ("2026-03-02T17:00:00Z", ""),
            ("2026-03-03T17:00:00Z", "acme"),
            ("2026-03-05T17:00:00Z", "")
        ]
    );
    for d in [2, 5] {
        assert_eq!(
            run_of(&backend, SETTLEMENT, day(d)).status.as_str(),
            "pending"
        );
    }
    assert_eq!(
        run_of(&backend, SETTLEMENT, day(4)).status.as_str(),
        "succeeded"
    );
    assert_eq!(
        run_of(&backend, SETTLEMENT, day(9)).status.as_str(),
        "failed"
    );
    let audit = backend.audit_log(Some(SETTLEMENT), 10).await.unwrap();
    assert_eq!(audit.len(), 3, "{audit:?}");
    assert!(
        audit
            .iter()
            .all(|a| a.entry.action == "retry" && a.entry.actor == "ops")
    );

    // Nothing failed is left in the range: a repeat retries nothing.
    let again = post(&app, "/internal/jobs/daily-settlement/retry-failed", body).await;
    again.expect(StatusCode::OK);
    assert_eq!(again.body["retried"], json!([]));

    let bad = post(
        &app,
        "/internal/jobs/daily-settlement/retry-failed",
        json!({"from": "2026-03-08T00:00:00Z", "to": "2026-03-01T00:00:00Z", "reason": "x"}),
    )
    .await;
    bad.expect(StatusCode::BAD_REQUEST);
    assert_eq!(bad.body["field"], "range");
}

/// Issue 15, item 13: `?wait=` answers once the run has finished, or with the run as it is when the
/// wait is over.
#[tokio::test]
async fn waits_for_a_run_to_finish() {
    let (backend, app) = setup().await;
    let slot = at(SLOT);
    let lease = running(&backend, SETTLEMENT, slot, "").await;
    let uri = format!("/internal/jobs/daily-settlement/runs/{SLOT}?wait=0.3");
    let started = std::time::Instant::now();
    let answer = get(&app, &uri).await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["status"], "running");
    assert!(started.elapsed() >= Duration::from_millis(300));

    let finisher = {
        let backend = backend.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            backend
                .finish_one("replica-a", &lease, &Finish::succeeded())
                .await
                .unwrap()
        })
    };
    let uri = format!("/internal/jobs/daily-settlement/runs/{SLOT}?wait=30");
    let started = std::time::Instant::now();
    let answer = get(&app, &uri).await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body["status"], "succeeded");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(finisher.await.unwrap());

    for wait in ["-1", "3601", "soon", "NaN"] {
        let uri = format!("/internal/jobs/daily-settlement/runs/{SLOT}?wait={wait}");
        let answer = get(&app, &uri).await;
        answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(answer.body["field"], "wait", "{wait}");
    }
}

/// Issue 21, point 8: a second pause is refused with 409 and names who paused the job first, whose
/// pause stays; resuming an active job is refused and audits nothing.
#[tokio::test]
async fn a_second_pause_and_a_needless_resume_are_refused_with_409() {
    let (backend, app) = setup().await;
    let pause = |actor: &str| json!({"reason": "maintenance", "actor": actor});
    post(
        &app,
        "/internal/jobs/daily-settlement/pause",
        pause("alice"),
    )
    .await
    .expect(StatusCode::OK);
    let again = post(&app, "/internal/jobs/daily-settlement/pause", pause("bob")).await;
    again.expect(StatusCode::CONFLICT);
    assert_eq!(again.body["error"], "refused", "{}", again.raw);
    assert!(
        again.message().contains("already paused by alice"),
        "{}",
        again.raw
    );
    let jobs = backend.jobs().await.unwrap();
    let job = jobs
        .iter()
        .find(|j| j.definition.name == SETTLEMENT)
        .unwrap();
    assert_eq!(job.paused_by.as_deref(), Some("alice"));
    post(
        &app,
        "/internal/jobs/daily-settlement/resume",
        pause("alice"),
    )
    .await
    .expect(StatusCode::OK);
    let needless = post(&app, "/internal/jobs/daily-settlement/resume", pause("bob")).await;
    needless.expect(StatusCode::CONFLICT);
    assert!(
        needless.message().contains("is not paused"),
        "{}",
        needless.raw
    );
    let actions: Vec<String> = backend
        .audit_log(None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.entry.action)
        .collect();
    assert_eq!(actions, ["resume", "pause"]);
}
