//! `/schedules` and `/jobs/{job}/skip`: a schedule added, read, changed and removed over HTTP in
//! the shapes outside checks use (camelCase, `next` slots, `version`), a stale version refused with
//! 409, bad fields refused with 400 naming the field, and one slot skipped and unskipped.

use crate::support::*;

fn send(method: &str, uri: &str, body: Value) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

fn acme() -> Value {
    json!({
        "id": "acme-report", "job": SETTLEMENT, "cron": "0 9 * * *", "tz": "America/New_York",
        "partition": "acme", "remainingRuns": 3, "reason": "onboarding acme"
    })
}

#[tokio::test]
async fn a_schedule_is_added_read_changed_and_removed_with_its_next_slots() {
    let (_backend, app) = setup().await;
    let added = post(&app, "/internal/schedules", acme()).await;
    added.expect(StatusCode::CREATED);
    let body = &added.body;
    assert_eq!(
        (body["id"].as_str(), body["version"].as_i64()),
        (Some("acme-report"), Some(1))
    );
    assert_eq!(
        (body["source"].as_str(), body["partition"].as_str()),
        (Some("api"), Some("acme"))
    );
    assert_eq!(body["changedBy"], "http");
    // Three runs left: three slots, each 09:00 in New York.
    let next: Vec<DateTime<Utc>> = body["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| at(v.as_str().unwrap()))
        .collect();
    assert_eq!(next.len(), 3, "{body}");
    for slot in &next {
        let local = slot.with_timezone(&chrono_tz::America::New_York);
        assert_eq!(local.format("%H:%M").to_string(), "09:00", "{slot}");
    }

    let preview =
        json!({"job": SETTLEMENT, "cron": "0 9 * * *", "tz": "America/New_York", "count": 7});
    let previewed = post(&app, "/internal/schedules/preview", preview).await;
    let previewed = previewed.expect(StatusCode::OK);
    assert_eq!(
        previewed.body["next"].as_array().map(Vec::len),
        Some(7),
        "{}",
        previewed.raw
    );
    assert_eq!(previewed.body["next"][0], body["next"][0]);

    let again = post(&app, "/internal/schedules", acme()).await;
    assert_eq!(again.expect(StatusCode::CONFLICT).error(), "exists");

    let patch =
        json!({"version": 1, "cron": "30 9 * * *", "remainingRuns": null, "reason": "later"});
    let changed = call(
        &app,
        send("PATCH", "/internal/schedules/acme-report", patch.clone()),
    )
    .await;
    changed.expect(StatusCode::OK);
    assert_eq!(changed.body["version"], 2);
    assert_eq!(changed.body["cron"], "30 9 * * *");
    assert!(changed.body["remainingRuns"].is_null(), "{}", changed.raw);
    assert_eq!(changed.body["next"].as_array().unwrap().len(), 5);
    let stale = call(
        &app,
        send("PATCH", "/internal/schedules/acme-report", patch),
    )
    .await;
    let stale = stale.expect(StatusCode::CONFLICT);
    assert_eq!(stale.error(), "stale_version");
    assert!(
        stale.message().contains("version 2, not 1"),
        "{}",
        stale.raw
    );

    let one = get(&app, "/internal/schedules/acme-report").await;
    assert_eq!(one.expect(StatusCode::OK).body["version"], 2);
    let listed = get(&app, "/internal/schedules?job=daily-settlement").await;
    let listed = &listed.expect(StatusCode::OK).body;
    assert_eq!(listed["schedules"].as_array().unwrap().len(), 1, "{listed}");
    assert!(listed["next"].is_null());
    let other = get(&app, "/internal/schedules?job=every-second").await;
    assert!(other.body["schedules"].as_array().unwrap().is_empty());

    let removed = call(
        &app,
        send(
            "DELETE",
            "/internal/schedules/acme-report",
            json!({"version": 2, "reason": "acme left"}),
        ),
    )
    .await;
    assert_eq!(removed.expect(StatusCode::OK).body["removed"], true);
    let history = get(&app, "/internal/schedules/acme-report/history").await;
    let versions = history.expect(StatusCode::OK).body["versions"]
        .as_array()
        .unwrap()
        .clone();
    let kept: Vec<(i64, bool)> = versions
        .iter()
        .map(|v| {
            (
                v["version"].as_i64().unwrap(),
                v["removed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(kept, [(1, false), (2, false), (3, true)]);
    assert_eq!(versions[2]["reason"], "acme left");
    let gone = get(&app, "/internal/schedules/acme-report").await;
    // A DELETE without a body names its fields in the query.
    post(&app, "/internal/schedules", acme())
        .await
        .expect(StatusCode::CREATED);
    let bodiless = Request::delete("/internal/schedules/acme-report?version=4&reason=gone%20again")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        call(&app, bodiless).await.expect(StatusCode::OK).body["version"],
        5
    );
    let unexplained = Request::delete("/internal/schedules/acme-report")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        call(&app, unexplained)
            .await
            .expect(StatusCode::BAD_REQUEST)
            .body["field"],
        "reason"
    );
    assert_eq!(
        gone.expect(StatusCode::NOT_FOUND).error(),
        "unknown_schedule"
    );
    let audit = get(&app, "/internal/audit?job=daily-settlement").await;
    let actions: Vec<&str> = audit.body["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        [
            "schedule_remove",
            "schedule_add",
            "schedule_remove",
            "schedule_change",
            "schedule_add"
        ]
    );
}

#[tokio::test]
async fn bad_fields_are_refused_naming_the_field_and_nothing_is_stored() {
    let (_backend, app) = setup().await;
    let cases = [
        (json!({"cron": "61 * * * *"}), "cron"),
        (json!({"tz": "Mars/Olympus"}), "tz"),
        (json!({"dst": "sometimes"}), "dst"),
        (json!({"partition": "a\u{7}b"}), "partition"),
        (json!({"remainingRuns": 100_001}), "remainingRuns"),
        (
            json!({"startAt": "2027-01-02T00:00:00Z", "endAt": "2027-01-01T00:00:00Z"}),
            "endAt",
        ),
        (json!({"startAt": "yesterday"}), "startAt"),
        (json!({"id": "bad\nid"}), "id"),
        (json!({"reason": " "}), "reason"),
    ];
    for (change, field) in cases {
        let mut body = acme();
        for (k, v) in change.as_object().unwrap() {
            body[k] = v.clone();
        }
        let answer = post(&app, "/internal/schedules", body).await;
        let answer = answer.expect(StatusCode::BAD_REQUEST);
        assert_eq!(
            (answer.error(), answer.body["field"].as_str()),
            ("invalid", Some(field)),
            "{}",
            answer.raw
        );
    }
    let mut unknown_job = acme();
    unknown_job["job"] = json!("no-such-job");
    let answer = post(&app, "/internal/schedules", unknown_job).await;
    assert_eq!(answer.expect(StatusCode::NOT_FOUND).error(), "unknown_job");
    let mut misspelt = acme();
    misspelt["partiton"] = json!("acme");
    post(&app, "/internal/schedules", misspelt)
        .await
        .expect(StatusCode::BAD_REQUEST);
    let listed = get(&app, "/internal/schedules").await;
    assert!(
        listed.body["schedules"].as_array().unwrap().is_empty(),
        "{}",
        listed.raw
    );
    let patch = json!({"version": 1, "job": "every-second", "reason": "move"});
    let missing = call(&app, send("PATCH", "/internal/schedules/none", patch)).await;
    assert_eq!(
        missing.expect(StatusCode::NOT_FOUND).error(),
        "unknown_schedule"
    );
}

#[tokio::test]
async fn one_upcoming_slot_is_skipped_and_unskipped() {
    let (_backend, app) = setup().await;
    let now = slotguard::Clock::now(&slotguard::SystemClock);
    let next = Schedule::parse("0 2 * * *", "Asia/Seoul")
        .unwrap()
        .next_after(now)
        .unwrap()
        .scheduled_at;
    let slot = next.to_rfc3339();
    let skip = json!({"scheduleSlot": slot, "reason": "bank holiday"});
    let skipped = post(&app, "/internal/jobs/daily-settlement/skip", skip.clone()).await;
    let skipped = skipped.expect(StatusCode::OK);
    assert_eq!(skipped.body["status"], "skipped", "{}", skipped.raw);
    let twice = post(&app, "/internal/jobs/daily-settlement/skip", skip.clone()).await;
    assert_eq!(twice.expect(StatusCode::CONFLICT).error(), "refused");
    assert!(
        skipped.body["errorMessage"]
            .as_str()
            .is_some_and(|m| m.ends_with("bank holiday")),
        "{}",
        skipped.raw
    );
    let undone = post(&app, "/internal/jobs/daily-settlement/unskip", skip.clone()).await;
    assert_eq!(undone.expect(StatusCode::OK).body["unskipped"], true);
    let again = post(&app, "/internal/jobs/daily-settlement/unskip", skip).await;
    assert_eq!(again.expect(StatusCode::NOT_FOUND).error(), "unknown_run");

    let off = (next + chrono::Duration::minutes(1)).to_rfc3339();
    let not_a_slot = post(
        &app,
        "/internal/jobs/daily-settlement/skip",
        json!({"scheduleSlot": off, "reason": "x"}),
    )
    .await;
    assert_eq!(
        not_a_slot.expect(StatusCode::BAD_REQUEST).body["field"],
        "scheduleSlot"
    );
    let past = post(
        &app,
        "/internal/jobs/daily-settlement/skip",
        json!({"scheduleSlot": SLOT, "reason": "x"}),
    )
    .await;
    assert_eq!(
        past.expect(StatusCode::BAD_REQUEST).body["field"],
        "scheduleSlot"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stored_schedules_missed_slots_are_those_without_a_row() {
    let clock = slotguard::TokioClock::starting_at(at("2026-06-01T00:00:00.200Z"));
    let backend = MemoryBackend::with_clock(Arc::new(clock));
    backend
        .register_jobs(&[definition(SETTLEMENT, "0 2 * * *", "Asia/Seoul")])
        .await
        .unwrap();
    let admin = Admin::new(backend.clone()).with_clock(clock);
    let app = Router::new().nest("/internal", router(admin));
    let body = json!({"id": "every-second", "job": SETTLEMENT, "cron": "* * * * * *", "tz": "UTC",
        "partition": "acme", "reason": "test"});
    post(&app, "/internal/schedules", body)
        .await
        .expect(StatusCode::CREATED);
    tokio::time::sleep(Duration::from_secs(5)).await;
    // 00:00:01 ran (has a row); the other slots up to now have none.
    let ran = claim_request(SETTLEMENT, at("2026-06-01T00:00:01Z"), "acme");
    backend.claim("replica", &[ran]).await.unwrap();
    let uri = "/internal/schedules/every-second/missed?from=2026-06-01T00:00:00Z&limit=2";
    let page = get(&app, uri).await;
    let page = &page.expect(StatusCode::OK).body;
    assert_eq!(page["partition"], "acme");
    assert_eq!(
        page["missed"],
        json!(["2026-06-01T00:00:02Z", "2026-06-01T00:00:03Z"])
    );
    let next = page["next"].as_str().unwrap().to_owned();
    let rest = get(
        &app,
        &format!(
            "/internal/schedules/every-second/missed?from={}",
            encode(&next)
        ),
    )
    .await;
    assert_eq!(
        rest.expect(StatusCode::OK).body["missed"],
        json!(["2026-06-01T00:00:04Z", "2026-06-01T00:00:05Z"])
    );
    let unknown = get(
        &app,
        "/internal/schedules/none/missed?from=2026-06-01T00:00:00Z",
    )
    .await;
    assert_eq!(
        unknown.expect(StatusCode::NOT_FOUND).error(),
        "unknown_schedule"
    );
}
