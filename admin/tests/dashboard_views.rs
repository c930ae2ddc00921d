//! What the dashboard's pages show (issue 21, point 8): queued runs on the jobs page, no past
//! "next attempt" as an error, a time axis under the timeline, RFC 3339 (UTC) in every date field,
//! and audit rows that lead to their run.
#![cfg(feature = "dashboard")]

use slotguard::store::SlotStoreExt as _;
use std::time::Duration;

use axum::Router;
use chrono::{DateTime, Utc};
use slotguard::store::{Claim, ClaimRequest, Finish, JobDefinition, SlotKey, SlotStore, Trigger};
use slotguard::{ErrorClass, MemoryBackend, Overlap, Schedule};
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::http::Actor;
use slotguard_admin::{Admin, ChangeRequest};

#[path = "support/page.rs"]
mod page;
use page::get;

#[path = "support/registered.rs"]
mod registered;
use registered::registered_a_year_ago;

const JOB: &str = "daily-settlement";
const SLOT: &str = "2026-03-07T17:00:00Z";

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn by() -> ChangeRequest {
    ChangeRequest::new("alice", "bank is back")
}

/// The settlement job with one failed run at [`SLOT`].
async fn setup() -> (MemoryBackend, Admin, Router) {
    let definition = JobDefinition {
        name: JOB.to_owned(),
        cron: "0 2 * * *".to_owned(),
        zone: "Asia/Seoul".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: Schedule::parse("0 2 * * *", "Asia/Seoul")
            .unwrap()
            .fingerprint(),
        calendar: None,
    };
    // Registered before its first slot, so the timeline counts missed slots from then.
    let backend = registered_a_year_ago(&[definition]).await;
    let slot = at(SLOT);
    let request = ClaimRequest {
        key: SlotKey {
            job: JOB.to_owned(),
            scheduled_at: slot,
            partition: String::new(),
        },
        trigger: Trigger::Schedule,
        zone: "Asia/Seoul".to_owned(),
        wall: slot.naive_utc() + chrono::Duration::hours(9),
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
    let finish = Finish::failed(ErrorClass::Transient, "bank timed out", None);
    assert!(
        backend
            .finish_one("replica-a", lease, &finish)
            .await
            .unwrap()
    );
    let admin = Admin::new(backend.clone());
    let dashboard = Dashboard::new(Admin::new(backend.clone())).csrf_token("test-token-0123456789");
    let app = Router::new()
        .nest("/ui", dashboard.router())
        .layer(axum::Extension(Actor("alice".to_owned())));
    (backend, admin, app)
}

#[tokio::test]
async fn the_jobs_page_counts_queued_runs() {
    let (_backend, admin, app) = setup().await;
    admin.pause(JOB, &by()).await.unwrap();
    for _ in 0..3 {
        admin.trigger(JOB, &by()).await.unwrap();
    }
    let page = get(&app, "/ui").await;
    assert!(page.contains(r#"<th class="n">Queued</th>"#), "{page}");
    assert!(
        page.contains(
            r#"<td class="n queued">3<br><small class="waits">wait for resume</small></td>"#
        ),
        "{page}"
    );
}

#[tokio::test]
async fn a_due_pending_run_is_shown_queued_not_as_an_error() {
    let (_backend, admin, app) = setup().await;
    admin.pause(JOB, &by()).await.unwrap();
    admin.retry(JOB, at(SLOT), "", &by()).await.unwrap();
    admin.trigger(JOB, &by()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let page = get(&app, &format!("/ui/jobs/{JOB}")).await;
    assert!(!page.contains("next attempt"), "{page}");
    assert!(page.contains("queued since"), "{page}");
}

#[tokio::test]
async fn the_timeline_has_a_time_axis() {
    let (_backend, _admin, app) = setup().await;
    let page = get(&app, &format!("/ui/jobs/{JOB}")).await;
    let axis = page
        .split(r#"<div class="timeline-axis""#)
        .nth(1)
        .unwrap_or_else(|| panic!("no axis: {page}"));
    let axis = &axis[..axis.find("</div>").unwrap()];
    // The cells' instants, oldest first, from their titles (`<instant> · <note>`).
    let cells = page.split(r#"<div class="timeline""#).nth(1).unwrap();
    let cells = &cells[..cells.find("</div>").unwrap()];
    let instants: Vec<&str> = cells
        .split(r#"title=""#)
        .skip(1)
        .filter_map(|t| t.split(" · ").next())
        .collect();
    assert!(instants.len() > 2, "{cells}");
    assert!(axis.contains(instants[0]), "{axis}");
    assert!(axis.contains(instants[instants.len() - 1]), "{axis}");
    assert!(axis.contains("now"), "{axis}");
}

#[tokio::test]
async fn every_date_field_takes_and_shows_rfc3339_utc() {
    let (_backend, _admin, app) = setup().await;
    for uri in [
        format!("/ui/jobs/{JOB}"),
        "/ui/missed?from=2026-03-05T00:00:00Z&to=2026-03-09T00:00:00Z".to_owned(),
    ] {
        let page = get(&app, &uri).await;
        assert!(!page.contains("datetime-local"), "{uri}: {page}");
        for field in page.split(r#"name="from""#).skip(1) {
            let value = field.split(r#"value=""#).nth(1).unwrap_or_default();
            let value = &value[..value.find('"').unwrap_or(0)];
            if !value.is_empty() {
                assert!(
                    DateTime::parse_from_rfc3339(value).is_ok() && value.ends_with('Z'),
                    "{uri}: `{value}`"
                );
            }
        }
        assert!(
            page.contains(r#"placeholder="2026-03-07T17:00:00Z""#),
            "{uri}: {page}"
        );
    }
}

#[tokio::test]
async fn audit_rows_link_to_their_run() {
    let (_backend, admin, app) = setup().await;
    admin.retry(JOB, at(SLOT), "", &by()).await.unwrap();
    let page = get(&app, "/ui/audit").await;
    // The slot's runs (every partition of it), from the slot to the next millisecond.
    let link =
        format!("/ui/jobs/{JOB}?from=2026-03-07T17%3A00%3A00Z&amp;to=2026-03-07T17%3A00%3A00.001Z");
    assert!(page.contains(&link), "{page}");
}
