//! The dashboard through its router, without a browser: every page, the security headers, hostile
//! names and partitions rendered as text, CSRF, the operator, read-only mode, and the confirmation
//! step of every change.
#![cfg(feature = "dashboard")]

use slotguard::store::CheckpointStore;
use slotguard::store::SlotStoreExt as _;
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use chrono::{DateTime, Utc};
use slotguard::store::{
    AdminStore, Claim, ClaimRequest, Finish, JobDefinition, RunFilter, SlotKey, SlotStore, Trigger,
};
use slotguard::{ErrorClass, MemoryBackend, Overlap, Schedule, check_job_name};
use slotguard_admin::Admin;
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::http::Actor;

// `post`, the same-origin shorthand, is the other form tests' own.
#[allow(dead_code)]
#[path = "support/form.rs"]
mod form;
#[path = "support/registered.rs"]
mod registered;
use form::{encode, fetch as get, post_from as post};
use registered::registered_a_year_ago;

const SETTLEMENT: &str = "daily-settlement";
const HOSTILE_JOB: &str = "<script>alert('x')</script>";
const HOSTILE_PARTITION: &str = "<img src=x onerror=alert(1)>\"'&";
const SLOT: &str = "2026-03-07T17:00:00Z";

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// Job names of the HTTP tests' hostile kind that jobs can be registered under.
fn hostile_names() -> Vec<&'static str> {
    let names = [
        HOSTILE_JOB,
        "x'; DROP TABLE jobs; --",
        "\"); DELETE FROM slotguard_job_run_audit; --",
        "정산 · 日次バッチ 🦀",
        "a&amp;b <b>bold</b> {{x}} ${y}",
    ];
    names
        .into_iter()
        .filter(|n| check_job_name(n).is_ok())
        .collect()
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

/// A failed run of `job` at `slot`.
async fn failed(backend: &MemoryBackend, job: &str, slot: DateTime<Utc>, partition: &str) {
    let request = ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: partition.to_owned(),
        },
        trigger: Trigger::Schedule,
        zone: "UTC".to_owned(),
        wall: slot.naive_utc(),
        business_date: slot.date_naive(),
        fingerprint: 7,
        stale_after: Duration::from_secs(30),
        overlap: Overlap::Allow,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    };
    let claims = backend.claim("replica-a", &[request]).await.unwrap();
    let [Claim::Won(lease)] = claims.as_slice() else {
        panic!("claim not won: {claims:?}");
    };
    let saved = backend
        .save_checkpoint("replica-a", lease, "<i>page 3</i> of 7")
        .await
        .unwrap();
    assert!(saved);
    let finish = Finish::failed(ErrorClass::Transient, "<b>bank</b> timed out", None);
    assert!(
        backend
            .finish_one("replica-a", lease, &finish)
            .await
            .unwrap()
    );
}

async fn setup() -> MemoryBackend {
    let mut jobs = vec![definition(SETTLEMENT, "0 2 * * *", "Asia/Seoul")];
    jobs.extend(
        hostile_names()
            .into_iter()
            .map(|n| definition(n, "0 3 * * *", "UTC")),
    );
    let backend = registered_a_year_ago(&jobs).await;
    failed(&backend, SETTLEMENT, at(SLOT), "").await;
    failed(&backend, HOSTILE_JOB, at(SLOT), HOSTILE_PARTITION).await;
    backend
}

/// The dashboard at `/ui`, with `operator` as the authenticated actor (if any).
fn app(backend: &MemoryBackend, operator: Option<&str>, read_only: bool) -> Router {
    let dashboard = Dashboard::new(Admin::new(backend.clone()))
        .read_only(read_only)
        .csrf_token("test-token-0123456789");
    let router = Router::new().nest("/ui", dashboard.router());
    match operator {
        Some(name) => router.layer(axum::Extension(Actor(name.to_owned()))),
        None => router,
    }
}

/// The text of an HTML page with the markup maud writes for `text`.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[tokio::test]
async fn every_page_answers_html_with_the_security_headers() {
    let backend = setup().await;
    let app = app(&backend, Some("alice"), false);
    let slot = encode(SLOT);
    for uri in [
        "/ui".to_owned(),
        format!("/ui/jobs/{SETTLEMENT}"),
        format!("/ui/jobs/{SETTLEMENT}?status=failed&from=2026-03-01&to=2026-03-09T00:00"),
        format!("/ui/jobs/{SETTLEMENT}/runs/{slot}"),
        "/ui/failures".to_owned(),
        "/ui/missed".to_owned(),
        "/ui/missed?from=2026-03-01T00:00&to=2026-03-09T00:00".to_owned(),
        "/ui/audit".to_owned(),
        "/ui/replicas".to_owned(),
        "/ui/holidays".to_owned(),
    ] {
        let page = get(&app, &uri).await;
        assert_eq!(page.status, StatusCode::OK, "{uri}: {}", page.body);
        assert_eq!(
            page.headers[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let csp = page.headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap();
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(page.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(page.headers[header::X_FRAME_OPTIONS], "DENY");
        // Links are written under the prefix the router is nested at.
        assert!(page.body.contains(r#"href="/ui/failures""#), "{uri}");
    }
    let css = get(&app, "/ui/assets/app.css").await;
    assert_eq!(css.headers[header::CONTENT_TYPE], "text/css; charset=utf-8");
    let missing = get(&app, "/ui/jobs/no-such-job").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.body.contains("unknown job"), "{}", missing.body);
    let bad = get(&app, &format!("/ui/jobs/{SETTLEMENT}?from=yesterday")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_missed_page_lists_every_jobs_slots_without_a_row() {
    let backend = setup().await;
    // A job registered by a newer version, with a schedule this one cannot read.
    let unreadable = JobDefinition {
        cron: "@every-fortnight".to_owned(),
        fingerprint: 0,
        calendar: None,
        ..definition("from-the-future", "0 4 * * *", "UTC")
    };
    backend.register_jobs(&[unreadable]).await.unwrap();
    let app = app(&backend, Some("alice"), false);
    let page = get(&app, "/ui/missed?from=2026-03-05T00:00&to=2026-03-09T00:00").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    // Settlement (02:00 Seoul, 17:00 UTC the day before) has a row for 03-07 only.
    let settlement = format!(r#">{SETTLEMENT}</a> · 3 missed"#);
    assert!(page.body.contains(&settlement), "{}", page.body);
    for slot in [
        "2026-03-05T17:00:00Z",
        "2026-03-06T17:00:00Z",
        "2026-03-08T17:00:00Z",
    ] {
        assert!(page.body.contains(slot), "{slot}");
    }
    assert!(!page.body.contains("2026-03-07T17:00:00Z ·"));
    // Each hostile job (03:00 UTC) has no row at any of its four slots; the row of one of them at
    // 17:00 is not at a slot of its schedule.
    for name in hostile_names() {
        let heading = format!("{}</a> · 4 missed", escaped(name));
        assert!(page.body.contains(&heading), "{name}");
    }
    assert!(
        page.body
            .contains("the stored schedule of `from-the-future` cannot be read by this version"),
        "{}",
        page.body
    );
    let empty = get(&app, "/ui/missed?from=2026-03-09T00:00&to=2026-03-05T00:00").await;
    assert_eq!(empty.status, StatusCode::BAD_REQUEST, "{}", empty.body);
    assert!(empty.body.contains("must be before"), "{}", empty.body);
}

#[tokio::test]
async fn hostile_names_partitions_and_messages_are_rendered_as_text() {
    let backend = setup().await;
    let app = app(&backend, Some("alice"), false);
    let jobs = get(&app, "/ui").await;
    for name in hostile_names() {
        assert!(
            jobs.body.contains(&escaped(name)),
            "{name} in {}",
            jobs.body
        );
        let page = get(&app, &format!("/ui/jobs/{}", encode(name))).await;
        assert_eq!(page.status, StatusCode::OK, "{name}: {}", page.body);
        assert!(page.body.contains(&escaped(name)), "{name}");
    }
    let run = format!(
        "/ui/jobs/{}/runs/{}?partition={}",
        encode(HOSTILE_JOB),
        encode(SLOT),
        encode(HOSTILE_PARTITION)
    );
    let page = get(&app, &run).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(&escaped(HOSTILE_PARTITION)));
    assert!(page.body.contains("&lt;b&gt;bank&lt;/b&gt; timed out"));
    assert!(
        page.body.contains("&lt;i&gt;page 3&lt;/i&gt; of 7"),
        "the checkpoint"
    );
    for page in [&jobs, &page] {
        // The only script is the dashboard's own; no markup from the store.
        assert_eq!(page.body.matches("<script").count(), 1, "{}", page.body);
        assert!(!page.body.contains("<img"), "{}", page.body);
        assert!(!page.body.contains("<b>"), "{}", page.body);
        assert!(!page.body.contains("<i>"), "{}", page.body);
    }
}

#[tokio::test]
async fn a_change_needs_the_token_an_operator_a_reason_and_a_confirmation() {
    let backend = setup().await;
    let admin = Admin::new(backend.clone());
    let alice = app(&backend, Some("alice"), false);
    let uri = format!("/ui/jobs/{SETTLEMENT}/pause");
    let token = "test-token-0123456789";
    let page = get(&alice, &format!("/ui/jobs/{SETTLEMENT}")).await;
    assert!(
        page.body
            .contains(&format!(r#"name="csrf" value="{token}""#))
    );

    let reason = ("reason", "bank API down");
    let refused = [
        post(&alice, &uri, &[reason], "same-origin").await,
        post(&alice, &uri, &[("csrf", "guess"), reason], "same-origin").await,
        post(&alice, &uri, &[("csrf", token), reason], "cross-site").await,
        post(
            &app(&backend, None, false),
            &uri,
            &[("csrf", token), reason],
            "none",
        )
        .await,
    ];
    for page in refused {
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    }
    let no_reason = post(&alice, &uri, &[("csrf", token), ("reason", " ")], "none").await;
    assert_eq!(
        no_reason.status,
        StatusCode::BAD_REQUEST,
        "{}",
        no_reason.body
    );

    // The first submit only asks for a confirmation.
    let confirm = post(&alice, &uri, &[("csrf", token), reason], "same-origin").await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    assert!(confirm.body.contains(r#"name="confirm" value="yes""#));
    assert!(!admin.job(SETTLEMENT).await.unwrap().paused);

    let done = post(
        &alice,
        &uri,
        &[("csrf", token), reason, ("confirm", "yes")],
        "same-origin",
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(
        done.headers[header::LOCATION],
        format!("/ui/jobs/{SETTLEMENT}?done=pause")
    );
    let job = admin.job(SETTLEMENT).await.unwrap();
    assert!(job.paused);
    assert_eq!(job.paused_by.as_deref(), Some("alice"));
    assert_eq!(job.paused_reason.as_deref(), Some("bank API down"));
    let page = get(&alice, &format!("/ui/jobs/{SETTLEMENT}?done=pause")).await;
    assert!(
        page.body.contains("Paused: no replica claims"),
        "{}",
        page.body
    );
    assert!(page.body.contains("by alice"), "{}", page.body);
}

#[tokio::test]
async fn retry_and_backfill_go_through_a_preview_then_change_the_store() {
    let backend = setup().await;
    let admin = Admin::new(backend.clone());
    let alice = app(&backend, Some("alice"), false);
    let token = ("csrf", "test-token-0123456789");
    let confirm = ("confirm", "yes");
    let retry = format!("/ui/jobs/{SETTLEMENT}/retry");
    let fields = [
        token,
        ("reason", "bank is back"),
        ("slot", SLOT),
        ("partition", ""),
    ];
    let preview = post(&alice, &retry, &fields, "same-origin").await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.body);
    let mut confirmed = fields.to_vec();
    confirmed.push(confirm);
    let done = post(&alice, &retry, &confirmed, "same-origin").await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let run = admin.run(SETTLEMENT, at(SLOT), "").await.unwrap();
    assert_eq!(run.status.as_str(), "pending");
    // A second retry of a pending run is refused, and says why.
    let again = post(&alice, &retry, &confirmed, "same-origin").await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);
    assert!(again.body.contains("already waiting"), "{}", again.body);

    // Three nights in Seoul, of which the one that failed already has a row.
    let backfill = format!("/ui/jobs/{SETTLEMENT}/backfill");
    let fields = [
        token,
        ("reason", "replay March"),
        ("from", "2026-03-05T00:00"),
        ("to", "2026-03-08T00:00"),
        ("per_second", "5"),
    ];
    let preview = post(&alice, &backfill, &fields, "same-origin").await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.body);
    assert!(
        preview.body.contains("2 slot(s) would be created"),
        "{}",
        preview.body
    );
    assert!(
        preview.body.contains("1 already have a row"),
        "{}",
        preview.body
    );
    let filter = || RunFilter {
        job: Some(SETTLEMENT.to_owned()),
        ..RunFilter::default()
    };
    assert_eq!(
        admin.runs(filter()).await.unwrap().len(),
        1,
        "a preview creates nothing"
    );
    let mut confirmed = fields.to_vec();
    confirmed.push(confirm);
    let done = post(&alice, &backfill, &confirmed, "same-origin").await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(admin.runs(filter()).await.unwrap().len(), 3);
    let audit = admin.audit(Some(SETTLEMENT), 10).await.unwrap();
    assert!(audit.iter().all(|a| a.entry.actor == "alice"), "{audit:?}");
    assert!(audit.iter().any(|a| a.entry.action == "backfill"));
}

#[tokio::test]
async fn read_only_shows_no_form_and_refuses_every_change() {
    let backend = setup().await;
    let app = app(&backend, Some("alice"), true);
    let page = get(&app, &format!("/ui/jobs/{SETTLEMENT}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(!page.body.contains(r#"method="post""#), "{}", page.body);
    let run = get(
        &app,
        &format!("/ui/jobs/{SETTLEMENT}/runs/{}", encode(SLOT)),
    )
    .await;
    assert!(!run.body.contains(r#"method="post""#), "{}", run.body);
    let fields = [
        ("csrf", "test-token-0123456789"),
        ("reason", "x"),
        ("confirm", "yes"),
    ];
    let refused = post(
        &app,
        &format!("/ui/jobs/{SETTLEMENT}/trigger"),
        &fields,
        "none",
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.body.contains("read-only"), "{}", refused.body);
    let runs = Admin::new(backend.clone())
        .runs(RunFilter::default())
        .await
        .unwrap();
    assert_eq!(runs.len(), 2, "nothing was triggered");
}

#[tokio::test]
async fn the_failed_runs_of_a_range_are_listed_then_retried() {
    let backend = setup().await;
    let admin = Admin::new(backend.clone());
    let alice = app(&backend, Some("alice"), false);
    let uri = format!("/ui/jobs/{SETTLEMENT}/retry-failed");
    let fields = [
        ("csrf", "test-token-0123456789"),
        ("reason", "bank is back"),
        ("from", "2026-03-01T00:00"),
        ("to", "2026-03-09T00:00"),
    ];
    let preview = post(&alice, &uri, &fields, "same-origin").await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.body);
    assert!(
        preview.body.contains("1 run(s) would be retried"),
        "{}",
        preview.body
    );
    let run = admin.run(SETTLEMENT, at(SLOT), "").await.unwrap();
    assert_eq!(run.status.as_str(), "failed", "a preview changes nothing");
    let mut confirmed = fields.to_vec();
    confirmed.push(("confirm", "yes"));
    let done = post(&alice, &uri, &confirmed, "same-origin").await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let run = admin.run(SETTLEMENT, at(SLOT), "").await.unwrap();
    assert_eq!(run.status.as_str(), "pending");
    let audit = admin.audit(Some(SETTLEMENT), 10).await.unwrap();
    assert_eq!(audit[0].entry.actor, "alice");
    assert_eq!(audit[0].entry.reason, "bank is back");
}

#[tokio::test]
async fn the_holidays_page_lists_the_overrides_in_force_escaped() {
    let backend = setup().await;
    let app = app(&backend, Some("alice"), false);
    let empty = get(&app, "/ui/holidays").await;
    assert!(
        empty.body.contains("No calendar has an override."),
        "{}",
        empty.body
    );
    let admin = Admin::new(backend.clone());
    let by = slotguard_admin::ChangeRequest::new("kim", "decree <b>now</b>");
    let date = chrono::NaiveDate::from_ymd_opt(2026, 10, 2).unwrap();
    admin
        .add_holiday("KR", date, "임시공휴일", &by)
        .await
        .unwrap();
    let page = get(&app, "/ui/holidays").await;
    assert_eq!(page.status, StatusCode::OK);
    for text in [
        "KR",
        "2026-10-02",
        "added: 임시공휴일",
        "kim",
        "decree &lt;b&gt;now&lt;/b&gt;",
    ] {
        assert!(page.body.contains(text), "{text}: {}", page.body);
    }
}
