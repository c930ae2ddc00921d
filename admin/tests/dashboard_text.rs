//! Operator text on the dashboard: bidirectional controls and other invisible format characters in a
//! reason or an operator's name are shown escaped, as the CLI shows them, so that "txt.exe" cannot
//! read "exe.txt" on any page.
#![cfg(feature = "dashboard")]

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use slotguard::store::{AdminStore, JobDefinition};
use slotguard::{MemoryBackend, Schedule};
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::{Admin, ChangeRequest};
use tower::ServiceExt;

const JOB: &str = "daily-settlement";

/// Characters that reorder or hide the text around them.
const INVISIBLE: [char; 6] = [
    '\u{202E}', '\u{202D}', '\u{2066}', '\u{200F}', '\u{200B}', '\u{FEFF}',
];

/// A memory backend with `name` registered now, on `cron` in UTC.
async fn registered(name: &str, cron: &str) -> MemoryBackend {
    let backend = MemoryBackend::new();
    let fingerprint = Schedule::parse(cron, "UTC").unwrap().fingerprint();
    let definition = JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: "UTC".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint,
        calendar: None,
    };
    backend.register_jobs(&[definition]).await.unwrap();
    backend
}

async fn page(app: &Router, uri: &str) -> String {
    let response = app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{uri}");
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn bidi_controls_in_reasons_and_operators_are_shown_escaped_on_every_page() {
    let backend = registered(JOB, "0 2 * * *").await;
    let admin = Admin::new(backend.clone());
    let by = ChangeRequest::new(
        "mallory\u{202E}gpj.exe",
        "invoice\u{202E}txt.exe \u{2066}x\u{200F}\u{200B}\u{FEFF}\u{202D}",
    );
    admin.pause(JOB, &by).await.unwrap();
    let triggered = admin.trigger(JOB, &by).await.unwrap();
    let slot = triggered.scheduled_at;
    admin.cancel(JOB, slot, "", &by).await.unwrap();
    let app = Router::new().nest("/ui", Dashboard::new(admin).router());
    let slot = slot.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    for uri in [
        "/ui/audit".to_owned(),
        format!("/ui/jobs/{JOB}"),
        "/ui".to_owned(),
        format!("/ui/jobs/{JOB}/runs/{slot}"),
    ] {
        let html = page(&app, &uri).await;
        for c in INVISIBLE {
            assert!(
                !html.contains(c),
                "{uri} renders U+{:04X} raw: {html}",
                c as u32
            );
        }
        assert!(
            html.contains("mallory") || uri == "/ui",
            "{uri} names the operator"
        );
    }
    let audit = page(&app, "/ui/audit").await;
    assert!(
        audit.contains("invoice\\u{202e}txt.exe"),
        "the override is shown where it was: {audit}"
    );
}

/// A job registered just now has missed nothing: its timeline holds no missed cell for the day
/// before it existed.
#[tokio::test]
async fn a_new_jobs_timeline_shows_nothing_missed_before_it_existed() {
    let backend = registered("every-minute", "0 * * * * *").await;
    let app = Router::new().nest("/ui", Dashboard::new(Admin::new(backend)).router());
    let html = page(&app, "/ui/jobs/every-minute").await;
    let missed = html
        .matches(r#"role="listitem" class="cell k-missed""#)
        .count();
    assert_eq!(missed, 0, "missed cells on day one: {html}");
}
