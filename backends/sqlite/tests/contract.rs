//! The backend contract every store passes, against a fresh SQLite file per test. Staleness is judged
//! by the host clock inside SQLite, so these run in real time.

use std::time::Duration;

use slotguard_sqlite::SqliteBackend;
use slotguard_tests as contract;

async fn backend(dir: &tempfile::TempDir) -> SqliteBackend {
    SqliteBackend::open(dir.path().join("slotguard.db"))
        .await
        .expect("open")
}

#[tokio::test]
async fn claims_are_exclusive() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::claims_are_exclusive(&backend(&dir).await).await;
}

#[tokio::test]
async fn writes_are_fenced() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::writes_are_fenced(&backend(&dir).await, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn locks_are_exclusive() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::locks_are_exclusive(&backend(&dir).await).await;
}

#[tokio::test]
async fn retries_become_due() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::retries_become_due(&backend(&dir).await).await;
}

#[tokio::test]
async fn abandoned_runs_are_recovered() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::abandoned_runs_are_recovered(&backend(&dir).await, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn overlap_is_decided_by_the_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::overlap_is_decided_by_the_store(&backend(&dir).await).await;
}

/// The contract again, with every call going to a different backend on the same file: what two
/// processes on one host see.
#[tokio::test]
async fn claims_are_exclusive_across_pools() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (backend(&dir).await, backend(&dir).await);
    let stale = Duration::from_secs(60);
    let req = [contract::request("pools", "2026-01-01T00:00:00Z", stale)];
    use slotguard::store::{Claim, SlotStore};
    assert!(matches!(
        a.claim("a", &req).await.expect("claim")[0],
        Claim::Won(_)
    ));
    assert!(matches!(
        b.claim("b", &req).await.expect("claim")[0],
        Claim::Taken { .. }
    ));
}

#[tokio::test]
async fn slots_ahead_of_the_store_clock_are_not_due() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::slots_ahead_of_the_store_clock_are_not_due(&backend(&dir).await).await;
}

#[tokio::test]
async fn batched_finishes_are_fenced() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::batched_finishes_are_fenced(&backend(&dir).await).await;
}

#[tokio::test]
async fn due_work_is_one_at_a_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::due_work_is_one_at_a_time(&backend(&dir).await).await;
}

#[tokio::test]
async fn newer_slots_fence_stale_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::newer_slots_fence_stale_runs(&backend(&dir).await, Duration::from_secs(1)).await;
}

#[tokio::test]
async fn existing_slots_are_found() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::existing_slots_are_found(&backend(&dir).await).await;
}

#[tokio::test]
async fn lock_tokens_rise() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::lock_tokens_rise(&backend(&dir).await).await;
}

#[tokio::test]
async fn slots_are_queued_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::slots_are_queued_once(&backend(&dir).await).await;
}

#[tokio::test]
async fn due_work_keeps_its_limits() {
    let dir = tempfile::tempdir().expect("temp dir");
    contract::due_work_keeps_its_limits(&backend(&dir).await).await;
}
