//! Operator text in the log on PostgreSQL: no reason, operator name or partition forges a log line.

use std::sync::Arc;

use crate::common::{Connect, TestSchema};

#[test]
fn no_operator_text_forges_a_log_line() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let schema = TestSchema::new();
    let backend = rt.block_on(schema.backend());
    slotguard_tests::logs::no_operator_text_forges_a_log_line(Arc::new(backend), &rt, 24);
}
