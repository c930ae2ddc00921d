//! An outcome the store cannot take at once (a restart, PostgreSQL's lock table full) is written
//! again while the attempt still holds its run, heartbeating meanwhile: the row does not go stale
//! and no other process runs the finished body a second time (the claim storm's duplicates,
//! docs/PERFORMANCE.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::RunStatus;
use slotguard::{Job, JobContext, MemoryBackend, Scheduler, TokioClock};

#[path = "support/faulty_store.rs"]
mod faulty_store;
use faulty_store::Faulty;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// A once-a-minute job on two replicas with a 3 s stale threshold, for a minute; the first
/// replica's first `failures` outcome writes fail. How many bodies ran, and each slot's status and
/// attempt.
async fn run_once_with(failures: u32) -> (u32, Vec<(RunStatus, u32)>) {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:59.500Z"));
    let memory = Arc::new(MemoryBackend::with_clock(Arc::new(clock)));
    let ran = Arc::new(AtomicU32::new(0));
    let mut handles = Vec::new();
    for (id, failures) in [("flaky", failures), ("healthy", 0)] {
        let store = Faulty {
            inner: Arc::clone(&memory),
            finish_failures: AtomicU32::new(failures),
            ..Faulty::default()
        }
        .into_store();
        let ran = Arc::clone(&ran);
        let job = Job::new("settle", "0 * * * * *", move |_ctx: JobContext| {
            ran.fetch_add(1, Ordering::AcqRel);
            async {}
        });
        let builder = Scheduler::builder()
            .store(store)
            .clock(clock)
            .instance_id(id)
            .stale_after(Duration::from_secs(3))
            .recovery_interval(Duration::from_millis(500))
            .job(job);
        // Only the flaky replica's timer offers the slot first: the healthy one starts later.
        handles.push(builder.build().unwrap().try_start().await.unwrap());
        tokio::time::sleep(Duration::from_millis(900)).await;
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    for handle in handles {
        handle.shutdown().await;
    }
    let rows = memory
        .runs()
        .iter()
        .map(|r| (r.status, r.attempt))
        .collect();
    (ran.load(Ordering::Acquire), rows)
}

#[tokio::test(start_paused = true)]
async fn an_outcome_the_store_could_not_take_is_written_again_not_run_again() {
    // Four failures: about 1.5 s of retries, within the 3 s threshold.
    let (ran, rows) = run_once_with(4).await;
    // 01:01:00 and 01:02:00: each ran once, as attempt 1, and its success was recorded.
    assert_eq!(rows, [(RunStatus::Succeeded, 1), (RunStatus::Succeeded, 1)]);
    assert_eq!(ran, 2, "one body per slot");
}
