//! Operator text in the log on PostgreSQL: no reason, operator name or partition forges a log line.

use crate::common::{Connect, TestSchema};

#[test]
fn no_operator_text_forges_a_log_line() {
    let schema = TestSchema::new();
    slotguard_tests::logs::no_operator_text_forges_a_log_line(|| schema.backend(), 24);
}
