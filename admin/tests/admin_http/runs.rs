//! `GET /jobs/{job}/runs` and `/runs/{slot}`: listings, the page rule, one run, waiting for it.

use crate::support::*;
use slotguard::store::SlotStoreExt as _;

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
            slotguard_admin::AdminError::Invalid { field: "limit", .. }
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
