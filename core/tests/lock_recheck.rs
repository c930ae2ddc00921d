//! A `slot`-level job whose lock another process holds at the slot's tick, in paused tokio time on
//! the memory backend. The usual holder is a replica working on the same slot; these tests make the
//! holder one that is not: one that died between taking the lock and claiming, and one that is
//! running another slot of the job. Either way the slot must end up run or recorded, never lost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{ClaimRequest, LockStore, RunStatus, SlotKey, SlotStore, Trigger};
use slotguard::{Clock, Job, JobContext, MemoryBackend, Overlap, Scheduler, TokioClock};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

/// (slot, wall time the body started).
type Starts = Arc<Mutex<Vec<(DateTime<Utc>, DateTime<Utc>)>>>;

/// One replica with one job every 10 s (`0/10`), started at 01:00:00.500; returns its lock key.
async fn replica(
    store: &MemoryBackend,
    clock: TokioClock,
    starts: &Starts,
) -> (slotguard::SchedulerHandle, i64) {
    let starts = Arc::clone(starts);
    let job = Job::new("settle", "*/10 * * * * *", move |ctx: JobContext| {
        let starts = Arc::clone(&starts);
        async move {
            starts
                .lock()
                .unwrap()
                .push((ctx.scheduled_at(), clock.now()));
            sleep(0.5).await;
        }
    });
    let scheduler = Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id("replica")
        .stale_after(Duration::from_secs(30))
        .job(job)
        .build()
        .unwrap();
    let key = scheduler.jobs().next().unwrap().lock_key;
    (scheduler.try_start().await.unwrap(), key)
}

#[tokio::test(start_paused = true)]
async fn a_slot_whose_lock_holder_died_before_claiming_runs_after_a_second_look() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let starts = Starts::default();
    let (handle, key) = replica(&store, clock, &starts).await;
    // A process takes the job's lock just before 01:00:10 and dies 50 ms after it, without a row.
    sleep(9.4).await;
    assert!(store.try_lock("ghost", &[key]).await.unwrap()[0].is_some());
    sleep(0.15).await;
    assert!(store.break_lock(key), "the ghost's session ends");
    sleep(2.0).await;
    handle.shutdown().await;
    let runs = store.runs();
    let run = runs
        .iter()
        .find(|r| r.key.scheduled_at == at("2026-03-02T01:00:10Z"))
        .expect("01:00:10 has a row");
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 1, "{starts:?}");
    let late = starts[0].1 - starts[0].0;
    assert!(
        late >= chrono::Duration::milliseconds(250) && late < chrono::Duration::milliseconds(300),
        "run on the second look, 250 ms after the tick: {late}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slot_whose_lock_is_held_for_another_running_slot_is_recorded_skipped() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let starts = Starts::default();
    let (handle, key) = replica(&store, clock, &starts).await;
    // Another process (another version of the schedule, say) runs 01:00:07 of the same job and holds
    // its lock across 01:00:10.
    sleep(6.6).await;
    assert!(store.try_lock("other", &[key]).await.unwrap()[0].is_some());
    let other_slot = at("2026-03-02T01:00:07Z");
    let request = ClaimRequest {
        key: SlotKey {
            job: "settle".to_owned(),
            scheduled_at: other_slot,
            partition: String::new(),
        },
        trigger: Trigger::Schedule,
        zone: "UTC".to_owned(),
        wall: other_slot.naive_utc(),
        business_date: other_slot.date_naive(),
        fingerprint: 1,
        stale_after: Duration::from_secs(30),
        overlap: Overlap::Skip,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    };
    store.claim("other", &[request]).await.unwrap();
    sleep(5.0).await;
    handle.shutdown().await;
    let runs = store.runs();
    let run = runs
        .iter()
        .find(|r| r.key.scheduled_at == at("2026-03-02T01:00:10Z"))
        .expect("01:00:10 is recorded");
    assert_eq!(run.status, RunStatus::Skipped, "{run:?}");
    assert!(
        run.error_message
            .as_deref()
            .is_some_and(|m| m.starts_with("overlap")),
        "{run:?}"
    );
    assert!(
        starts.lock().unwrap().is_empty(),
        "nothing ran under the lock"
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_look_finds_the_holders_row_and_does_nothing() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let (a, b) = (Starts::default(), Starts::default());
    let (first, _) = replica(&store, clock, &a).await;
    let (second, _) = replica(&store, clock, &b).await;
    sleep(31.0).await;
    first.shutdown().await;
    second.shutdown().await;
    let starts: Vec<_> = a
        .lock()
        .unwrap()
        .iter()
        .chain(b.lock().unwrap().iter())
        .map(|(slot, _)| *slot)
        .collect();
    let mut slots = starts.clone();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 3, "01:00:10, :20 and :30: {starts:?}");
    assert_eq!(starts.len(), 3, "each once: {starts:?}");
    assert!(
        store
            .runs()
            .iter()
            .all(|r| r.status == RunStatus::Succeeded && r.attempt == 1)
    );
}
