//! The crate's own migrations: applied once however many processes open a fresh file together, and
//! recorded in its own table.

use std::sync::Arc;

use slotguard_sqlite::{SqliteBackend, SqliteError};
use tokio::sync::Barrier;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_backends_migrate_a_fresh_file_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("fresh.db");
    let barrier = Arc::new(Barrier::new(5));
    let opens: Vec<_> = (0..5)
        .map(|_| {
            let (path, barrier) = (path.clone(), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                SqliteBackend::open(&path).await
            })
        })
        .collect();
    let mut backends = Vec::new();
    for open in opens {
        backends.push(open.await.expect("task").expect("open"));
    }
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM slotguard_migrations ORDER BY version")
            .fetch_all(backends[0].pool())
            .await
            .expect("migrations");
    assert_eq!(
        versions,
        (1..=SqliteBackend::schema_version()).collect::<Vec<_>>()
    );
    let fencing: Vec<i64> = sqlx::query_scalar("SELECT last_token FROM slotguard_fencing")
        .fetch_all(backends[0].pool())
        .await
        .expect("fencing");
    assert_eq!(fencing, vec![0], "the counter row is seeded once");
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(backends[4].pool())
        .await
        .expect("journal mode");
    assert_eq!(mode, "wal");
    // Every table is ours: the application's namespace is untouched.
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )
    .fetch_all(backends[0].pool())
    .await
    .expect("tables");
    assert!(
        tables.iter().all(|t| t.starts_with("slotguard_")),
        "{tables:?}"
    );
    // Reopening applies nothing.
    drop(backends);
    SqliteBackend::open(&path).await.expect("reopen");
}

#[tokio::test]
async fn a_file_from_an_incompatible_version_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.db");
    let backend = SqliteBackend::open(&path).await.expect("open");
    sqlx::query("UPDATE slotguard_migrations SET checksum = checksum + 1 WHERE version = 1")
        .execute(backend.pool())
        .await
        .expect("tamper");
    let err = SqliteBackend::open(&path)
        .await
        .expect_err("edited migration");
    assert!(
        matches!(err, SqliteError::MigrationChanged { version: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains(&*path.to_string_lossy()), "{err}");

    sqlx::query("UPDATE slotguard_migrations SET checksum = checksum - 1 WHERE version = 1")
        .execute(backend.pool())
        .await
        .expect("restore");
    sqlx::query(
        "INSERT INTO slotguard_migrations (version, description, checksum, applied_at) VALUES (99, 'future', 0, 0)",
    )
    .execute(backend.pool())
    .await
    .expect("future");
    let err = SqliteBackend::open(&path).await.expect_err("newer file");
    assert!(
        matches!(err, SqliteError::TooNew { found: 99, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn an_unopenable_path_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("no/such/dir/slotguard.db");
    let err = SqliteBackend::open(&path)
        .await
        .expect_err("missing directory");
    assert!(matches!(err, SqliteError::Open { .. }), "{err}");
    assert!(
        err.to_string().contains("no/such/dir/slotguard.db"),
        "{err}"
    );
    assert!(err.is_unavailable());
}
