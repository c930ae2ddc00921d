//! A claim answered `Contended` (another claim of the job in flight, as PostgreSQL answers a claim
//! that may defer) is not a skip: the slot is looked at again, and after two such answers its
//! claim waits instead, so a job claimed without pause elsewhere still has its slot decided. Only
//! a claim made without the job's lock (held elsewhere, on a later look) may defer; the lock
//! holder's claim, and run-once's, wait. In paused tokio time, on the memory store behind a
//! wrapper that answers `Contended` to every claim that may defer.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{LockStore as _, RunStatus};
use slotguard::{
    Clock, GuardLevel, Job, JobContext, MemoryBackend, RunOnce, Scheduler, SlotSource, TokioClock,
};

#[path = "support/faulty_store.rs"]
mod faulty_store;
use faulty_store::Faulty;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// The bodies that ran: slot and start, by the clock.
type Starts = Arc<Mutex<Vec<(DateTime<Utc>, DateTime<Utc>)>>>;

/// A once-a-minute `slot` job on a store whose every claim that may defer is contended.
fn contended(clock: TokioClock) -> (Arc<Faulty>, Scheduler, Starts) {
    let memory = Arc::new(MemoryBackend::with_clock(Arc::new(clock)));
    let faulty = Arc::new(Faulty {
        inner: memory,
        contended: AtomicBool::new(true),
        ..Faulty::default()
    });
    let starts: Starts = Arc::default();
    let s = Arc::clone(&starts);
    let job = Job::new("settle", "0 * * * * *", move |ctx: JobContext| {
        s.lock().unwrap().push((ctx.scheduled_at(), clock.now()));
        async {}
    })
    .guard(GuardLevel::Slot);
    let scheduler = Scheduler::builder()
        .store(Faulty::store_of(&faulty))
        .clock(clock)
        .instance_id("r")
        .load_spread(Duration::ZERO)
        .job(job)
        .build()
        .unwrap();
    (faulty, scheduler, starts)
}

#[tokio::test(start_paused = true)]
async fn a_contended_slot_is_looked_at_again_and_then_waits() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:59.500Z"));
    let (faulty, scheduler, starts) = contended(clock);
    // Another process holds the job's lock: from the second look the row decides.
    let key = slotguard::derive_lock_key("default", "settle");
    assert!(faulty.inner.try_lock("ghost", &[key]).await.unwrap()[0].is_some());
    let handle = scheduler.try_start().await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    handle.shutdown().await;

    let defers = faulty.defers.lock().unwrap().clone();
    assert_eq!(
        defers,
        [true, true, false],
        "two looks may defer, the third waits"
    );
    let starts = starts.lock().unwrap().clone();
    let slot = at("2026-03-02T01:01:00Z");
    assert_eq!(starts.len(), 1, "the slot ran once: {starts:?}");
    assert_eq!(starts[0].0, slot);
    // Looks 250 ms apart: the lock held elsewhere, contended twice, then the claim waits.
    let lag = starts[0].1 - slot;
    assert!(
        lag >= chrono::Duration::milliseconds(750) && lag < chrono::Duration::milliseconds(850),
        "started {lag} after its slot"
    );
    let runs = faulty.inner.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!((runs[0].status, runs[0].attempt), (RunStatus::Succeeded, 1));
}

/// The lock holder's claim waits for a claim of its job in flight: it never defers.
#[tokio::test(start_paused = true)]
async fn the_lock_holders_claim_waits() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:59.500Z"));
    let (faulty, scheduler, starts) = contended(clock);
    let handle = scheduler.try_start().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    handle.shutdown().await;
    assert_eq!(*faulty.defers.lock().unwrap(), [false]);
    let starts = starts.lock().unwrap().clone();
    assert_eq!(
        starts,
        [(at("2026-03-02T01:01:00Z"), at("2026-03-02T01:01:00Z"))]
    );
}

#[tokio::test(start_paused = true)]
async fn run_once_waits_for_a_claim_in_flight() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:01:00.100Z"));
    let (faulty, scheduler, starts) = contended(clock);
    let ran = scheduler.run_once("settle", SlotSource::Latest).await;
    assert!(
        matches!(ran, Ok(RunOnce::Succeeded { attempt: 1 })),
        "{ran:?}"
    );
    assert_eq!(*faulty.defers.lock().unwrap(), [false]);
    assert_eq!(starts.lock().unwrap().len(), 1);
}
