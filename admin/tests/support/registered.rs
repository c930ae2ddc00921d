//! A memory backend whose jobs were registered a year ago, for tests of past slots.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};
use slotguard::MemoryBackend;
use slotguard::store::{AdminStore, JobDefinition};

/// A store clock that can be set back, by whole seconds.
#[derive(Debug, Default)]
struct SetBack(AtomicI64);

impl slotguard::Clock for SetBack {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() - chrono::Duration::seconds(self.0.load(Ordering::Relaxed))
    }
}

/// A memory backend on the system clock whose `jobs` were registered a year ago, so that the past
/// slots a test lists, retries and backfills are from after the job existed.
pub(crate) async fn registered_a_year_ago(jobs: &[JobDefinition]) -> MemoryBackend {
    let clock = Arc::new(SetBack::default());
    clock.0.store(365 * 86_400, Ordering::Relaxed);
    let backend = MemoryBackend::with_clock(clock.clone());
    backend.register_jobs(jobs).await.unwrap();
    clock.0.store(0, Ordering::Relaxed);
    backend
}
