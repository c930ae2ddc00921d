//! The contract every backend passes, run against PostgreSQL.

use std::time::Duration;

use slotguard::store::RunStatus;

use crate::common::TestSchema;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_exclusive() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    slotguard_tests::claims_are_exclusive(&backend).await;
    backend.close().await;
}

/// Real time: the database clock judges the 1 s staleness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_fenced() {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_are_exclusive() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    slotguard_tests::locks_are_exclusive(&backend).await;
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
