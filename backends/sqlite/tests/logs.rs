//! Operator text in the log on SQLite: no reason, operator name or partition forges a log line.

use std::sync::Arc;

use slotguard_sqlite::SqliteBackend;

#[test]
fn no_operator_text_forges_a_log_line() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = rt
        .block_on(SqliteBackend::open(dir.path().join("logs.db")))
        .expect("open");
    slotguard_tests::logs::no_operator_text_forges_a_log_line(Arc::new(backend), &rt, 48);
}
