//! The backend contract against the memory backend, in paused time.

use std::sync::Arc;
use std::time::Duration;

use slotguard::{MemoryBackend, TokioClock};

/// A memory backend on tokio's (paused) clock.
async fn with_backend(check: impl AsyncFnOnce(&MemoryBackend)) {
    let backend = MemoryBackend::with_clock(Arc::new(TokioClock::starting_at(chrono::Utc::now())));
    check(&backend).await;
}

slotguard_tests::contract!(
    slots,
    #[tokio::test(start_paused = true)]
    with = with_backend,
    stale = Duration::from_secs(2),
);
