//! The admin-store contract ([`slotguard_tests::admin`]) against a fresh SQLite file per test, and
//! what only SQLite shows: two pools on one file racing, the inherent listing, and every table
//! surviving hostile names.
//!
//! `SqliteBackend::runs(job)` (inherent) shares its name with `AdminStore::runs(filter)`, so the trait
//! method is called as `AdminStore::runs(&backend, &filter)`.

use std::ops::Deref;

use slotguard::store::AdminStore;
use slotguard_sqlite::SqliteBackend;
use slotguard_tests::admin;

/// A backend on a file of its own, removed with it.
struct Fresh {
    backend: SqliteBackend,
    _dir: tempfile::TempDir,
}

impl Deref for Fresh {
    type Target = SqliteBackend;

    fn deref(&self) -> &SqliteBackend {
        &self.backend
    }
}

async fn open(dir: &tempfile::TempDir) -> SqliteBackend {
    SqliteBackend::open(dir.path().join("admin.db"))
        .await
        .expect("open")
}

async fn fresh() -> Fresh {
    let dir = tempfile::tempdir().expect("temp dir");
    Fresh {
        backend: open(&dir).await,
        _dir: dir,
    }
}

slotguard_tests::admin_contract!(
    #[tokio::test]
    fresh
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_are_done_once() {
    let backend = fresh().await;
    admin::concurrent_retries_are_done_once(std::slice::from_ref(&backend.backend)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_through_two_handles_are_done_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Two pools on the file, as two processes would have: they meet on SQLite's write lock only.
    admin::concurrent_retries_are_done_once(&[open(&dir).await, open(&dir).await]).await;
}

#[tokio::test]
async fn names_outside_the_rule_are_bad_input() {
    let backend = fresh().await;
    admin::names_outside_the_rule_are_bad_input(&backend.backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_triggers_each_get_a_run() {
    let backend = fresh().await;
    admin::concurrent_triggers_each_get_a_run(&backend.backend).await;
}

/// The inherent listing reads the same records as the admin one, ordered by job, slot and partition.
#[tokio::test]
async fn the_inherent_listing_reads_what_the_admin_listing_reads() {
    let backend = fresh().await;
    admin::runs_are_listed_newest_first_by_every_filter(&*backend).await;
    let mut by_trait = AdminStore::runs(&*backend, &admin::filter(100))
        .await
        .expect("runs");
    assert_eq!(by_trait.len(), 12);
    // The ids of one batch follow the order of its requests, so within a slot the admin listing
    // reads them back in reverse request order.
    let rows: Vec<(&str, String, &str)> = by_trait
        .iter()
        .filter(|r| r.key.job == "report" || r.key.job == "other")
        .map(|r| {
            let k = &r.key;
            (
                k.job.as_str(),
                k.scheduled_at.format("%H:%M").to_string(),
                k.partition.as_str(),
            )
        })
        .collect();
    let row = |job, time: &str, partition| (job, time.to_owned(), partition);
    assert_eq!(
        rows,
        [
            row("report", "02:00", ""),
            row("report", "01:00", "eu"),
            row("other", "01:00", ""),
            row("report", "01:00", ""),
            row("report", "00:00", ""),
        ]
    );
    by_trait.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(backend.runs(None).await.expect("runs"), by_trait);
}

/// Hostile names leave every table in place.
#[tokio::test]
async fn hostile_names_leave_every_table() {
    let backend = fresh().await;
    admin::hostile_job_names_round_trip_through_every_operation(&*backend, &admin::hostile_names())
        .await;
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'slotguard\\_%' ESCAPE '\\'",
    )
    .fetch_one(backend.pool())
    .await
    .expect("tables");
    assert_eq!(tables, 10, "every table is still there");
}

/// Eight operators create one schedule at once through two handles on the file: one version is
/// written, the others are told it exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creations_of_one_schedule_write_one_version() {
    use slotguard::store::{ScheduleStore, ScheduleWrite};

    let dir = tempfile::tempdir().expect("temp dir");
    let handles = [open(&dir).await, open(&dir).await];
    let mut set = tokio::task::JoinSet::new();
    for operator in 0..8 {
        let backend = handles[operator % 2].clone();
        set.spawn(async move {
            let spec = admin::schedule_spec("tenant_report", &format!("{operator} 2 * * *"), "");
            let by = format!("operator-{operator}");
            backend
                .write_schedule("race", 0, Some(&spec), &by, "race")
                .await
        });
    }
    let mut written = 0;
    while let Some(answer) = set.join_next().await {
        match answer.expect("operator panicked").expect("write") {
            ScheduleWrite::Written(v) => {
                assert_eq!(v.version, 1);
                written += 1;
            }
            ScheduleWrite::Stale { current } => assert_eq!(current, 1),
        }
    }
    assert_eq!(written, 1);
    let history = handles[1].schedule_history("race").await.expect("history");
    assert_eq!(history.len(), 1);
    let changes = handles[0].schedule_changes(0, 10).await.expect("changes");
    assert_eq!(changes.versions, history);
    assert!(changes.fresh_at >= history[0].changed_at);
}
