//! Operator text in the log on SQLite: no reason, operator name or partition forges a log line.

use slotguard_sqlite::SqliteBackend;

#[test]
fn no_operator_text_forges_a_log_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("logs.db");
    slotguard_tests::logs::no_operator_text_forges_a_log_line(
        || async move { SqliteBackend::open(path).await.expect("open") },
        48,
    );
}
