//! Operator text in the log on the memory backend, with the runtime's own logs of the same changes.

use slotguard::MemoryBackend;

#[test]
fn no_operator_text_forges_a_log_line() {
    slotguard_tests::logs::no_operator_text_forges_a_log_line(
        || async { MemoryBackend::new() },
        48,
    );
}
