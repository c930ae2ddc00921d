//! The operations against a real SQLite store, run as a process: every scenario of
//! `common/ops.rs`, and how the CLI finds (or refuses) the file.

#[path = "common/ops.rs"]
mod ops;

use std::fs;
use std::path::{Path, PathBuf};

use ops::{Fixture, REPORT, run};
use slotguard_sqlite::SqliteBackend;

/// A path of the test's own under Cargo's scratch directory, removed (with its WAL files) first.
fn scratch(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ops-{name}-{}.db", std::process::id()));
    remove(&path);
    path
}

fn remove(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = fs::remove_file(file);
    }
}

/// A fresh SQLite store, deleted when the fixture is dropped.
fn fixture(name: &str) -> Fixture {
    let path = scratch(name);
    let url = format!("sqlite:{}", path.display());
    let open = {
        let path = path.clone();
        async move { SqliteBackend::open(&path).await.expect("open the store") }
    };
    let backdate = {
        let url = url.clone();
        move || {
            let url = url.clone();
            Box::pin(async move {
                let pool = sqlx::SqlitePool::connect(&url).await.expect("connect");
                sqlx::query("UPDATE slotguard_jobs SET registered_at = ?1")
                    .bind(ops::instant(ops::FIRST_SEEN).timestamp_millis())
                    .execute(&pool)
                    .await
                    .expect("set the first registration back");
                pool.close().await;
            }) as std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>
        }
    };
    Fixture::new(
        Fixture::runtime(),
        open,
        vec!["--database-url".to_owned(), url],
        async move { remove(&path) },
    )
    .with_backdate(Box::new(backdate))
}

#[test]
fn runs_lists_and_filters() {
    ops::runs_lists_and_filters(&fixture("runs"));
}

#[test]
fn missed_lists_slots_without_rows() {
    ops::missed_lists_slots_without_rows(&fixture("missed"));
}

#[test]
fn missed_without_a_job_reads_every_job() {
    ops::missed_without_a_job_reads_every_job(&fixture("missed-all"));
}

#[test]
fn retry_makes_a_failed_run_pending() {
    ops::retry_makes_a_failed_run_pending(&fixture("retry"));
}

#[test]
fn pause_and_resume() {
    ops::pause_and_resume(&fixture("pause"));
}

#[test]
fn replicas_and_inactive_jobs() {
    ops::replicas_and_inactive_jobs(&fixture("replicas"));
}

#[test]
fn trigger_creates_a_manual_run() {
    ops::trigger_creates_a_manual_run(&fixture("trigger"));
}

#[test]
fn backfill_dry_run_then_execute() {
    ops::backfill_dry_run_then_execute(&fixture("backfill"));
}

#[test]
fn backfill_refuses_year_zero_and_history_unless_asked() {
    ops::backfill_refuses_year_zero_and_history_unless_asked(&fixture("backfill-early"));
}

#[test]
fn cancel_a_running_run() {
    ops::cancel_a_running_run(&fixture("cancel"));
}

#[test]
fn audit_lists_changes() {
    ops::audit_lists_changes(&fixture("audit"));
}

#[test]
fn hostile_input_changes_nothing() {
    ops::hostile_input_changes_nothing(&fixture("hostile"));
}

#[test]
fn limits_follow_the_admin_rule() {
    ops::limits_follow_the_admin_rule(&fixture("limits"));
}

#[test]
fn trigger_of_a_paused_job_says_it_waits() {
    ops::trigger_of_a_paused_job_says_it_waits(&fixture("paused-trigger"));
}

#[test]
fn the_documented_one_run_command_shows_that_run() {
    ops::the_documented_one_run_command_shows_that_run(&fixture("one-run"));
}

#[test]
fn run_shows_one_run_with_its_attempts() {
    ops::run_shows_one_run_with_its_attempts(&fixture("run"));
}

#[test]
fn retry_failed_retries_a_range() {
    ops::retry_failed_retries_a_range(&fixture("retry-failed"));
}

#[test]
fn trigger_wait_follows_the_run() {
    ops::trigger_wait_follows_the_run(&fixture("trigger-wait"));
}

#[test]
fn input_is_checked_before_the_store() {
    ops::input_is_checked_before_the_store(&fixture("early"));
}

/// Runs `jobs` on `url` and returns the one-line error, which must come with exit 2.
fn refused(url: &str) -> String {
    run(&["jobs", "--database-url", url], &[])
        .fails(2)
        .to_owned()
}

#[test]
fn a_missing_file_is_not_created() {
    let path = scratch("missing");
    let message = refused(&format!("sqlite:{}", path.display()));
    assert_eq!(
        message,
        format!(
            "no SQLite store at `{}`: the file does not exist",
            path.display()
        )
    );
    assert!(!path.exists(), "the CLI created {}", path.display());
    // `sqlite://` before a path is accepted too.
    let message = refused(&format!("sqlite://{}", path.display()));
    assert!(message.starts_with("no SQLite store at"), "{message}");
    assert!(!path.exists());
}

#[test]
fn a_file_that_is_not_a_store_is_left_alone() {
    // An empty file (an empty SQLite database) and another application's database: no slotguard
    // tables are created in them.
    let empty = scratch("empty");
    fs::write(&empty, b"").expect("write");
    let message = refused(&format!("sqlite:{}", empty.display()));
    assert!(
        message.starts_with("no slotguard store in `")
            && message.contains("has no slotguard tables"),
        "{message}"
    );
    assert_eq!(fs::metadata(&empty).expect("still there").len(), 0);
    remove(&empty);

    // Not a database at all.
    let text = scratch("text");
    fs::write(&text, "just some text, long enough to fill a header of a hundred bytes or so ........................................").expect("write");
    let message = refused(&format!("sqlite:{}", text.display()));
    assert!(message.contains("file is not a database"), "{message}");
    remove(&text);

    // A directory.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    assert!(refused(&format!("sqlite:{}", dir.display())).ends_with("is not a file"));
}

#[test]
fn no_store_or_a_bad_url_is_bad_input() {
    assert_eq!(
        run(&["jobs"], &[]).fails(2),
        "no store given: pass --database-url postgres://... or sqlite:PATH (or set SLOTGUARD_DATABASE_URL)"
    );
    assert_eq!(
        run(&["jobs"], &[("SLOTGUARD_DATABASE_URL", Some(""))]).fails(2),
        "no store given: pass --database-url postgres://... or sqlite:PATH (or set SLOTGUARD_DATABASE_URL)"
    );
    assert_eq!(
        refused("mysql://root:secret@db/app"),
        "--database-url must start with postgres://, postgresql:// or sqlite:"
    );
    assert!(refused("sqlite:").starts_with("sqlite: needs a path"));
    // Every operation needs the store; `next` does not.
    run(&["runs", REPORT], &[]).fails(2);
    run(&["next", "@daily", "--count", "1"], &[]).ok();
}

#[test]
fn missed_with_no_job_countable_fails() {
    ops::missed_with_no_job_countable_fails(&fixture("missed-with-no-job-c"));
}

#[test]
fn cancel_says_what_happens_to_a_pending_run() {
    ops::cancel_says_what_happens_to_a_pending_run(&fixture("cancel-says-what-hap"));
}

#[test]
fn a_second_pause_and_a_needless_resume_are_refused() {
    ops::a_second_pause_and_a_needless_resume_are_refused(&fixture("a-second-pause-and-a"));
}

#[test]
fn help_lists_every_exit_code() {
    ops::help_lists_every_exit_code();
}

#[test]
fn stored_schedules_add_change_remove() {
    ops::stored_schedules_add_change_remove(&fixture("schedules"));
}

#[test]
fn schedule_input_names_the_argument() {
    ops::schedule_input_names_the_argument(&fixture("schedule-input"));
}

#[test]
fn schedule_preview_stores_nothing() {
    ops::schedule_preview_stores_nothing(&fixture("preview"));
}

#[test]
fn holidays_are_added_removed_and_listed() {
    ops::holidays_are_added_removed_and_listed(&fixture("holidays"));
}

#[test]
fn skip_and_unskip_a_slot() {
    ops::skip_and_unskip_a_slot(&fixture("skip"));
}
