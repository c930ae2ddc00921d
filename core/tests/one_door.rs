//! Every way a body starts passes the job's chain, in paused tokio time on the memory backend: a
//! recovered slot never runs beside a newer one, a frozen lock holder blocks a job for a bounded
//! time, a lost lock session alone does not end a `slot`-level run, and the jobs of a tick spread
//! over the replicas.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{ClaimRequest, LockStore, RunStatus, SlotKey, SlotStore, Trigger};
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

/// What the bodies did: (job, slot, replica, start, end, lost), by the shared clock.
#[derive(Clone, Default)]
struct Ledger(Arc<Mutex<Vec<Execution>>>);

#[derive(Debug, Clone)]
struct Execution {
    job: String,
    slot: DateTime<Utc>,
    replica: String,
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
    lost: bool,
}

impl Ledger {
    /// A job whose body takes `secs` and records itself.
    fn job(&self, name: &str, cron: &str, secs: f64, clock: TokioClock, replica: &str) -> Job {
        let (ledger, replica) = (self.clone(), replica.to_owned());
        Job::new(name, cron, move |ctx: JobContext| {
            let (ledger, replica) = (ledger.clone(), replica.clone());
            async move {
                let i = ledger.start(&ctx, &replica, clock.now());
                tokio::select! {
                    () = sleep(secs) => {}
                    () = ctx.cancelled() => {}
                }
                ledger.end(i, clock.now(), ctx.is_lost());
            }
        })
    }

    fn start(&self, ctx: &JobContext, replica: &str, now: DateTime<Utc>) -> usize {
        let mut all = self.0.lock().unwrap();
        all.push(Execution {
            job: ctx.job_name().to_owned(),
            slot: ctx.scheduled_at(),
            replica: replica.to_owned(),
            start: now,
            end: None,
            lost: false,
        });
        all.len() - 1
    }

    fn end(&self, i: usize, now: DateTime<Utc>, lost: bool) {
        let mut all = self.0.lock().unwrap();
        all[i].end = Some(now);
        all[i].lost = lost;
    }

    fn all(&self) -> Vec<Execution> {
        self.0.lock().unwrap().clone()
    }

    /// Pairs of executions of one job whose [start, end) intervals overlap.
    fn overlaps(&self) -> Vec<(Execution, Execution)> {
        let all = self.all();
        let mut found = Vec::new();
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                let (a_end, b_end) = (
                    a.end.unwrap_or(DateTime::<Utc>::MAX_UTC),
                    b.end.unwrap_or(DateTime::<Utc>::MAX_UTC),
                );
                if a.job == b.job && a.start < b_end && b.start < a_end {
                    found.push((a.clone(), b.clone()));
                }
            }
        }
        found
    }
}

async fn replica(
    store: &MemoryBackend,
    clock: TokioClock,
    id: &str,
    jobs: Vec<Job>,
    spread: Duration,
) -> SchedulerHandle {
    Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id(id)
        .stale_after(Duration::from_secs(3))
        .recovery_interval(Duration::from_secs(1))
        .load_spread(spread)
        .jobs(jobs)
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap()
}

fn request(job: &str, slot: DateTime<Utc>) -> ClaimRequest {
    ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: String::new(),
        },
        trigger: Trigger::Schedule,
        zone: "UTC".to_owned(),
        wall: slot.naive_utc(),
        business_date: slot.date_naive(),
        fingerprint: 1,
        stale_after: Duration::from_secs(3),
        overlap: Overlap::Skip,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    }
}

/// The scenario: the replica running the job dies (its lock goes with its session, its row
/// stays `running`), newer slots keep coming on two other replicas. The dead replica's slot is
/// recovered, but never while a newer slot of the job runs.
#[tokio::test(start_paused = true)]
async fn a_recovered_slot_never_runs_beside_a_newer_one() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ledger = Ledger::default();
    // The dead replica claimed 01:00:00 and was killed: no heartbeat, no lock.
    let dead = at("2026-03-02T01:00:00Z");
    assert!(matches!(
        store.claim("dead", &[request("busy", dead)]).await.unwrap()[0],
        slotguard::store::Claim::Won(_)
    ));
    let mut handles = Vec::new();
    for id in ["b", "c"] {
        let job = ledger.job("busy", "* * * * * *", 0.96, clock, id);
        handles.push(replica(&store, clock, id, vec![job], Duration::from_millis(20)).await);
    }
    sleep(12.0).await;
    for handle in &handles {
        handle.shutdown().await;
    }
    assert!(ledger.overlaps().is_empty(), "{:#?}", ledger.overlaps());
    let recovered = store
        .runs()
        .into_iter()
        .find(|r| r.key.scheduled_at == dead)
        .expect("the dead replica's slot has its row");
    assert_eq!(recovered.status, RunStatus::Succeeded, "{recovered:?}");
    assert!(recovered.attempts.len() >= 2, "{recovered:?}");
    assert!(ledger.all().iter().any(|e| e.slot == dead), "it ran again");
}

/// A process frozen (SIGSTOP) while it holds the job's lock and runs a slot, the job's next slots
/// coming every second: once the frozen run is stale, the next slot's second look claims it (the
/// store fences the frozen run), and the job goes on elsewhere.
#[tokio::test(start_paused = true)]
async fn a_frozen_lock_holder_blocks_its_job_at_most_the_stale_threshold_and_a_look() {
    let (store, ledger, _frozen, lease, slot) = frozen_holder("* * * * * *").await;
    let refused = store.heartbeat("frozen", &[lease.token]).await.unwrap();
    assert!(refused.is_empty(), "the frozen run was fenced");
    let first = ledger
        .all()
        .iter()
        .map(|e| e.start)
        .min()
        .expect("the job ran");
    let blocked = first - slot;
    assert!(
        blocked <= chrono::Duration::milliseconds(3_000 + 1_000 + 300),
        "blocked for {blocked}: at most the stale threshold, one tick and the second look"
    );
    assert!(ledger.overlaps().is_empty(), "{:#?}", ledger.overlaps());
}

/// The same frozen holder of a job whose next slot is far away: the recovery round finds the
/// frozen run stale, ends the holder's lock session (the holder hears that its lock is gone) and
/// runs the slot again within the stale threshold and one round.
#[tokio::test(start_paused = true)]
async fn a_frozen_lock_holders_lock_is_broken_for_its_stale_run() {
    let (store, ledger, frozen, lease, slot) = frozen_holder("*/30 * * * * *").await;
    assert!(
        frozen.lost.is_cancelled(),
        "the frozen holder's lock was broken"
    );
    let refused = store.heartbeat("frozen", &[lease.token]).await.unwrap();
    assert!(refused.is_empty(), "and its run taken over");
    let again = ledger
        .all()
        .into_iter()
        .find(|e| e.slot == slot)
        .expect("the frozen holder's slot ran again");
    // Its last heartbeat was at its claim, 01:00:00.900: stale 3 s later, recovered by the next round.
    let since_heartbeat = again.start - at("2026-03-02T01:00:00.900Z");
    assert!(
        since_heartbeat <= chrono::Duration::milliseconds(3_000 + 1_000 + 300),
        "recovered {since_heartbeat} after its last heartbeat"
    );
}

/// What [`frozen_holder`] leaves to check.
type Frozen = (
    MemoryBackend,
    Ledger,
    slotguard::store::LockLease,
    slotguard::store::Lease,
    DateTime<Utc>,
);

/// Replica `b` with one job at `cron` (0.5 s bodies, stale 3 s, recovery every 1 s) beside a frozen
/// process that holds the job's lock and the run of 01:00:00; runs 6 s from 01:00:00.900.
async fn frozen_holder(cron: &str) -> Frozen {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.900Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ledger = Ledger::default();
    let job = ledger.job("busy", cron, 0.5, clock, "b");
    let scheduler = Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id("b")
        .stale_after(Duration::from_secs(3))
        .recovery_interval(Duration::from_secs(1))
        .job(job)
        .build()
        .unwrap();
    let key = scheduler.jobs().next().unwrap().lock_key;
    // The frozen process holds the lock and the run of 01:00:00; it never beats again.
    let frozen = store
        .try_lock("frozen", &[key])
        .await
        .unwrap()
        .remove(0)
        .unwrap();
    let slot = at("2026-03-02T01:00:00Z");
    let slotguard::store::Claim::Won(lease) = store
        .claim("frozen", &[request("busy", slot)])
        .await
        .unwrap()[0]
        .clone()
    else {
        panic!("the frozen process claims its slot");
    };
    let handle = scheduler.try_start().await.unwrap();
    sleep(6.0).await;
    handle.shutdown().await;
    (store, ledger, frozen, lease, slot)
}

/// Only the lock's session dies while a `slot`-level run holds it: the row is still the run's, so
/// it goes on, is not told it lost, and is recorded once. At the `lock` level, the run is told.
#[tokio::test(start_paused = true)]
async fn a_lost_lock_session_ends_a_lock_level_run_but_not_a_slot_level_one() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:09.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ledger = Ledger::default();
    let jobs = vec![
        ledger.job("rows", "*/10 * * * * *", 2.0, clock, "a"),
        ledger
            .job("locked", "*/10 * * * * *", 2.0, clock, "a")
            .guard(GuardLevel::Lock),
    ];
    let scheduler = Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id("a")
        .jobs(jobs)
        .build()
        .unwrap();
    let keys: HashMap<String, i64> = scheduler
        .jobs()
        .map(|j| (j.name.to_owned(), j.lock_key))
        .collect();
    let handle = scheduler.try_start().await.unwrap();
    sleep(1.0).await;
    assert!(
        store.break_lock(keys["rows"]),
        "the session holding `rows` dies"
    );
    assert!(
        store.break_lock(keys["locked"]),
        "and the one holding `locked`"
    );
    sleep(2.0).await;
    handle.shutdown().await;
    let all = ledger.all();
    let rows: Vec<_> = all.iter().filter(|e| e.job == "rows").collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(!rows[0].lost, "the slot row was still the run's");
    assert_eq!(
        rows[0].end.map(|e| e - rows[0].start),
        Some(chrono::Duration::seconds(2)),
        "it ran to its end"
    );
    let run = store
        .runs()
        .into_iter()
        .find(|r| r.key.job == "rows")
        .unwrap();
    assert_eq!((run.status, run.attempts.len()), (RunStatus::Succeeded, 1));
    assert!(
        !store.lock_holders().contains_key(&keys["rows"]),
        "the lock taken again was released at the end"
    );
    let locked: Vec<_> = all.iter().filter(|e| e.job == "locked").collect();
    assert!(locked.len() == 1 && locked[0].lost, "{locked:?}");
}

/// Three replicas whose timers fire together, five jobs every second: each replica runs a fair
/// share, not the fastest one all of them.
#[tokio::test(start_paused = true)]
async fn the_jobs_of_a_tick_spread_over_the_replicas() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let ledger = Ledger::default();
    let mut handles = Vec::new();
    for id in ["r1", "r2", "r3"] {
        let jobs = (0..5)
            .map(|i| ledger.job(&format!("job-{i}"), "* * * * * *", 0.1, clock, id))
            .collect();
        handles.push(replica(&store, clock, id, jobs, Duration::from_millis(20)).await);
    }
    sleep(20.0).await;
    for handle in &handles {
        handle.shutdown().await;
    }
    let all = ledger.all();
    assert!(all.len() >= 95, "{} executions", all.len());
    for id in ["r1", "r2", "r3"] {
        let share = all.iter().filter(|e| e.replica == id).count() as f64 / all.len() as f64;
        assert!(
            share >= 0.15,
            "{id} ran {:.0}% of {}",
            share * 100.0,
            all.len()
        );
    }
    let mut per_slot: HashMap<(String, DateTime<Utc>), usize> = HashMap::new();
    for e in &all {
        *per_slot.entry((e.job.clone(), e.slot)).or_default() += 1;
    }
    assert!(per_slot.values().all(|&n| n == 1), "each slot ran once");
}
