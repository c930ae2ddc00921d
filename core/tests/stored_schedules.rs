//! Schedules kept in the store, in paused tokio time on the memory backend: a schedule written at
//! run time runs on its partition once per slot across replicas, each change takes effect at its
//! fence, and every slot that ran is one the version in force at its instant produces, also while
//! edits race the ticks of eight replicas.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{RunStatus, ScheduleSpec, ScheduleStore, ScheduleVersion, ScheduleWrite};
use slotguard::timeline::Timeline;
use slotguard::{
    Clock, GuardLevel, Job, JobContext, MemoryBackend, Role, Scheduler, SchedulerHandle, TokioClock,
};

/// One body's start: partition, slot, replica.
type Start = (String, DateTime<Utc>, String);

/// The slots each replica ran.
#[derive(Clone, Default)]
struct Ran(Arc<Mutex<Vec<Start>>>);

impl Ran {
    fn job(&self, replica: &str) -> Job {
        let (ran, replica) = (self.clone(), replica.to_owned());
        Job::new("tenant_report", "0 0 1 1 *", move |ctx: JobContext| {
            let (ran, replica) = (ran.clone(), replica.clone());
            async move {
                let partition = ctx.partition().unwrap_or_default().to_owned();
                let fails = partition == "fragile";
                let flaky = partition.starts_with("flaky") && ctx.attempt() == 1;
                ran.0
                    .lock()
                    .unwrap()
                    .push((partition, ctx.scheduled_at(), replica));
                tokio::time::sleep(Duration::from_millis(300)).await;
                if fails {
                    return Err(slotguard::JobError::permanent("the tenant's bank said no"));
                }
                if flaky {
                    return Err(slotguard::JobError::transient("try again"));
                }
                Ok(())
            }
        })
        .guard(GuardLevel::Slot)
        .retry(slotguard::RetryPolicy::exponential(
            3,
            Duration::from_millis(500),
            Duration::from_millis(500),
        ))
    }

    /// The slots of `partition` that ran, in order; panics on a slot that ran twice.
    fn slots(&self, partition: &str) -> Vec<DateTime<Utc>> {
        let all = self.0.lock().unwrap().clone();
        let mut counts: HashMap<DateTime<Utc>, Vec<String>> = HashMap::new();
        for (_, slot, replica) in all.into_iter().filter(|(p, ..)| p == partition) {
            counts.entry(slot).or_default().push(replica);
        }
        for (slot, replicas) in &counts {
            assert_eq!(
                replicas.len(),
                1,
                "slot {slot} of {partition} ran on {replicas:?}"
            );
        }
        let mut slots: Vec<_> = counts.into_keys().collect();
        slots.sort();
        slots
    }
}

async fn replica(store: &MemoryBackend, clock: TokioClock, id: &str, ran: &Ran) -> SchedulerHandle {
    process(store, clock, id, ran, Role::All).await
}

async fn process(
    store: &MemoryBackend,
    clock: TokioClock,
    id: &str,
    ran: &Ran,
    role: Role,
) -> SchedulerHandle {
    Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id(id)
        .role(role)
        .stale_after(Duration::from_secs(3))
        .recovery_interval(Duration::from_secs(1))
        .job(ran.job(id))
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap()
}

fn spec(cron: &str, partition: &str) -> ScheduleSpec {
    ScheduleSpec::new("tenant_report", cron, "Asia/Seoul", partition)
}

async fn write(
    store: &MemoryBackend,
    id: &str,
    expected: i64,
    spec: Option<ScheduleSpec>,
) -> ScheduleVersion {
    match store
        .write_schedule(id, expected, spec.as_ref(), "test", "because")
        .await
        .unwrap()
    {
        ScheduleWrite::Written(v) => v,
        ScheduleWrite::Stale { current } => panic!("stale: {current}"),
    }
}

fn start_clock() -> TokioClock {
    TokioClock::starting_at("2026-06-01T00:00:00.300Z".parse().unwrap())
}

/// What the versions of `id` produce between `from` and `to` (both excluded).
async fn expected(
    store: &MemoryBackend,
    id: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let history = store.schedule_history(id).await.unwrap();
    Timeline::new(&history, None)
        .upcoming(from, 10_000)
        .into_iter()
        .map(|s| s.scheduled_at)
        .filter(|at| *at < to)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_stored_schedule_runs_once_per_slot_and_each_change_takes_effect_at_its_fence() {
    let clock = start_clock();
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ran = Ran::default();
    let mut replicas = Vec::new();
    for id in ["a", "b", "c"] {
        replicas.push(replica(&store, clock, id, &ran).await);
    }
    let t0 = clock.now();
    let v1 = write(
        &store,
        "acme-every-second",
        0,
        Some(spec("* * * * * *", "acme")),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let v2 = write(
        &store,
        "acme-every-second",
        1,
        Some(spec("*/2 * * * * *", "acme")),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut paused = spec("*/2 * * * * *", "acme");
    paused.paused = true;
    let v3 = write(&store, "acme-every-second", 2, Some(paused)).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let end = clock.now();
    for handle in replicas {
        handle.shutdown().await;
    }

    let slots = ran.slots("acme");
    assert_eq!(
        slots,
        expected(
            &store,
            "acme-every-second",
            t0,
            end - chrono::Duration::seconds(1)
        )
        .await,
        "v1 {v1:?} v2 {v2:?} v3 {v3:?}"
    );
    // What the versions say, spelled out: every second from v1's fence, even seconds only from
    // v2's, nothing from v3's; and nothing ran on the job's own (yearly) schedule.
    assert!(slots.first().is_some_and(
        |s| *s >= v1.effective_at && *s < v1.effective_at + chrono::Duration::seconds(1)
    ));
    assert!(
        slots.iter().filter(|s| **s < v2.effective_at).count() >= 3,
        "{slots:?}"
    );
    assert!(
        slots
            .iter()
            .filter(|s| **s >= v2.effective_at)
            .all(|s| s.timestamp() % 2 == 0),
        "{slots:?}"
    );
    assert!(slots.iter().all(|s| *s < v3.effective_at), "{slots:?}");
    assert!(ran.slots("").is_empty());
}

/// Eight replicas tick while an operator changes two schedules every 700 ms (expression, pause):
/// each slot runs once, and exactly the slots the versions in force at their instants produce.
#[tokio::test(start_paused = true)]
async fn edits_racing_the_ticks_of_eight_replicas_run_each_slot_once_under_its_version() {
    let clock = start_clock();
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ran = Ran::default();
    let mut replicas = Vec::new();
    for i in 0..8 {
        replicas.push(replica(&store, clock, &format!("r{i}"), &ran).await);
    }
    let t0 = clock.now();
    write(&store, "flip", 0, Some(spec("* * * * * *", "flip"))).await;
    write(&store, "pause", 0, Some(spec("* * * * * *", "pause"))).await;
    for round in 1..=15_i64 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let cron = if round % 2 == 1 {
            "*/3 * * * * *"
        } else {
            "* * * * * *"
        };
        write(&store, "flip", round, Some(spec(cron, "flip"))).await;
        let mut paused = spec("* * * * * *", "pause");
        paused.paused = round % 2 == 1;
        write(&store, "pause", round, Some(paused)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let end = clock.now() - chrono::Duration::seconds(1);
    for handle in replicas {
        handle.shutdown().await;
    }
    for id in ["flip", "pause"] {
        let slots = ran.slots(id);
        assert_eq!(slots, expected(&store, id, t0, end).await, "{id}");
        assert!(slots.len() >= 4, "{id}: {slots:?}");
    }
}

/// Two schedulers enqueue a stored schedule's slots and two workers run them: each slot once, as
/// the versions say, through a change.
#[tokio::test(start_paused = true)]
async fn schedulers_enqueue_a_stored_schedules_slots_and_workers_run_each_once() {
    let clock = start_clock();
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ran = Ran::default();
    let mut processes = Vec::new();
    for (id, role) in [
        ("s1", Role::Scheduler),
        ("s2", Role::Scheduler),
        ("w1", Role::Worker),
        ("w2", Role::Worker),
    ] {
        processes.push(process(&store, clock, id, &ran, role).await);
    }
    let t0 = clock.now();
    write(&store, "queued", 0, Some(spec("* * * * * *", "queued"))).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    write(&store, "queued", 1, Some(spec("*/2 * * * * *", "queued"))).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let end = clock.now() - chrono::Duration::seconds(1);
    for handle in processes {
        handle.shutdown().await;
    }
    let slots = ran.slots("queued");
    assert_eq!(slots, expected(&store, "queued", t0, end).await);
    assert!(slots.len() >= 6, "{slots:?}");
    let runners: Vec<String> = ran.0.lock().unwrap().iter().map(|r| r.2.clone()).collect();
    assert!(runners.iter().all(|r| r.starts_with('w')), "{runners:?}");
}

/// A schedule that pauses on failure is paused by the system after its first run that fails for
/// good, with a note naming the slot and the error; its other slots do not run, and a schedule of
/// another partition goes on.
#[tokio::test(start_paused = true)]
async fn a_failure_pauses_the_schedules_that_ask_for_it() {
    let clock = start_clock();
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ran = Ran::default();
    let handle = replica(&store, clock, "a", &ran).await;
    let mut fragile = spec("* * * * * *", "fragile");
    fragile.pause_on_failure = true;
    write(&store, "fragile", 0, Some(fragile)).await;
    write(&store, "sturdy", 0, Some(spec("* * * * * *", "sturdy"))).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    handle.shutdown().await;

    let history = store.schedule_history("fragile").await.unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
    let paused = history[1].spec.as_ref().unwrap();
    assert!(paused.paused, "{history:?}");
    let note = paused.note.as_deref().unwrap_or_default();
    assert!(
        note.contains("failed for good: the tenant's bank said no"),
        "{note}"
    );
    assert_eq!(history[1].changed_by, "slotguard");
    let fragile = ran.slots("fragile");
    // The failed slot, and at most the one claimed before the pause took effect.
    assert!((1..=2).contains(&fragile.len()), "{fragile:?}");
    assert!(ran.slots("sturdy").len() >= 4);
}

/// The job's own chain takes the flag and the lock; two stored schedules' retries fall due at
/// once on two partitions: recovery claims them one at a time, and each slot succeeds on its second
/// attempt (a claim of both under one flag was a bug).
#[tokio::test(start_paused = true)]
async fn retries_of_two_partitions_due_at_once_each_run_once() {
    let clock = start_clock();
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ran = Ran::default();
    let handle = replica(&store, clock, "a", &ran).await;
    write(&store, "flaky-a", 0, Some(spec("*/2 * * * * *", "flaky-a"))).await;
    write(&store, "flaky-b", 0, Some(spec("*/2 * * * * *", "flaky-b"))).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    handle.shutdown().await;
    let runs = store.runs();
    let done: Vec<_> = runs
        .iter()
        .filter(|r| r.key.scheduled_at <= "2026-06-01T00:00:04Z".parse::<DateTime<Utc>>().unwrap())
        .map(|r| (r.key.partition.as_str(), r.status, r.attempt))
        .collect();
    assert_eq!(done.len(), 4, "{runs:?}");
    for (partition, status, attempt) in done {
        assert_eq!(
            (status, attempt),
            (RunStatus::Succeeded, 2),
            "{partition}: {runs:?}"
        );
    }
}
