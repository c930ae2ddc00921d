//! Lease locks: kept alive by renewal, lost (and reported lost) without it.

use std::time::Duration;

use slotguard::store::LockStore;
use slotguard_sqlite::SqliteBackend;
use tokio::time::{Instant, timeout};

async fn open(path: &std::path::Path, ttl: Duration, renew_every: Duration) -> SqliteBackend {
    SqliteBackend::builder(path)
        .lease_ttl(ttl)
        .renew_every(renew_every)
        .open()
        .await
        .expect("open")
}

async fn holder(backend: &SqliteBackend, key: i64) -> Option<(String, i64)> {
    sqlx::query_as("SELECT owner, token FROM slotguard_locks WHERE lock_key = ?1")
        .bind(key)
        .fetch_optional(backend.pool())
        .await
        .expect("read lock")
}

#[tokio::test]
async fn a_renewed_lease_outlives_its_ttl() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("leases.db");
    // Four renewals per TTL: a slow renewal under a loaded machine still lands in time.
    let ttl = Duration::from_millis(1_000);
    let a = open(&path, ttl, ttl / 4).await;
    let b = open(&path, ttl, ttl / 4).await;
    let lease = a.try_lock("a", &[1]).await.expect("lock")[0]
        .clone()
        .expect("free");
    tokio::time::sleep(ttl * 5 / 2).await;
    assert!(b.try_lock("b", &[1]).await.expect("lock")[0].is_none());
    assert!(!lease.lost.is_cancelled());
    // Not re-entrant: the holder itself cannot take it twice.
    assert!(a.try_lock("a", &[1]).await.expect("lock")[0].is_none());
    a.unlock("a", &[1]).await.expect("unlock");
    assert!(holder(&a, 1).await.is_none());
    assert!(b.try_lock("b", &[1]).await.expect("lock")[0].is_some());
}

#[tokio::test]
async fn an_unrenewed_lease_expires_and_its_holder_learns_it_on_the_next_renewal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("leases.db");
    let ttl = Duration::from_millis(500);
    // "a" renews far too rarely, as a process paused for longer than the TTL would.
    let renew_a = Duration::from_millis(2_000);
    // Before "a" opens: its first renewal is due no earlier than `started + renew_a`.
    let started = Instant::now();
    let a = open(&path, ttl, renew_a).await;
    let b = open(&path, ttl, ttl / 3).await;
    let lease_a = a.try_lock("a", &[7]).await.expect("lock")[0]
        .clone()
        .expect("free");
    let (_, token_a) = holder(&a, 7).await.expect("held");

    // Still live: nobody else gets it.
    assert!(b.try_lock("b", &[7]).await.expect("lock")[0].is_none());
    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    // Lapsed: "b" takes it over, with a higher fencing token.
    let lease_b = b.try_lock("b", &[7]).await.expect("lock")[0]
        .clone()
        .expect("lapsed lease taken over");
    let (owner, token_b) = holder(&b, 7).await.expect("held");
    assert_eq!(owner, "b");
    assert!(token_b > token_a);
    assert!(
        !lease_a.lost.is_cancelled(),
        "nothing has told \"a\" yet: its renewal has not run"
    );

    // "a"'s next renewal finds the row taken and reports the loss.
    timeout(renew_a * 2, lease_a.lost.cancelled())
        .await
        .expect("a's renewal reports the loss");
    let noticed = started.elapsed();
    assert!(
        noticed >= renew_a,
        "noticed at {noticed:?}, before a's renewal was due"
    );
    // "a"'s failed renewal did not disturb "b", whose renewals keep the lease.
    tokio::time::sleep(ttl * 2).await;
    assert!(!lease_b.lost.is_cancelled());
    assert_eq!(holder(&b, 7).await.map(|(o, _)| o).as_deref(), Some("b"));
    // A late unlock by "a" deletes only its own rows: "b" still holds the key.
    a.unlock("a", &[7]).await.expect("unlock");
    assert_eq!(holder(&b, 7).await.map(|(o, _)| o).as_deref(), Some("b"));
}

#[tokio::test]
async fn a_deleted_lease_is_reported_lost() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("leases.db");
    let ttl = Duration::from_millis(900);
    let a = open(&path, ttl, ttl / 3).await;
    let lease = a.try_lock("a", &[3, 4]).await.expect("lock");
    let (three, four) = (lease[0].clone().expect("3"), lease[1].clone().expect("4"));
    // An operator removes one row by hand.
    sqlx::query("DELETE FROM slotguard_locks WHERE lock_key = 3")
        .execute(a.pool())
        .await
        .expect("delete");
    timeout(ttl, three.lost.cancelled())
        .await
        .expect("loss reported within a renewal interval");
    assert!(!four.lost.is_cancelled());
}

#[tokio::test]
async fn close_releases_held_leases_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("leases.db");
    let ttl = Duration::from_secs(30);
    let a = open(&path, ttl, ttl / 3).await;
    let b = open(&path, ttl, ttl / 3).await;
    assert!(a.try_lock("a", &[5]).await.expect("lock")[0].is_some());
    a.close().await.expect("close");
    assert!(b.try_lock("b", &[5]).await.expect("lock")[0].is_some());
    assert!(
        a.try_lock("a", &[6]).await.is_err(),
        "a closed backend refuses work"
    );
}

#[tokio::test]
async fn impossible_settings_are_refused_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("settings.db");
    let err = SqliteBackend::builder(&path)
        .lease_ttl(Duration::ZERO)
        .open()
        .await
        .expect_err("zero TTL");
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");
}
