//! Jobs on a business calendar in the dashboard: the calendar is named on the jobs page and the
//! job page, and the timeline marks a slot the calendar moved (with its nominal date) and one it
//! removed.
#![cfg(feature = "dashboard")]

use slotguard::store::SlotStoreExt as _;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{DateTime, Utc};
use http_body_util::BodyExt;
use slotguard::store::{Claim, ClaimRequest, Finish, JobDefinition, SlotKey, SlotStore, Trigger};
use slotguard::{Adjust, BusinessRule, Calendar, CalendarDefinition, Overlap, Schedule};
use slotguard_admin::Admin;
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::http::Actor;
use tower::ServiceExt;

#[path = "support/registered.rs"]
mod registered;
use registered::registered_a_year_ago;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn definition(name: &str, cron: &str, adjust: Adjust) -> JobDefinition {
    let rule = BusinessRule::new(Calendar::builtin("KR").unwrap(), adjust);
    JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: "Asia/Seoul".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: Schedule::parse(cron, "Asia/Seoul")
            .unwrap()
            .with_calendar(rule.clone())
            .fingerprint(),
        calendar: Some(CalendarDefinition::of(&rule)),
    }
}

/// The slot of `job` at `slot` (02:00 Seoul time on the next day's date).
fn request(job: &str, slot: DateTime<Utc>) -> ClaimRequest {
    let wall = slot.naive_utc() + chrono::Duration::hours(9);
    ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: String::new(),
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

/// Payday paid on Wednesday 2026-09-23 (moved off Chuseok, the 25th), and a daily job's Chuseok
/// slot recorded as the runtime records a removed one.
async fn setup() -> Router {
    let backend = registered_a_year_ago(&[
        definition("payday", "0 2 25 * *", Adjust::Preceding),
        definition("settle", "0 2 * * *", Adjust::Skip),
    ])
    .await;
    let paid = request("payday", at("2026-09-22T17:00:00Z"));
    let claims = backend.claim("replica-a", &[paid]).await.unwrap();
    let [Claim::Won(lease)] = claims.as_slice() else {
        panic!("claim not won: {claims:?}");
    };
    let succeeded = Finish::succeeded();
    assert!(
        backend
            .finish_one("replica-a", lease, &succeeded)
            .await
            .unwrap()
    );
    let removed = request("settle", at("2026-09-24T17:00:00Z"));
    backend
        .record_skipped(&[removed], "calendar: Chuseok")
        .await
        .unwrap();
    let dashboard = Dashboard::new(Admin::new(backend)).csrf_token("test-token-0123456789");
    Router::new()
        .nest("/ui", dashboard.router())
        .layer(axum::Extension(Actor("alice".to_owned())))
}

async fn get(app: &Router, uri: &str) -> String {
    let request = Request::get(uri).body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{uri}");
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The timeline's cell of `instant`.
fn cell<'p>(page: &'p str, instant: &str) -> &'p str {
    let title = page
        .find(&format!(r#"title="{instant}"#))
        .unwrap_or_else(|| panic!("no cell at {instant}: {page}"));
    let start = page[..title].rfind('<').unwrap();
    &page[start..start + page[start..].find('>').unwrap()]
}

#[tokio::test]
async fn the_calendar_is_named_and_its_moves_and_removals_marked() {
    let app = setup().await;
    let jobs = get(&app, "/ui").await;
    assert!(jobs.contains("on KR preceding"), "{jobs}");
    assert!(jobs.contains("on KR skip"), "{jobs}");

    let payday = get(&app, "/ui/jobs/payday").await;
    assert!(
        payday.contains("<dt>Calendar</dt><dd>KR preceding"),
        "{payday}"
    );
    let paid = cell(&payday, "2026-09-22T17:00:00Z");
    assert!(paid.contains("m-moved"), "{paid}");
    assert!(paid.contains("moved from 2026-09-25"), "{paid}");

    let settle = get(&app, "/ui/jobs/settle").await;
    let removed = cell(&settle, "2026-09-24T17:00:00Z");
    assert!(removed.contains("k-skipped m-calendar"), "{removed}");
    assert!(removed.contains("calendar: Chuseok"), "{removed}");
    assert!(!settle.contains("moved from"), "nothing moved under skip");
}
