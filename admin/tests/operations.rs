//! Operating the scheduler, in paused tokio time on the memory backend: catch-up after a full-cluster
//! outage, pause and resume, retry, trigger, cancel, backfill, and the admin API's refusals (missed slots
//! page by page: `missed_pages.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{RunFilter, RunStatus, Trigger};
use slotguard::{
    CatchUp, Clock, Job, JobContext, JobError, MemoryBackend, RetryPolicy, Scheduler,
    SchedulerHandle, TokioClock,
};
use slotguard_admin::{Admin, AdminError, BackfillOptions, ChangeRequest};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

/// One entry per body that started: (slot, trigger, wall time of the start, idempotency key).
type Starts = Arc<Mutex<Vec<(DateTime<Utc>, Trigger, DateTime<Utc>, String)>>>;

fn job(name: &str, cron: &str, starts: &Starts, clock: TokioClock, work: f64) -> Job {
    let starts = Arc::clone(starts);
    Job::new(name, cron, move |ctx: JobContext| {
        let starts = Arc::clone(&starts);
        async move {
            starts.lock().unwrap().push((
                ctx.scheduled_at(),
                ctx.trigger(),
                clock.now(),
                ctx.idempotency_key().to_owned(),
            ));
            sleep(work).await;
        }
    })
}

async fn replica(
    store: &MemoryBackend,
    clock: TokioClock,
    id: &str,
    jobs: Vec<Job>,
) -> (SchedulerHandle, Admin) {
    let scheduler = Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .instance_id(id)
        .stale_after(Duration::from_secs(3))
        .recovery_interval(Duration::from_secs(1))
        .catch_up_rate(2.0)
        .jobs(jobs)
        .build()
        .unwrap();
    let admin = slotguard_admin::Admin::of(&scheduler).unwrap();
    (scheduler.try_start().await.unwrap(), admin)
}

fn by() -> ChangeRequest {
    ChangeRequest::new("ops@example.com", "test")
}

/// Runs a job for three minutes on one replica, stops everything for 30 minutes, then starts three
/// replicas at once; returns the runs of the catch-up phase.
async fn outage_then_three_replicas(policy: CatchUp) -> (Vec<slotguard::store::RunRecord>, Starts) {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let starts = Starts::default();
    let make = |starts: &Starts| job("settle", "0 * * * * *", starts, clock, 0.2).catch_up(policy);
    let (first, _) = replica(&store, clock, "r0", vec![make(&starts)]).await;
    sleep(180.0).await; // slots 01:01, 01:02, 01:03
    first.shutdown().await;
    sleep(1800.0).await; // the whole cluster is down until 01:33:00.5
    let after = Starts::default();
    let mut handles = Vec::new();
    for id in ["a", "b", "c"] {
        handles.push(replica(&store, clock, id, vec![make(&after)]).await.0);
    }
    sleep(20.0).await;
    for h in handles {
        h.shutdown().await;
    }
    (store.runs(), after)
}

fn catch_up_runs(runs: &[slotguard::store::RunRecord]) -> Vec<DateTime<Utc>> {
    runs.iter()
        .filter(|r| r.trigger == Trigger::CatchUp)
        .map(|r| r.key.scheduled_at)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn catch_up_skip_runs_nothing_missed() {
    let (runs, starts) = outage_then_three_replicas(CatchUp::Skip).await;
    assert!(catch_up_runs(&runs).is_empty());
    assert!(
        starts.lock().unwrap().is_empty(),
        "no slot fell due in the 20 s"
    );
}

#[tokio::test(start_paused = true)]
async fn catch_up_latest_runs_only_the_newest_missed_slot_once() {
    let (runs, starts) = outage_then_three_replicas(CatchUp::Latest).await;
    assert_eq!(catch_up_runs(&runs), vec![at("2026-03-02T01:33:00Z")]);
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 1, "three replicas, one execution: {starts:?}");
    assert_eq!(starts[0].1, Trigger::CatchUp);
}

#[tokio::test(start_paused = true)]
async fn catch_up_all_runs_each_missed_slot_once_at_the_configured_rate() {
    let policy = CatchUp::All {
        within: Duration::from_secs(600),
        max_slots: 7,
    };
    let (runs, starts) = outage_then_three_replicas(policy).await;
    // Slots 01:24..01:33 are within 10 minutes of 01:33:00.5; the newest 7 are kept.
    let expected: Vec<DateTime<Utc>> = (27..=33)
        .map(|m| at(&format!("2026-03-02T01:{m:02}:00Z")))
        .collect();
    let mut caught = catch_up_runs(&runs);
    caught.sort();
    assert_eq!(caught, expected);
    for run in runs.iter().filter(|r| r.trigger == Trigger::CatchUp) {
        assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
        assert_eq!(run.attempts.len(), 1, "{run:?}");
    }
    let starts = starts.lock().unwrap().clone();
    let mut slots: Vec<DateTime<Utc>> = starts.iter().map(|s| s.0).collect();
    slots.sort();
    assert_eq!(slots, expected, "each missed slot ran exactly once");
    // 2 per second (the rate) with a burst of one (the jitter): no window of one second holds more
    // than 3, and the 7 runs take at least (7 - 2) / 2 seconds.
    let mut times: Vec<DateTime<Utc>> = starts.iter().map(|s| s.2).collect();
    times.sort();
    for w in times.windows(4) {
        assert!(
            w[3] - w[0] >= chrono::Duration::milliseconds(1000),
            "four catch-up starts within one second: {w:?}"
        );
    }
    assert!(
        times[6] - times[0] >= chrono::Duration::milliseconds(2500),
        "{times:?}"
    );
    // And the first did not wait for the recovery loop.
    assert!(times[0] < at("2026-03-02T01:33:02Z"), "{times:?}");
}

#[tokio::test(start_paused = true)]
async fn paused_job_is_skipped_by_every_replica_until_resumed() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let starts = Starts::default();
    let mut handles = Vec::new();
    let mut admin = None;
    for id in ["a", "b"] {
        let (h, a) = replica(
            &store,
            clock,
            id,
            vec![job("tick", "* * * * * *", &starts, clock, 0.1)],
        )
        .await;
        handles.push(h);
        admin = Some(a);
    }
    let admin = admin.unwrap();
    sleep(3.0).await;
    let before = starts.lock().unwrap().len();
    assert!(before >= 2, "{before}");
    let record = admin.pause("tick", &by()).await.unwrap();
    assert!(record.paused);
    assert_eq!(record.paused_by.as_deref(), Some("ops@example.com"));
    sleep(1.5).await; // one recovery interval: every replica has read the pause
    let paused_at = starts.lock().unwrap().len();
    sleep(5.0).await;
    assert_eq!(
        starts.lock().unwrap().len(),
        paused_at,
        "no run while paused"
    );
    let skipped = admin
        .runs(RunFilter {
            job: Some("tick".into()),
            status: Some(RunStatus::Skipped),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert!(skipped.len() >= 4, "{skipped:?}");
    assert!(
        skipped
            .iter()
            .all(|r| r.error_message.as_deref() == Some("paused"))
    );
    admin.resume("tick", &by()).await.unwrap();
    sleep(3.0).await;
    assert!(
        starts.lock().unwrap().len() > paused_at,
        "runs again after resume"
    );
    let audit = admin.audit(Some("tick"), 10).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|a| a.entry.action.as_str()).collect();
    assert_eq!(actions, ["resume", "pause"]);
    for h in handles {
        h.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn retry_of_a_dead_slot_is_a_new_attempt_of_the_same_run() {
    // 02:00 in Seoul is 17:00 UTC the day before.
    let clock = TokioClock::starting_at(at("2026-03-01T16:59:59.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let calls = Arc::new(Mutex::new(Vec::<(u32, String)>::new()));
    let seen = Arc::clone(&calls);
    let settle = Job::new("daily-settlement", "0 0 2 * * *", move |ctx: JobContext| {
        let seen = Arc::clone(&seen);
        async move {
            let attempt = ctx.attempt();
            seen.lock()
                .unwrap()
                .push((attempt, ctx.idempotency_key().to_owned()));
            if attempt == 1 {
                return Err(JobError::permanent("bank API refused the credentials"));
            }
            Ok(())
        }
    })
    .tz("Asia/Seoul")
    .retry(RetryPolicy::default());
    let (handle, admin) = replica(&store, clock, "a", vec![settle]).await;
    sleep(1.0).await;
    let runs = admin
        .runs(RunFilter {
            job: Some("daily-settlement".into()),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Dead, "{runs:?}");
    let slot = runs[0].key.scheduled_at;
    // Eight operators press retry at once: exactly one new attempt.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let admin = admin.clone();
        tasks.push(tokio::spawn(async move {
            admin
                .retry(
                    "daily-settlement",
                    slot,
                    "",
                    &ChangeRequest::new(format!("op{i}"), "credentials fixed"),
                )
                .await
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(retried) => {
                ok += 1;
                assert_eq!(retried.run.status, RunStatus::Pending);
            }
            Err(AdminError::Refused { status, .. }) => assert_eq!(status, RunStatus::Pending),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(ok, 1);
    sleep(2.0).await;
    let run = admin.run("daily-settlement", slot, "").await.unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(run.attempts.len(), 2);
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].1, calls[1].1, "same slot, same idempotency key");
    // Retrying a succeeded run is refused with the reason.
    let err = admin
        .retry("daily-settlement", slot, "", &by())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already succeeded"), "{err}");
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn trigger_runs_now_under_a_key_that_cannot_collide() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.000Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let starts = Starts::default();
    let (handle, admin) = replica(
        &store,
        clock,
        "a",
        vec![job("report", "0 0 * * * *", &starts, clock, 0.1)],
    )
    .await;
    let triggered = admin.trigger("report", &by()).await.unwrap();
    assert_ne!(triggered.scheduled_at.timestamp_subsec_millis(), 0);
    sleep(1.5).await;
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts[0].1, Trigger::Manual);
    assert_eq!(starts[0].0, triggered.scheduled_at);
    assert!(starts[0].3.ends_with(".001Z"), "{}", starts[0].3);
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn cancel_tells_the_running_job_and_refuses_its_completion() {
    let clock = TokioClock::starting_at(at("2026-03-02T00:59:59.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let told = Arc::new(Mutex::new(false));
    let seen = Arc::clone(&told);
    let long = Job::new("export", "0 0 1 * * *", move |ctx: JobContext| {
        let seen = Arc::clone(&seen);
        async move {
            ctx.lost().await;
            *seen.lock().unwrap() = true;
        }
    });
    let (handle, admin) = replica(&store, clock, "a", vec![long]).await;
    sleep(2.0).await;
    let slot = at("2026-03-02T01:00:00Z");
    assert_eq!(
        admin.run("export", slot, "").await.unwrap().status,
        RunStatus::Running
    );
    let run = admin
        .cancel(
            "export",
            slot,
            "",
            &ChangeRequest::new("ops", "wrong month"),
        )
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(
        run.error_message.as_deref(),
        Some("cancelled by ops: wrong month")
    );
    sleep(2.0).await; // one heartbeat interval (1 s) and then some
    assert!(*told.lock().unwrap(), "the job was told");
    let run = admin.run("export", slot, "").await.unwrap();
    assert_eq!(
        run.status,
        RunStatus::Failed,
        "the completion was refused: {run:?}"
    );
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn missed_and_backfill_fill_gaps_at_the_given_rate() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let starts = Starts::default();
    let (handle, admin) = replica(
        &store,
        clock,
        "a",
        vec![job("hourly", "0 0 * * * *", &starts, clock, 0.1)],
    )
    .await;
    // A day before the job was first registered: nothing of it is missed, and a backfill of it
    // is history from before the job existed, which must be asked for.
    let (from, to) = (at("2026-03-01T00:00:00Z"), at("2026-03-01T06:00:00Z"));
    assert!(admin.missed("hourly", from, to).await.unwrap().is_empty());
    let refused = admin
        .backfill("hourly", from, to, BackfillOptions::default(), &by())
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("first registered"),
        "{refused}"
    );
    let history = BackfillOptions {
        before_first_seen: true,
        ..BackfillOptions::default()
    };
    let dry = admin
        .backfill("hourly", from, to, history, &by())
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!((dry.slots.len(), dry.created), (6, 0));
    let again = admin.backfill("hourly", from, to, history, &by()).await;
    assert_eq!(again.unwrap().slots.len(), 6, "a dry run changes nothing");
    let real = admin
        .backfill(
            "hourly",
            from,
            to,
            BackfillOptions {
                dry_run: false,
                per_second: 2.0,
                before_first_seen: true,
            },
            &by(),
        )
        .await
        .unwrap();
    assert_eq!(real.created, 6);
    let after = admin.backfill("hourly", from, to, history, &by()).await;
    assert!(after.unwrap().slots.is_empty(), "every slot has a row");
    sleep(6.0).await;
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 6);
    assert!(starts.iter().all(|s| s.1 == Trigger::Backfill));
    let (first, last) = (starts[0].2, starts[5].2);
    assert!(
        last - first >= chrono::Duration::milliseconds(2000),
        "paced at 2/s: {first} .. {last}"
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_and_changes_nothing() {
    let store = MemoryBackend::new();
    let scheduler = Scheduler::builder()
        .backend(store.clone())
        .job(Job::new("tick", "* * * * * *", |_| async {}))
        .build()
        .unwrap();
    let admin = slotguard_admin::Admin::of(&scheduler).unwrap();
    let handle = scheduler.try_start().await.unwrap();
    let hostile = "x'; DROP TABLE jobs; --<script>\u{0}";
    match admin.pause(hostile, &by()).await {
        Err(AdminError::UnknownJob { job }) => {
            assert!(job.contains("\\0") && !job.contains('\0'), "{job}")
        }
        other => panic!("{other:?}"),
    }
    let big = ChangeRequest::new("ops", "x".repeat(1 << 20));
    assert!(matches!(
        admin.pause("tick", &big).await,
        Err(AdminError::Invalid {
            field: "reason",
            ..
        })
    ));
    assert!(matches!(
        admin.pause("tick", &ChangeRequest::new("", "why")).await,
        Err(AdminError::Invalid { field: "actor", .. })
    ));
    // A year of per-second slots: refused, never enumerated into a storm.
    let err = admin
        .backfill(
            "tick",
            at("2025-01-01T00:00:00Z"),
            at("2026-01-01T00:00:00Z"),
            BackfillOptions {
                dry_run: false,
                per_second: 10.0,
                before_first_seen: true,
            },
            &by(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, AdminError::Invalid { field: "range", .. }),
        "{err}"
    );
    let err = admin
        .retry("tick", at("2025-01-01T00:00:00Z"), "", &by())
        .await
        .unwrap_err();
    assert!(matches!(err, AdminError::UnknownRun { .. }), "{err}");
    assert!(
        admin.audit(None, 10).await.unwrap().is_empty(),
        "nothing was changed"
    );
    assert!(!admin.job("tick").await.unwrap().paused);
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn each_partition_claims_its_own_row_and_runs_once_in_parallel() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let keys = Arc::new(Mutex::new(Vec::<String>::new()));
    let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let make = || {
        let (keys, running, peak) = (Arc::clone(&keys), Arc::clone(&running), Arc::clone(&peak));
        Job::new("invoice", "* * * * * *", move |ctx: JobContext| {
            let (keys, running, peak) =
                (Arc::clone(&keys), Arc::clone(&running), Arc::clone(&peak));
            async move {
                use std::sync::atomic::Ordering::SeqCst;
                keys.lock().unwrap().push(ctx.idempotency_key().to_owned());
                peak.fetch_max(running.fetch_add(1, SeqCst) + 1, SeqCst);
                sleep(0.3).await;
                running.fetch_sub(1, SeqCst);
                assert!(ctx.partition().is_some());
            }
        })
        .partitions(|| async { Ok::<_, JobError>(["acme", "globex", "initech", "acme", ""]) })
    };
    let mut handles = Vec::new();
    for id in ["a", "b", "c"] {
        handles.push(replica(&store, clock, id, vec![make()]).await.0);
    }
    sleep(3.0).await;
    for h in handles {
        h.shutdown().await;
    }
    let mut keys = keys.lock().unwrap().clone();
    let total = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), total, "each (slot, partition) ran once");
    assert_eq!(total, 9, "3 slots x 3 distinct valid partitions: {keys:?}");
    assert!(keys[0].ends_with(":acme"), "{keys:?}");
    assert!(
        peak.load(std::sync::atomic::Ordering::SeqCst) >= 3,
        "partitions ran in parallel"
    );
    let runs = store.runs();
    assert_eq!(runs.len(), 9);
    assert!(
        runs.iter()
            .all(|r| r.status == RunStatus::Succeeded && !r.key.partition.is_empty())
    );
}

#[test]
fn partitions_need_the_slot_level() {
    let err = Scheduler::builder()
        .job(
            Job::new("tenants", "* * * * *", |_| async {})
                .partitions(|| async { Ok::<_, JobError>(vec!["a".to_owned()]) }),
        )
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("partitions needs the `slot` guard level"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_resumes_from_the_checkpoint_of_the_failed_attempt() {
    let clock = TokioClock::starting_at(at("2026-03-02T00:59:59.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let seen = Arc::new(Mutex::new(Vec::<(u32, Option<String>)>::new()));
    let log = Arc::clone(&seen);
    let export = Job::new("export", "0 0 1 * * *", move |ctx: JobContext| {
        let log = Arc::clone(&log);
        async move {
            log.lock()
                .unwrap()
                .push((ctx.attempt(), ctx.checkpoint().map(str::to_owned)));
            let start: u32 = ctx.checkpoint().map_or(0, |c| c.parse().unwrap());
            for page in start..10 {
                if page == 4 && ctx.attempt() == 1 {
                    return Err(JobError::transient("upstream timed out"));
                }
                ctx.save_checkpoint((page + 1).to_string()).await.unwrap();
            }
            Ok(())
        }
    })
    .retry(RetryPolicy {
        base: Duration::from_secs(1),
        jitter: false,
        ..RetryPolicy::default()
    });
    let (handle, admin) = replica(&store, clock, "a", vec![export]).await;
    sleep(5.0).await;
    let run = admin
        .run("export", at("2026-03-02T01:00:00Z"), "")
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, vec![(1, None), (2, Some("4".to_owned()))]);
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn claim_ahead_claims_early_and_starts_the_body_on_the_instant() {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let starts = Starts::default();
    let scheduler = Scheduler::builder()
        .backend(store.clone())
        .clock(clock)
        .claim_ahead(Duration::from_millis(200))
        .job(job("tick", "* * * * * *", &starts, clock, 0.1))
        .build()
        .unwrap();
    let handle = scheduler.try_start().await.unwrap();
    sleep(0.35).await; // 01:00:00.850: the 01:00:01 slot is claimed, its body not started
    let runs = store.runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].key.scheduled_at, at("2026-03-02T01:00:01Z"));
    assert_eq!(runs[0].created_at, at("2026-03-02T01:00:00.800Z"));
    assert!(
        starts.lock().unwrap().is_empty(),
        "the body waits for its instant"
    );
    sleep(2.0).await;
    handle.shutdown().await;
    let starts = starts.lock().unwrap().clone();
    assert!(starts.len() >= 2, "{starts:?}");
    for (slot, _, started, _) in &starts {
        assert_eq!(started, slot, "the body starts on the slot's instant");
    }
}

#[test]
fn claim_ahead_is_bounded() {
    let err = Scheduler::builder()
        .claim_ahead(Duration::from_secs(5))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("claim_ahead"), "{err}");
}
