//! Operators' holiday overrides followed by two schedulers on one SQLite file, in real time
//! ([`slotguard_tests::overrides`]).

use slotguard_sqlite::SqliteBackend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_follow_an_added_and_removed_holiday() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = SqliteBackend::open(dir.path().join("overrides.db"))
        .await
        .expect("open");
    slotguard_tests::overrides::two_replicas_follow_an_added_and_removed_holiday(backend).await;
}
