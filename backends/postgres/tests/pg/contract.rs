//! The contract every backend passes, run against PostgreSQL.

use std::time::Duration;

use slotguard::store::RunStatus;

use slotguard_postgres::PgBackend;

use crate::common::{Connect, TestSchema};

/// A schema of its own per check. Real time: the database clock judges the 1 s staleness.
async fn with_backend(check: impl AsyncFnOnce(&PgBackend)) {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    check(&backend).await;
    backend.close().await;
}

slotguard_tests::contract!(
    slots,
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    with = with_backend,
    stale = Duration::from_secs(1),
);

/// Real time: the database clock judges the 1 s staleness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_fenced_as_the_rows_show_it() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    slotguard_tests::writes_are_fenced(&backend, Duration::from_secs(1)).await;

    // What the contract left behind, as an operator sees it: one run, two attempts, the first
    // abandoned by the re-claim, the second the one that finished.
    let runs = backend.runs(Some("contract_fence")).await.expect("runs");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(run.attempt, 2);
    assert_eq!(run.owner.as_deref(), Some("b"));
    assert!(run.finished_at.is_some());
    let attempts: Vec<_> = run
        .attempts
        .iter()
        .map(|a| (a.attempt, a.owner.as_str(), a.status, a.message.as_deref()))
        .collect();
    assert_eq!(
        attempts,
        [
            (1, "a", RunStatus::Abandoned, Some("heartbeat expired")),
            (2, "b", RunStatus::Succeeded, None),
        ]
    );
    assert!(run.attempts[0].token < run.attempts[1].token);
    assert_eq!(run.token, run.attempts[1].token);
    backend.close().await;
}

/// Real time: the database clock judges the 1 s staleness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_runs_are_recovered_as_the_rows_show_it() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    slotguard_tests::abandoned_runs_are_recovered(&backend, Duration::from_secs(1)).await;

    // The run whose second attempt went stale too, as an operator sees it.
    let runs = backend.runs(Some("contract_recover")).await.expect("runs");
    let dead = &runs[0];
    assert_eq!(dead.status, RunStatus::Dead);
    assert_eq!(
        dead.error_message.as_deref(),
        Some("attempts exhausted (2 of 2)")
    );
    assert_eq!(dead.next_attempt_at, None);
    let attempts: Vec<_> = dead
        .attempts
        .iter()
        .map(|a| (a.attempt, a.status, a.message.as_deref()))
        .collect();
    assert_eq!(
        attempts,
        [
            (1, RunStatus::Abandoned, Some("shutdown")),
            (2, RunStatus::Abandoned, Some("heartbeat expired")),
        ]
    );
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_is_decided_by_the_store_as_the_rows_show_it() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    slotguard_tests::overlap_is_decided_by_the_store(&backend).await;

    // The reasons are recorded with the rows.
    let message = |runs: &[slotguard_postgres::RunRow], minute: &str| {
        let run = runs
            .iter()
            .find(|r| r.key.scheduled_at.format("%M").to_string() == minute)
            .expect("run");
        (run.status, run.error_message.clone(), run.attempts.len())
    };
    let recorded = backend.runs(Some("ov_recorded")).await.expect("runs");
    assert_eq!(
        message(&recorded, "00"),
        (
            RunStatus::Skipped,
            Some("overlap: a previous run is still running".into()),
            0
        )
    );
    assert_eq!(message(&recorded, "01").0, RunStatus::Running);
    let skip = backend.runs(Some("ov_skip")).await.expect("runs");
    assert_eq!(
        message(&skip, "01"),
        (
            RunStatus::Skipped,
            Some("overlap: a previous run is still running".into()),
            0
        )
    );
    let buf = backend.runs(Some("ov_buf")).await.expect("runs");
    assert_eq!(
        message(&buf, "01"),
        (
            RunStatus::Skipped,
            Some("overlap: superseded by a newer slot".into()),
            0
        )
    );
    assert_eq!(message(&buf, "02").0, RunStatus::Running);
    let replace = backend.runs(Some("ov_replace")).await.expect("runs");
    let old = &replace[0];
    assert_eq!(old.status, RunStatus::Abandoned);
    assert_eq!(old.next_attempt_at, None);
    assert_eq!(
        old.error_message.as_deref(),
        Some("replaced by a newer slot")
    );
    assert_eq!(old.attempts[0].status, RunStatus::Abandoned);
    assert_eq!(
        old.attempts[0].message.as_deref(),
        Some("replaced by a newer slot")
    );
    assert_eq!(replace[1].status, RunStatus::Running);
    backend.close().await;
}

/// The lock contract again, with the two owners on two backends (two server sessions), as two
/// replicas would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_are_exclusive_across_sessions() {
    use slotguard::store::LockStore;

    let schema = TestSchema::new();
    let (one, two) = (schema.backend().await, schema.backend().await);
    let keys = [crate::common::lock_key(), crate::common::lock_key()];
    let a = one.try_lock("a", &keys).await.expect("lock");
    assert!(a.iter().all(Option::is_some));
    let b = two.try_lock("b", &keys).await.expect("lock");
    assert!(b.iter().all(Option::is_none));
    one.unlock("a", &keys).await.expect("unlock");
    let b = two.try_lock("b", &keys).await.expect("lock");
    assert!(b.iter().all(Option::is_some));
    two.unlock("b", &keys).await.expect("unlock");
    one.close().await;
    two.close().await;
}

/// One statement for many outcomes, each fenced by its own token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_finishes_are_fenced_as_the_rows_show_it() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    slotguard_tests::batched_finishes_are_fenced(&backend).await;
    let runs = backend.runs(Some("contract_batch")).await.expect("runs");
    let statuses: Vec<RunStatus> = runs.iter().map(|r| r.status).collect();
    assert!(statuses.contains(&RunStatus::Pending), "{statuses:?}");
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == RunStatus::Succeeded)
            .count(),
        2
    );
    for run in &runs {
        assert_eq!(run.attempts.len(), 1);
        assert_ne!(run.attempts[0].status, RunStatus::Running, "{run:?}");
    }
    backend.close().await;
}
