//! Operator text in the log on the memory backend, with the runtime's own logs of the same changes.

use std::sync::Arc;

use slotguard::MemoryBackend;

#[test]
fn no_operator_text_forges_a_log_line() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    slotguard_tests::logs::no_operator_text_forges_a_log_line(
        Arc::new(MemoryBackend::new()),
        &rt,
        48,
    );
}
