//! Claiming ahead of the instant never decides an overlap: a layer that finds another run of the
//! job going sends the slot back to be offered again at its instant, where the overlap policy
//! decides as it would have without the lead. In paused tokio time on the memory backend, with one
//! job every second whose body ends inside the lead (0.85 s), or runs past the next instant.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::RunStatus;
use slotguard::{
    Clock, GuardLevel, Job, JobContext, MemoryBackend, Overlap, Scheduler, SchedulerHandle,
    TokioClock,
};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

/// Every body that ran: (slot, start, end), by the clock.
type Bodies = Arc<Mutex<Vec<(DateTime<Utc>, DateTime<Utc>, DateTime<Utc>)>>>;

/// A job every second whose body takes `work` seconds.
fn job(clock: TokioClock, bodies: &Bodies, level: GuardLevel, work: f64) -> Job {
    let bodies = Arc::clone(bodies);
    Job::new("settle", "* * * * * *", move |ctx: JobContext| {
        let bodies = Arc::clone(&bodies);
        async move {
            let start = clock.now();
            sleep(work).await;
            bodies
                .lock()
                .unwrap()
                .push((ctx.scheduled_at(), start, clock.now()));
        }
    })
    .guard(level)
    .overlap(Overlap::Skip)
}

/// A replica on `store` that claims 300 ms ahead.
async fn replica(store: &MemoryBackend, clock: TokioClock, id: &str, job: Job) -> SchedulerHandle {
    Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id(id)
        .claim_ahead(Duration::from_millis(300))
        .job(job)
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap()
}

/// The slots from 01:00:01 to 01:00:05.
fn five_slots() -> Vec<DateTime<Utc>> {
    (1..=5)
        .map(|s| at(&format!("2026-03-02T01:00:0{s}Z")))
        .collect()
}

/// The bodies of the five slots, in slot order; asserts that no two overlapped and that each
/// started on its instant.
fn ran(bodies: &Bodies) -> Vec<DateTime<Utc>> {
    let mut bodies = bodies.lock().unwrap().clone();
    bodies.sort();
    for pair in bodies.windows(2) {
        assert!(pair[0].2 <= pair[1].1, "two bodies overlapped: {pair:?}");
    }
    for (slot, start, _) in &bodies {
        assert_eq!(start, slot, "a body starts on its slot's instant");
    }
    let last = at("2026-03-02T01:00:05Z");
    bodies
        .into_iter()
        .map(|(slot, ..)| slot)
        .filter(|slot| *slot <= last)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_run_ending_inside_the_lead_never_makes_the_next_slot_skip_at_the_slot_level() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let bodies = Bodies::default();
    let handle = replica(
        &store,
        clock,
        "a",
        job(clock, &bodies, GuardLevel::Slot, 0.85),
    )
    .await;
    sleep(6.0).await;
    handle.shutdown().await;
    assert_eq!(ran(&bodies), five_slots());
    let runs = store.runs();
    for run in runs
        .iter()
        .filter(|r| r.key.scheduled_at <= five_slots()[4])
    {
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    }
    // The first slot found nothing running and was claimed ahead; the next ones found their
    // predecessor running at the lead and were claimed at their instant.
    let first = runs.iter().find(|r| r.key.scheduled_at == five_slots()[0]);
    assert_eq!(
        first.map(|r| r.created_at),
        Some(at("2026-03-02T01:00:00.700Z"))
    );
    let second = runs.iter().find(|r| r.key.scheduled_at == five_slots()[1]);
    assert_eq!(
        second.map(|r| r.created_at),
        Some(five_slots()[1]),
        "claimed again at its instant"
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_ending_inside_the_lead_never_makes_the_next_slot_skip_at_the_flag_level() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let bodies = Bodies::default();
    let handle = replica(
        &store,
        clock,
        "a",
        job(clock, &bodies, GuardLevel::Local, 0.85),
    )
    .await;
    sleep(6.0).await;
    handle.shutdown().await;
    assert_eq!(ran(&bodies), five_slots());
}

#[tokio::test(start_paused = true)]
async fn a_lock_held_elsewhere_inside_the_lead_never_makes_the_next_slot_skip() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let bodies = Bodies::default();
    let a = replica(
        &store,
        clock,
        "a",
        job(clock, &bodies, GuardLevel::Lock, 0.85),
    )
    .await;
    let b = replica(
        &store,
        clock,
        "b",
        job(clock, &bodies, GuardLevel::Lock, 0.85),
    )
    .await;
    sleep(6.0).await;
    a.shutdown().await;
    b.shutdown().await;
    assert_eq!(ran(&bodies), five_slots(), "every slot ran once");
}

#[tokio::test(start_paused = true)]
async fn a_run_still_going_at_the_instant_is_decided_by_the_overlap_policy() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let bodies = Bodies::default();
    let handle = replica(
        &store,
        clock,
        "a",
        job(clock, &bodies, GuardLevel::Slot, 1.2),
    )
    .await;
    sleep(6.0).await;
    handle.shutdown().await;
    let slots = five_slots();
    assert_eq!(ran(&bodies), vec![slots[0], slots[2], slots[4]]);
    let runs = store.runs();
    for skipped in [slots[1], slots[3]] {
        let run = runs.iter().find(|r| r.key.scheduled_at == skipped).unwrap();
        assert_eq!(run.status, RunStatus::Skipped, "{run:?}");
        assert_eq!(run.created_at, skipped, "decided at its instant: {run:?}");
    }
}

#[tokio::test]
async fn with_a_store_and_the_system_clock_slots_are_claimed_ahead_by_default() {
    let store = MemoryBackend::new();
    let handle = Scheduler::builder()
        .backend(store.clone())
        .job(Job::new("quick", "* * * * * *", |_ctx: JobContext| async {}))
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while store.runs().len() < 3 && tokio::time::Instant::now() < deadline {
        sleep(0.1).await;
    }
    handle.shutdown().await;
    let runs = store.runs();
    assert!(runs.len() >= 3, "{runs:?}");
    // A loaded machine may wake a timer late now and then; one of three is enough to show the lead.
    let ahead = runs
        .iter()
        .filter(|r| r.created_at < r.key.scheduled_at)
        .count();
    assert!(
        ahead >= 1,
        "no slot was claimed ahead of its instant: {runs:?}"
    );
    for run in &runs {
        let lead = run.key.scheduled_at - run.created_at;
        assert!(lead <= chrono::TimeDelta::milliseconds(100), "{run:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_slots_due_together_are_claimed_further_ahead_by_default() {
    use chrono::Timelike as _;
    // 10,000 jobs due at one whole second, at least 2.5 s from now (after the builder's work):
    // the default lead is 70 µs a slot, 700 ms, instead of 100 ms.
    const JOBS: usize = 10_000;
    let instant = (Utc::now() + chrono::TimeDelta::milliseconds(2_500))
        .with_nanosecond(0)
        .unwrap()
        + chrono::TimeDelta::seconds(1);
    let cron = format!(
        "{} {} {} * * *",
        instant.second(),
        instant.minute(),
        instant.hour()
    );
    let store = MemoryBackend::new();
    let jobs = (0..JOBS).map(|j| {
        Job::new(
            format!("storm_{j}"),
            cron.as_str(),
            |_ctx: JobContext| async {},
        )
    });
    let handle = Scheduler::builder()
        .backend(store.clone())
        .default_tz("UTC")
        .jobs(jobs)
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap();
    let early = instant - chrono::TimeDelta::milliseconds(800);
    assert!(Utc::now() < early, "set-up took too long");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while store.runs().len() < JOBS && tokio::time::Instant::now() < deadline {
        sleep(0.05).await;
    }
    handle.shutdown().await;
    let runs = store.runs();
    assert_eq!(runs.len(), JOBS);
    assert!(runs.iter().all(|r| r.key.scheduled_at == instant));
    // Never more than the storm's lead ahead, and the first claims far past the 100 ms of a lone
    // slot (a loaded machine may wake the timer late: 300 ms of slack).
    let lead = runs.iter().map(|r| instant - r.created_at).max().unwrap();
    assert!(
        lead <= chrono::TimeDelta::milliseconds(700),
        "claimed {lead} ahead"
    );
    assert!(
        lead > chrono::TimeDelta::milliseconds(400),
        "claimed only {lead} ahead"
    );
}
