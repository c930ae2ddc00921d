//! Roles, in paused tokio time on the memory backend: schedulers enqueue slots as `pending` rows,
//! workers run them through the job's chain, each slot once, at its instant (claimed ahead of it
//! with `claim_ahead`, unless a run of the job is going); an admin process does neither; a role that
//! cannot work is refused at `build()`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

#[path = "support/faulty_store.rs"]
mod faulty_store;
use faulty_store::Faulty;
use slotguard::store::{RunStatus, Store};
use slotguard::{
    Clock, ConfigError, GuardLevel, Job, JobContext, MemoryBackend, Overlap, Role, Scheduler,
    SchedulerHandle, TokioClock,
};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// (slot, process, start, end) of one body, by the shared clock.
type Execution = (DateTime<Utc>, String, DateTime<Utc>, DateTime<Utc>);

/// Every body's execution.
#[derive(Clone, Default)]
struct Ledger(Arc<Mutex<Vec<Execution>>>);

impl Ledger {
    fn job(&self, cron: &str, secs: f64, clock: TokioClock, process: &str) -> Job {
        let (ledger, process) = (self.clone(), process.to_owned());
        Job::new("tick", cron, move |ctx: JobContext| {
            let (ledger, process) = (ledger.clone(), process.clone());
            async move {
                let start = clock.now();
                tokio::time::sleep(Duration::from_secs_f64(secs)).await;
                let mut all = ledger.0.lock().unwrap();
                all.push((ctx.scheduled_at(), process, start, clock.now()));
            }
        })
    }

    fn all(&self) -> Vec<Execution> {
        self.0.lock().unwrap().clone()
    }

    fn overlapping(&self) -> usize {
        let all = self.all();
        let mut pairs = 0;
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                if a.2 < b.3 && b.2 < a.3 {
                    pairs += 1;
                }
            }
        }
        pairs
    }
}

async fn process(
    store: &MemoryBackend,
    clock: TokioClock,
    id: &str,
    role: Role,
    job: Job,
) -> SchedulerHandle {
    let store = Store::full(Arc::new(store.clone()));
    process_ahead(&store, clock, (id, role), job, Duration::ZERO).await
}

/// [`process`] on `store`, with a `claim_ahead` of `lead` (a worker claims queued slots that
/// early).
async fn process_ahead(
    store: &Store,
    clock: TokioClock,
    (id, role): (&str, Role),
    job: Job,
    lead: Duration,
) -> SchedulerHandle {
    Scheduler::builder()
        .store(store.clone())
        .clock(clock)
        .instance_id(id)
        .role(role)
        .claim_ahead(lead)
        .stale_after(Duration::from_secs(3))
        .recovery_interval(Duration::from_secs(1))
        .job(job)
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap()
}

async fn cluster(
    store: &Store,
    clock: TokioClock,
    ledger: &Ledger,
    roles: &[(&str, Role)],
    (body_secs, lead): (f64, Duration),
) -> Vec<SchedulerHandle> {
    let mut handles = Vec::new();
    for (id, role) in roles {
        let job = ledger.job("* * * * * *", body_secs, clock, id);
        handles.push(process_ahead(store, clock, (id, *role), job, lead).await);
    }
    handles
}

/// A cluster of `roles` on a fresh memory store running one per-second job with bodies of
/// `body_secs`, for `secs` seconds of paused time; what the store and the bodies recorded.
async fn run_for(roles: &[(&str, Role)], body_secs: f64, secs: u64) -> (MemoryBackend, Ledger) {
    run_ahead(roles, (body_secs, Duration::ZERO), secs).await
}

/// [`run_for`] with every process's `claim_ahead` at `lead`.
async fn run_ahead(
    roles: &[(&str, Role)],
    (body_secs, lead): (f64, Duration),
    secs: u64,
) -> (MemoryBackend, Ledger) {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ledger = Ledger::default();
    let full = Store::full(Arc::new(store.clone()));
    let handles = cluster(&full, clock, &ledger, roles, (body_secs, lead)).await;
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop(handles).await;
    (store, ledger)
}

async fn stop(handles: Vec<SchedulerHandle>) {
    for handle in handles {
        handle.shutdown().await;
    }
}

/// The runs per slot, from what the bodies did.
fn per_slot(ledger: &Ledger) -> HashMap<DateTime<Utc>, Vec<String>> {
    let mut by_slot: HashMap<DateTime<Utc>, Vec<String>> = HashMap::new();
    for (slot, process, _, _) in ledger.all() {
        by_slot.entry(slot).or_default().push(process);
    }
    by_slot
}

#[tokio::test(start_paused = true)]
async fn a_scheduler_enqueues_and_workers_run_each_slot_once_at_its_instant() {
    let roles = [
        ("sched", Role::Scheduler),
        ("w1", Role::Worker),
        ("w2", Role::Worker),
    ];
    let (store, ledger) = run_for(&roles, 0.3, 10).await;
    let by_slot = per_slot(&ledger);
    assert_eq!(by_slot.len(), 10, "{by_slot:?}");
    for (slot, processes) in &by_slot {
        assert_eq!(processes.len(), 1, "slot {slot} ran {processes:?}");
        assert!(processes[0].starts_with('w'), "the scheduler ran {slot}");
    }
    for (slot, _, start, _) in ledger.all() {
        let lag = start - slot;
        assert!(
            lag >= chrono::Duration::zero() && lag <= chrono::Duration::milliseconds(5),
            "slot {slot} started {lag} after its instant"
        );
    }
    let rows = store.runs();
    assert_eq!(rows.len(), 10, "{rows:#?}");
    assert!(rows.iter().all(|r| r.status == RunStatus::Succeeded));
    assert!(rows.iter().all(|r| r.attempts.len() == 1));
}

#[tokio::test(start_paused = true)]
async fn two_schedulers_enqueue_each_slot_once() {
    let roles = [
        ("s1", Role::Scheduler),
        ("s2", Role::Scheduler),
        ("w1", Role::Worker),
    ];
    let (store, ledger) = run_for(&roles, 0.2, 8).await;
    let by_slot = per_slot(&ledger);
    assert_eq!(by_slot.len(), 8);
    assert!(by_slot.values().all(|p| p.len() == 1), "{by_slot:?}");
    assert_eq!(store.runs().len(), 8);
}

/// Bodies longer than the interval, overlap `skip`: a slot due while the previous run goes on is
/// recorded `skipped` at the scheduler, and runs never overlap.
#[tokio::test(start_paused = true)]
async fn queued_slots_keep_the_overlap_policy() {
    let roles = [
        ("sched", Role::Scheduler),
        ("w1", Role::Worker),
        ("w2", Role::Worker),
    ];
    let (store, ledger) = run_for(&roles, 1.5, 10).await;
    assert_eq!(ledger.overlapping(), 0, "{:#?}", ledger.all());
    let skipped = store
        .runs()
        .into_iter()
        .filter(|r| r.status == RunStatus::Skipped)
        .count();
    assert!(skipped >= 3, "slots due while a run went on were skipped");
    assert!(ledger.all().len() >= 3, "the job ran");
}

#[tokio::test(start_paused = true)]
async fn an_admin_process_neither_enqueues_nor_runs() {
    let (store, ledger) = run_for(&[("api", Role::Admin)], 0.1, 5).await;
    assert!(ledger.all().is_empty());
    assert!(store.runs().is_empty());
}

/// A worker with room for 2 runs claims no more than 2 at once; the other worker takes the rest.
#[tokio::test(start_paused = true)]
async fn a_worker_claims_no_more_than_its_room() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ledger = Ledger::default();
    let job = |id: &str| {
        ledger
            .job("* * * * * *", 5.5, clock, id)
            .overlap(Overlap::Allow)
    };
    let mut handles = vec![process(&store, clock, "sched", Role::Scheduler, job("sched")).await];
    for id in ["w1", "w2"] {
        let handle = Scheduler::builder()
            .backend(store.clone())
            .clock(clock)
            .instance_id(id)
            .role(Role::Worker)
            .max_concurrent_runs(2)
            .stale_after(Duration::from_secs(10))
            .job(job(id))
            .build()
            .unwrap()
            .try_start()
            .await
            .unwrap();
        handles.push(handle);
    }
    tokio::time::sleep(Duration::from_secs(12)).await;
    stop(handles).await;
    let all = ledger.all();
    for id in ["w1", "w2"] {
        let mine: Vec<_> = all.iter().filter(|e| e.1 == id).collect();
        for e in &mine {
            let at_once = mine.iter().filter(|o| o.2 <= e.2 && e.2 < o.3).count();
            assert!(at_once <= 2, "{id} ran {at_once} at once at {}", e.2);
        }
    }
    // Four runs fit at once; with 5.5 s bodies every second, some slots wait their turn.
    let late = all
        .iter()
        .filter(|e| e.2 - e.0 > chrono::Duration::milliseconds(100))
        .count();
    assert!(late > 0, "the limit made some slots wait: {all:#?}");
    assert!(all.len() >= 8, "{}", all.len());
}

#[test]
fn a_role_that_cannot_work_is_refused_at_build() {
    let err = Scheduler::builder()
        .role(Role::Worker)
        .job(Job::new("a", "* * * * *", |_| async {}))
        .build()
        .unwrap_err();
    assert!(
        err.problems
            .iter()
            .any(|p| matches!(p, ConfigError::Setting { setting, .. } if *setting == "role")),
        "{err}"
    );
    let err = Scheduler::builder()
        .backend(MemoryBackend::new())
        .role(Role::Scheduler)
        .job(Job::new("a", "* * * * *", |_| async {}).guard(GuardLevel::Lock))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("job `a`: the `scheduler` role (its queue is the slot table) needs the `slot` guard level"),
        "{err}"
    );
    let err = Scheduler::builder()
        .backend(MemoryBackend::new())
        .role(Role::Worker)
        .max_concurrent_runs(0)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("max_concurrent_runs"), "{err}");
}

/// A job with a cluster-wide limit of 2 and six partitions per slot: across two workers never more
/// than 2 of its bodies at once, and every partition runs.
#[tokio::test(start_paused = true)]
async fn a_cluster_limit_holds_across_workers() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ledger = Ledger::default();
    let job = |id: &str| {
        ledger
            .job("*/30 * * * * *", 2.0, clock, id)
            .overlap(Overlap::Allow)
            .cluster_limit(2)
            .partitions(|| async { Ok::<_, slotguard::JobError>(["a", "b", "c", "d", "e", "f"]) })
    };
    let mut handles = Vec::new();
    for (id, role) in [
        ("sched", Role::Scheduler),
        ("w1", Role::Worker),
        ("w2", Role::Worker),
    ] {
        handles.push(process(&store, clock, id, role, job(id)).await);
    }
    tokio::time::sleep(Duration::from_secs(40)).await;
    stop(handles).await;
    let all = ledger.all();
    assert_eq!(
        all.len(),
        6,
        "every partition of the 01:00:30 slot ran: {all:#?}"
    );
    for e in &all {
        let at_once = all.iter().filter(|o| o.2 <= e.2 && e.2 < o.3).count();
        assert!(at_once <= 2, "{at_once} at once at {}", e.2);
    }
    let workers: std::collections::HashSet<&str> = all.iter().map(|e| e.1.as_str()).collect();
    assert!(workers.iter().all(|w| w.starts_with('w')), "{workers:?}");
}

/// A scheduler and two workers that claim 100 ms ahead (`claim_ahead`).
const AHEAD: [(&str, Role); 3] = [
    ("sched", Role::Scheduler),
    ("w1", Role::Worker),
    ("w2", Role::Worker),
];
const LEAD: Duration = Duration::from_millis(100);

/// [`AHEAD`]'s cluster with bodies of `body_secs` under `skip` for 10 s: no two bodies overlapped
/// (asserted); the runs recorded `skipped`, and the bodies.
async fn ahead_without_overlap(body_secs: f64) -> (Vec<slotguard::store::RunRecord>, Ledger) {
    let (store, ledger) = run_ahead(&AHEAD, (body_secs, LEAD), 10).await;
    assert_eq!(ledger.overlapping(), 0, "{:#?}", ledger.all());
    let skipped = store
        .runs()
        .into_iter()
        .filter(|r| r.status == RunStatus::Skipped)
        .collect();
    (skipped, ledger)
}

#[tokio::test(start_paused = true)]
async fn workers_claim_queued_slots_ahead_and_start_each_body_at_its_instant() {
    let (store, ledger) = run_ahead(&AHEAD, (0.2, LEAD), 10).await;
    let bodies = ledger.all();
    assert_eq!(bodies.len(), 10, "{bodies:?}");
    for (slot, _, start, _) in &bodies {
        assert_eq!(start, slot, "the body of {slot} started at {start}");
    }
    let runs = store.runs();
    assert_eq!(runs.len(), 10, "{runs:#?}");
    for run in &runs {
        assert_eq!(run.status, RunStatus::Succeeded, "{run:#?}");
        assert_eq!(run.attempts.len(), 1, "{run:#?}");
        let early = run.key.scheduled_at - run.attempts[0].started_at;
        assert!(
            early > chrono::Duration::zero() && early <= chrono::Duration::from_std(LEAD).unwrap(),
            "{} was claimed {early} before its instant",
            run.key.scheduled_at
        );
    }
}

/// Bodies of 0.95 s under `skip`: each run is still going when the next slot's lead begins, and
/// ends before its instant. An early claim would have had to decide the overlap against a run
/// about to end; it leaves the slot to its instant instead, so every slot runs and none is skipped.
#[tokio::test(start_paused = true)]
async fn a_run_ending_inside_the_lead_never_makes_the_next_slot_skip() {
    let (skipped, ledger) = ahead_without_overlap(0.95).await;
    assert!(skipped.is_empty(), "{skipped:#?}");
    let bodies = ledger.all();
    assert!(bodies.len() >= 9, "{bodies:?}");
    for (slot, _, start, _) in &bodies {
        let lag = *start - *slot;
        assert!(
            lag >= chrono::Duration::zero() && lag <= chrono::Duration::milliseconds(5),
            "the body of {slot} started {lag} after its instant"
        );
    }
}

/// Bodies of 1.05 s under `skip`: the previous run is going through the next slot's lead and at
/// its instant, so the slot is skipped there, as without the lead, and never claimed early beside
/// the running one (every other slot runs: the one after a skipped slot is free in its lead).
#[tokio::test(start_paused = true)]
async fn a_slot_whose_job_is_running_is_decided_at_its_instant() {
    let (skipped, _) = ahead_without_overlap(1.05).await;
    assert!(skipped.len() >= 4, "{skipped:#?}");
    for run in skipped {
        assert!(
            run.attempts.is_empty(),
            "a skipped slot was claimed: {run:#?}"
        );
    }
}

/// Bodies of 1.05 s under `skip` with two workers claiming ahead: the early look at each slot
/// finds the previous run going and leaves the slot, and the worker then sleeps until the slot's
/// instant (or the run's end) instead of looking again every millisecond until then. Counted in
/// `claim_due` calls: 15 in 10 s; 510 with the worker waking `lead` before the row however often
/// it had looked already.
#[tokio::test(start_paused = true)]
async fn a_worker_whose_early_look_found_the_job_busy_does_not_spin() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let faulty = Arc::new(Faulty {
        inner: Arc::new(MemoryBackend::with_clock(Arc::new(clock))),
        ..Faulty::default()
    });
    let ledger = Ledger::default();
    let store = Faulty::store_of(&faulty).with_queue(Arc::clone(&faulty.inner) as _);
    let handles = cluster(&store, clock, &ledger, &AHEAD, (1.05, LEAD)).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    stop(handles).await;
    assert!(ledger.all().len() >= 4, "{:#?}", ledger.all());
    let calls = faulty.due_claims.load(std::sync::atomic::Ordering::Acquire);
    assert!(calls < 200, "{calls} claim_due calls in 10 s by 2 workers");
}
