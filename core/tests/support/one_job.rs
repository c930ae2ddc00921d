//! One job on a memory store, its clock starting at a given instant of paused time.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use slotguard::{Job, MemoryBackend, Scheduler, SchedulerHandle, TokioClock};

/// An RFC 3339 instant.
pub(crate) fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// A started scheduler of `job` on a memory store whose clock starts at `start`.
pub(crate) async fn start(job: Job, start: &str) -> (MemoryBackend, SchedulerHandle) {
    let clock = TokioClock::starting_at(at(start));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let handle = Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .jobs(vec![job])
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap();
    (store, handle)
}
