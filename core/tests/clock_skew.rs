//! Replicas whose clocks are off, in paused tokio time on the memory backend (whose clock plays the
//! database's): the skew is measured against the store's clock and, with `ClockSync::Follow`, slots
//! follow the store's clock; a clock that jumps while running is noticed at its next reading.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::RunStatus;
use slotguard::{
    Clock, ClockSync, GuardLevel, Job, JobContext, MemoryBackend, Overlap, Scheduler,
    SchedulerHandle, TokioClock,
};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

/// A replica's wall clock: the true time (the store's) moved by an offset that can change while it
/// runs, like a clock stepped by hand or by NTP.
#[derive(Debug, Clone)]
struct OffClock {
    truth: TokioClock,
    offset_ms: Arc<AtomicI64>,
}

impl OffClock {
    fn new(truth: TokioClock, offset_ms: i64) -> Self {
        OffClock {
            truth,
            offset_ms: Arc::new(AtomicI64::new(offset_ms)),
        }
    }

    fn jump_to(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
    }
}

impl Clock for OffClock {
    fn now(&self) -> DateTime<Utc> {
        self.truth.now() + chrono::Duration::milliseconds(self.offset_ms.load(Ordering::SeqCst))
    }
}

/// One entry per body that started: (job, slot, true time of the start, replica).
type Start = (String, DateTime<Utc>, DateTime<Utc>, String);
type Starts = Arc<Mutex<Vec<Start>>>;

fn job(name: &str, starts: &Starts, truth: TokioClock, replica: &str) -> Job {
    let (starts, replica, job) = (Arc::clone(starts), replica.to_owned(), name.to_owned());
    Job::new(name, "* * * * * *", move |ctx: JobContext| {
        let (starts, replica, job) = (Arc::clone(&starts), replica.clone(), job.clone());
        async move {
            starts
                .lock()
                .unwrap()
                .push((job, ctx.scheduled_at(), truth.now(), replica));
            sleep(0.1).await;
        }
    })
}

async fn replica(
    store: &MemoryBackend,
    clock: OffClock,
    sync: ClockSync,
    id: &str,
    jobs: Vec<Job>,
) -> SchedulerHandle {
    Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .clock_sync(sync)
        .instance_id(id)
        .stale_after(Duration::from_secs(3))
        .recovery_interval(Duration::from_secs(1))
        .jobs(jobs)
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap()
}

/// Three replicas, one true, one 90 s fast, one 90 s slow, for 12 s: `skip` goes through the flag and
/// lock layers, `allow` through slot rows only.
async fn skewed_cluster(sync: ClockSync) -> (Vec<Start>, MemoryBackend, DateTime<Utc>) {
    let start = at("2026-03-02T01:00:00.300Z");
    let truth = TokioClock::starting_at(start);
    let store = MemoryBackend::with_clock(Arc::new(truth));
    let starts = Starts::default();
    let mut handles = Vec::new();
    for (id, offset) in [("true", 0), ("fast", 90_000), ("slow", -90_000)] {
        let jobs = vec![
            job("skip", &starts, truth, id),
            job("allow", &starts, truth, id).overlap(Overlap::Allow),
        ];
        handles.push(replica(&store, OffClock::new(truth, offset), sync, id, jobs).await);
    }
    sleep(12.0).await;
    for handle in handles {
        handle.shutdown().await;
    }
    let starts = starts.lock().unwrap().clone();
    (starts, store, start)
}

#[tokio::test(start_paused = true)]
async fn following_the_store_clock_runs_each_slot_once_on_time_despite_90_s_of_skew() {
    let (starts, store, start) = skewed_cluster(ClockSync::FOLLOW).await;
    let mut per_slot: BTreeMap<(String, DateTime<Utc>), usize> = BTreeMap::new();
    for (job, slot, started, replica) in &starts {
        *per_slot.entry((job.clone(), *slot)).or_default() += 1;
        let lag = *started - *slot;
        assert!(
            lag >= chrono::Duration::zero() && lag < chrono::Duration::milliseconds(50),
            "{job} {slot} started on {replica} at {started}: off by {lag}"
        );
    }
    for job in ["skip", "allow"] {
        for s in 1..=11 {
            let slot = at("2026-03-02T01:00:00Z") + chrono::Duration::seconds(s);
            assert_eq!(
                per_slot.get(&(job.to_owned(), slot)),
                Some(&1),
                "{job} {slot} ran once"
            );
        }
    }
    assert_eq!(
        per_slot.values().sum::<usize>(),
        starts.len(),
        "no slot ran twice"
    );
    // Every row is a true slot, none from a skewed replica's idea of the time.
    let runs = store.runs();
    assert!(!runs.is_empty());
    for run in &runs {
        assert!(
            run.key.scheduled_at > start
                && run.key.scheduled_at <= start + chrono::Duration::seconds(12),
            "{run:?}"
        );
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    }
}

/// The contrast: observing only, slots follow each replica's own clock. The store still refuses
/// the fast replica's slots (more than `MAX_EARLY` ahead of its clock), so nothing runs early; the
/// slow replica runs slots 90 s late where no row exists yet (here, those before the cluster
/// started).
#[tokio::test(start_paused = true)]
async fn observing_only_the_store_still_refuses_slots_that_are_not_due() {
    let (starts, store, _start) = skewed_cluster(ClockSync::Observe).await;
    for (job, slot, started, replica) in &starts {
        assert!(
            started >= slot,
            "{job} {slot} ran early on {replica} at {started}"
        );
    }
    let late = starts
        .iter()
        .filter(|(_, slot, started, replica)| {
            replica == "slow" && *started - *slot > chrono::Duration::seconds(89)
        })
        .count();
    assert!(
        late > 0,
        "the slow replica's clock was not corrected: {starts:?}"
    );
    assert!(
        starts.iter().all(|(.., replica)| replica != "fast"),
        "the fast replica ran nothing: {starts:?}"
    );
    let ahead = store
        .runs()
        .into_iter()
        .filter(|r| r.key.scheduled_at > at("2026-03-02T01:00:15Z"))
        .count();
    assert_eq!(ahead, 0, "no row for a slot that was not due");
}

#[tokio::test(start_paused = true)]
async fn a_clock_that_jumps_while_running_is_noticed_at_its_next_reading() {
    let start = at("2026-03-02T01:00:00.300Z");
    let truth = TokioClock::starting_at(start);
    let store = MemoryBackend::with_clock(Arc::new(truth));
    let starts = Starts::default();
    let clock = OffClock::new(truth, 0);
    // `local`: no slot rows, so a slot fired twice here would run twice.
    let jobs = vec![
        job("local", &starts, truth, "n").guard(GuardLevel::Local),
        job("slot", &starts, truth, "n"),
    ];
    let handle = replica(&store, clock.clone(), ClockSync::FOLLOW, "n", jobs).await;
    sleep(3.0).await;
    clock.jump_to(3_600_000); // an hour ahead
    sleep(3.0).await;
    clock.jump_to(-3_600_000); // an hour behind
    sleep(3.0).await;
    clock.jump_to(0);
    sleep(3.0).await;
    handle.shutdown().await;
    let starts = starts.lock().unwrap().clone();
    for job in ["local", "slot"] {
        let slots: Vec<DateTime<Utc>> = starts
            .iter()
            .filter(|(j, ..)| j == job)
            .map(|(_, slot, ..)| *slot)
            .collect();
        let expected: Vec<DateTime<Utc>> = (1..=12)
            .map(|s| at("2026-03-02T01:00:00Z") + chrono::Duration::seconds(s))
            .collect();
        assert_eq!(slots, expected, "{job}: every true second once, in order");
    }
    for (job, slot, started, _) in &starts {
        let lag = *started - *slot;
        assert!(
            lag >= chrono::Duration::zero() && lag < chrono::Duration::milliseconds(50),
            "{job} {slot} started at {started}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn within_the_tolerance_slots_follow_the_local_clock() {
    let start = at("2026-03-02T01:00:00.300Z");
    let truth = TokioClock::starting_at(start);
    let store = MemoryBackend::with_clock(Arc::new(truth));
    let starts = Starts::default();
    let clock = OffClock::new(truth, 40); // 40 ms fast: NTP-grade, under 100 ms
    let handle = replica(
        &store,
        clock,
        ClockSync::FOLLOW,
        "n",
        vec![job("slot", &starts, truth, "n")],
    )
    .await;
    sleep(3.0).await;
    handle.shutdown().await;
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 3, "{starts:?}");
    for (_, slot, started, _) in &starts {
        assert_eq!(
            *slot - *started,
            chrono::Duration::milliseconds(40),
            "this replica's clock rules: it starts 40 ms before the store's second"
        );
    }
}
