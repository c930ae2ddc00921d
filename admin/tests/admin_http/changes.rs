//! Retries, range retries, cancellations and manual runs.

use crate::support::*;
use slotguard::store::AdminStoreExt as _;

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
