//! History retention through the scheduler, in paused tokio time on the memory backend: a
//! per-second job's finished runs older than its retention are pruned by one replica, counted in
//! `job_runs_pruned_total`; newer runs and a retriable old run are kept; nothing is pruned while
//! another process holds the prune lock. The metrics recorder is global: one test installs it, and
//! the other's job has a name of its own.

use slotguard::store::SlotStoreExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use slotguard::store::{
    AdminStore, ClaimRequest, Finish, LockStore, PRUNE_LOCK_KEY, RunFilter, RunRecord, RunStatus,
    SlotKey, SlotStore, Trigger,
};
use slotguard::{Clock, Job, MemoryBackend, Overlap, Scheduler, TokioClock};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn request(job: &str, slot: &str) -> ClaimRequest {
    let at = at(slot);
    ClaimRequest {
        key: SlotKey {
            job: job.into(),
            scheduled_at: at,
            partition: String::new(),
        },
        trigger: Trigger::Schedule,
        zone: "UTC".into(),
        wall: at.naive_utc(),
        business_date: at.date_naive(),
        fingerprint: 1,
        stale_after: Duration::from_secs(30),
        overlap: Overlap::Allow,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    }
}

/// Claims `slot` of `job` for another process and finishes it with `finish`.
async fn seeded(store: &MemoryBackend, job: &str, slot: &str, finish: Finish) {
    let claims = store
        .claim("old-replica", &[request(job, slot)])
        .await
        .unwrap();
    let slotguard::store::Claim::Won(lease) = claims[0].clone() else {
        panic!("{claims:?}")
    };
    assert!(
        store
            .finish_one("old-replica", &lease, &finish)
            .await
            .unwrap()
    );
}

async fn runs(store: &MemoryBackend, job: &str) -> Vec<RunRecord> {
    let filter = RunFilter {
        job: Some(job.into()),
        limit: 1_000,
        ..RunFilter::default()
    };
    AdminStore::runs(store, &filter).await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_per_second_jobs_runs_past_their_retention_are_pruned() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();

    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    // Old history: a run waiting an hour for its next attempt (retriable), and a job that no
    // replica here runs.
    let handed = Finish::abandoned("shutdown", Some(Duration::from_secs(3600)));
    seeded(&store, "tick", "2026-03-02T00:00:00Z", handed).await;
    seeded(
        &store,
        "elsewhere",
        "2026-03-02T00:00:00Z",
        Finish::succeeded(),
    )
    .await;

    let bodies = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for id in ["a", "b"] {
        let counted = Arc::clone(&bodies);
        let tick = Job::new("tick", "* * * * * *", move |_| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        })
        .retention(Duration::from_secs(5));
        let scheduler = Scheduler::builder()
            .backend(store.clone())
            .clock(clock)
            .instance_id(id)
            .retention(Duration::from_secs(3600))
            .prune_interval(Duration::from_secs(1))
            .job(tick)
            .build()
            .unwrap();
        handles.push(scheduler.try_start().await.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(20)).await;
    for h in handles {
        h.shutdown().await;
    }

    let now = clock.now();
    let kept = runs(&store, "tick").await;
    let (retriable, recent): (Vec<_>, Vec<_>) = kept
        .iter()
        .partition(|r| r.key.scheduled_at < at("2026-03-02T01:00:00Z"));
    assert_eq!(retriable.len(), 1, "the retriable old run is kept");
    assert_eq!(retriable[0].status, RunStatus::Abandoned);
    assert!(recent.iter().all(|r| r.status == RunStatus::Succeeded));
    // Pruned every second: nothing finished more than 5 s + one interval ago is left.
    let oldest = recent.iter().filter_map(|r| r.finished_at).min().unwrap();
    assert!(
        now - oldest <= chrono::Duration::seconds(6),
        "{now} - {oldest}"
    );
    assert!(
        (5..=7).contains(&recent.len()),
        "about 5 s of per-second runs: {}",
        recent.len()
    );
    assert_eq!(
        runs(&store, "elsewhere").await.len(),
        1,
        "not this scheduler's job"
    );

    let ran = bodies.load(Ordering::Relaxed);
    assert!(ran >= 19, "{ran}");
    let snapshot = snapshotter.snapshot().into_vec();
    let pruned = snapshot
        .iter()
        .find_map(|(key, _, _, value)| {
            let key = key.key();
            let ours = key.name() == "job_runs_pruned_total"
                && key
                    .labels()
                    .any(|l| l.key() == "job_name" && l.value() == "tick");
            match value {
                DebugValue::Counter(n) if ours => Some(*n),
                _ => None,
            }
        })
        .expect("job_runs_pruned_total{job_name=tick}");
    assert_eq!(
        pruned,
        ran - recent.len() as u64,
        "every run that ran and is gone was counted once"
    );
}

/// While another process holds the prune lock, no replica prunes; once it lets go, one does.
#[tokio::test(start_paused = true)]
async fn nothing_is_pruned_while_another_process_holds_the_prune_lock() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let held = store
        .try_lock("pruner-elsewhere", &[PRUNE_LOCK_KEY])
        .await
        .unwrap();
    assert!(held[0].is_some());
    let job = Job::new("held", "* * * * * *", |_| async {}).retention(Duration::from_secs(2));
    let handle = Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id("a")
        .prune_interval(Duration::from_secs(1))
        .job(job)
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let before = runs(&store, "held").await.len();
    assert!(
        before >= 9,
        "every run kept while the lock is held: {before}"
    );
    store
        .unlock("pruner-elsewhere", &[PRUNE_LOCK_KEY])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = runs(&store, "held").await.len();
    assert!(
        after <= 4,
        "pruned once the lock was free: {before} then {after}"
    );
    handle.shutdown().await;
}
