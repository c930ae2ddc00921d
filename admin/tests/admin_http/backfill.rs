//! `POST /jobs/{job}/backfill`: dry runs, bounds and rates.

use crate::support::*;
use slotguard::store::AdminStoreExt as _;

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
