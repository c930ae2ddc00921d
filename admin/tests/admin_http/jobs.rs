//! `GET /jobs`, and pausing and resuming jobs.

use crate::support::*;
use slotguard::store::AdminStoreExt as _;

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
