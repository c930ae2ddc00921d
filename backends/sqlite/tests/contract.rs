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

/// A fresh SQLite file per check.
async fn with_backend(check: impl AsyncFnOnce(&SqliteBackend)) {
    let dir = tempfile::tempdir().expect("temp dir");
    check(&backend(&dir).await).await;
}

contract::contract!(
    slots,
    #[tokio::test]
    with = with_backend,
    stale = Duration::from_secs(1)
);

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
