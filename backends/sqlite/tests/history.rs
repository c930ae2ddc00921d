//! History retention and the replica registry through two schedulers on one SQLite file, in real
//! time ([`slotguard_tests::history`]).

use slotguard_sqlite::SqliteBackend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_second_jobs_old_runs_are_pruned_while_replicas_are_listed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = SqliteBackend::open(dir.path().join("history.db"))
        .await
        .expect("open");
    slotguard_tests::history::a_per_second_jobs_old_runs_are_pruned_while_replicas_are_listed(
        backend.clone(),
    )
    .await;
    // Attempts went with their runs: none is left without one.
    let orphans: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM slotguard_job_run_attempts a \
         WHERE NOT EXISTS (SELECT 1 FROM slotguard_job_runs r WHERE r.id = a.run_id)",
    )
    .fetch_one(backend.pool())
    .await
    .expect("count");
    assert_eq!(orphans, 0);
}
