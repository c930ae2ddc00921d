//! Refusals: unknown jobs and slots, malformed dates and bodies, hostile names, store outages.

use crate::support::*;
use slotguard::store::AdminStoreExt as _;

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
        "2026-03-08T02:00:00+25:00",
        "2026-03-08T25:00:00",
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
    // Without an offset, a wall time or a date is read in UTC, as every front end reads it.
    for slot in ["2026-03-08T02:00:00", "2026-03-08 02:00", "2026-03-08"] {
        let answer = post(
            &app,
            "/internal/jobs/daily-settlement/retry",
            json!({"scheduleSlot": slot, "reason": "r"}),
        )
        .await;
        answer.expect(StatusCode::NOT_FOUND);
        assert_eq!(answer.error(), "unknown_run", "{slot}");
        assert!(answer.message().contains("2026-03-08T"), "{}", answer.raw);
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
        json!({"from": "2026-03-01T", "to": SLOT, "reason": "r"}),
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
