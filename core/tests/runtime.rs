//! The runtime in paused tokio time: timer, guards, panics, shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::RunStatus;
use slotguard::{
    GuardLevel, Job, JobContext, JobError, MemoryBackend, Scheduler, SchedulerBuilder, TokioClock,
};

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

const START: &str = "2026-03-08T06:59:59.500Z";

fn builder(clock: TokioClock) -> SchedulerBuilder {
    Scheduler::builder()
        .clock(clock)
        .grace_period(Duration::from_secs(5))
}

async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

/// (job, slot) of every start.
type Starts = Arc<Mutex<Vec<(String, DateTime<Utc>)>>>;

/// Records every start, and the largest number of bodies running at once.
#[derive(Clone, Default)]
struct Ledger {
    starts: Starts,
    running: Arc<AtomicUsize>,
    max_running: Arc<AtomicUsize>,
}

impl Ledger {
    fn job(&self, name: &str, cron: &str, work_secs: f64) -> Job {
        let ledger = self.clone();
        let owner = name.to_owned();
        Job::new(name, cron, move |ctx: JobContext| {
            let ledger = ledger.clone();
            let owner = owner.clone();
            async move {
                ledger
                    .starts
                    .lock()
                    .unwrap()
                    .push((owner, ctx.scheduled_at()));
                let now = ledger.running.fetch_add(1, Ordering::SeqCst) + 1;
                ledger.max_running.fetch_max(now, Ordering::SeqCst);
                sleep(work_secs).await;
                ledger.running.fetch_sub(1, Ordering::SeqCst);
            }
        })
    }

    fn slots(&self) -> Vec<DateTime<Utc>> {
        let mut v: Vec<_> = self.starts.lock().unwrap().iter().map(|s| s.1).collect();
        v.sort();
        v
    }
}

#[tokio::test(start_paused = true)]
async fn fires_every_slot_on_time_from_one_timer() {
    let ledger = Ledger::default();
    let clock = TokioClock::starting_at(at(START));
    let scheduler = builder(clock)
        .job(ledger.job("every_second", "* * * * * *", 0.1))
        .job(ledger.job("every_two", "*/2 * * * * *", 0.1))
        .build()
        .unwrap();
    let handle = scheduler.start();
    sleep(5.0).await;
    let report = handle.shutdown().await;
    assert!(report.finished_in_grace);
    let starts = ledger.starts.lock().unwrap().clone();
    let every_second: Vec<_> = starts
        .iter()
        .filter(|s| s.0 == "every_second")
        .map(|s| s.1)
        .collect();
    assert_eq!(
        every_second,
        (0..5)
            .map(|i| at("2026-03-08T07:00:00Z") + chrono::Duration::seconds(i))
            .collect::<Vec<_>>()
    );
    let every_two = starts.iter().filter(|s| s.0 == "every_two").count();
    assert_eq!(every_two, 3); // :00, :02, :04
}

#[tokio::test(start_paused = true)]
async fn local_guard_skips_overlapping_ticks() {
    let ledger = Ledger::default();
    let clock = TokioClock::starting_at(at(START));
    let scheduler = builder(clock)
        .job(
            ledger
                .job("slow", "* * * * * *", 2.5)
                .guard(GuardLevel::Local),
        )
        .build()
        .unwrap();
    let handle = scheduler.start();
    sleep(7.0).await; // slots :00 .. :06
    handle.shutdown().await;
    // Runs at :00 (until :02.5), :03 (until :05.5), :06; the ticks in between were skipped.
    assert_eq!(
        ledger.slots(),
        vec![
            at("2026-03-08T07:00:00Z"),
            at("2026-03-08T07:00:03Z"),
            at("2026-03-08T07:00:06Z")
        ]
    );
    assert_eq!(ledger.max_running.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn guard_none_allows_overlap() {
    let ledger = Ledger::default();
    let clock = TokioClock::starting_at(at(START));
    let scheduler = builder(clock)
        .job(
            ledger
                .job("slow", "* * * * * *", 2.5)
                .guard(GuardLevel::None),
        )
        .build()
        .unwrap();
    let handle = scheduler.start();
    sleep(4.0).await;
    handle.shutdown().await;
    assert_eq!(ledger.slots().len(), 4);
    assert!(ledger.max_running.load(Ordering::SeqCst) >= 2);
}

#[tokio::test(start_paused = true)]
async fn panics_are_failures_and_release_the_flag() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let backend = MemoryBackend::with_clock(Arc::new(TokioClock::starting_at(at(START))));
    let scheduler = builder(TokioClock::starting_at(at(START)))
        .backend(backend.clone())
        .job(
            Job::new("boom", "* * * * * *", move |_ctx: JobContext| {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    if n.is_multiple_of(2) {
                        panic!("kaboom {n}");
                    }
                }
            })
            .retry(slotguard::RetryPolicy::never()),
        )
        .build()
        .unwrap();
    let handle = scheduler.start();
    sleep(4.0).await;
    handle.shutdown().await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "the scheduler survived every panic"
    );
    let runs = backend.runs();
    assert_eq!(runs.len(), 4);
    let failed: Vec<_> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Failed)
        .collect();
    assert_eq!(failed.len(), 2);
    assert!(
        failed[0].attempts[0]
            .message
            .as_deref()
            .unwrap()
            .contains("panicked: kaboom"),
        "{failed:?}"
    );
    assert_eq!(
        runs.iter()
            .filter(|r| r.status == RunStatus::Succeeded)
            .count(),
        2
    );
}

#[tokio::test(start_paused = true)]
async fn slot_guard_runs_each_slot_once_across_replicas() {
    let ledger = Ledger::default();
    let backend = MemoryBackend::with_clock(Arc::new(TokioClock::starting_at(at(START))));
    let mut handles = Vec::new();
    for replica in 0..3 {
        let scheduler = builder(TokioClock::starting_at(at(START)))
            .instance_id(format!("replica-{replica}"))
            .backend(backend.clone())
            .job(ledger.job("settle", "* * * * * *", 0.2))
            .job(ledger.job("report", "*/3 * * * * *", 0.1))
            .build()
            .unwrap();
        handles.push(scheduler.start());
    }
    sleep(10.0).await;
    for handle in &handles {
        handle.shutdown().await;
    }
    let starts = ledger.starts.lock().unwrap().clone();
    let mut settle: Vec<_> = starts
        .iter()
        .filter(|s| s.0 == "settle")
        .map(|s| s.1)
        .collect();
    settle.sort();
    let expected: Vec<_> = (0..10)
        .map(|i| at("2026-03-08T07:00:00Z") + chrono::Duration::seconds(i))
        .collect();
    assert_eq!(settle, expected, "every slot ran, and ran once");
    assert_eq!(starts.iter().filter(|s| s.0 == "report").count(), 4);
    let runs = backend.runs();
    assert_eq!(runs.len(), 14);
    assert!(
        runs.iter()
            .all(|r| r.status == RunStatus::Succeeded && r.attempts.len() == 1)
    );
    let tokens: std::collections::HashSet<_> = runs.iter().map(|r| r.token).collect();
    assert_eq!(tokens.len(), runs.len(), "fencing tokens are unique");
}

#[tokio::test(start_paused = true)]
async fn lock_guard_never_runs_concurrently_across_replicas() {
    let ledger = Ledger::default();
    let backend = MemoryBackend::new();
    let mut handles = Vec::new();
    for replica in 0..3 {
        let scheduler = builder(TokioClock::starting_at(at(START)))
            .instance_id(format!("replica-{replica}"))
            .backend(backend.clone())
            .job(
                ledger
                    .job("exclusive", "* * * * * *", 1.5)
                    .guard(GuardLevel::Lock),
            )
            .build()
            .unwrap();
        handles.push(scheduler.start());
    }
    sleep(8.0).await;
    for handle in &handles {
        handle.shutdown().await;
    }
    assert_eq!(ledger.max_running.load(Ordering::SeqCst), 1);
    assert!(ledger.slots().len() >= 3, "{:?}", ledger.slots());
    assert!(backend.lock_holders().is_empty(), "every lock released");
}

#[tokio::test(start_paused = true)]
async fn a_lost_lock_tells_the_job() {
    let backend = MemoryBackend::new();
    let told = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&told);
    let scheduler = builder(TokioClock::starting_at(at(START)))
        .backend(backend.clone())
        .job(
            Job::new("long", "0 * * * * *", move |ctx: JobContext| {
                let seen = Arc::clone(&seen);
                async move {
                    tokio::select! {
                        () = ctx.lost() => { seen.fetch_add(1, Ordering::SeqCst); }
                        () = sleep(30.0) => {}
                    }
                    assert!(ctx.is_cancelled(), "a lost run is also told to stop");
                }
            })
            .guard(GuardLevel::Lock)
            .lock_key(7),
        )
        .build()
        .unwrap();
    let handle = scheduler.start();
    sleep(2.0).await;
    assert_eq!(backend.lock_holders().len(), 1);
    assert!(backend.break_lock(7));
    sleep(0.1).await;
    assert_eq!(told.load(Ordering::SeqCst), 1);
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn heartbeat_loss_after_takeover_tells_the_job_and_refuses_its_outcome() {
    let clock = TokioClock::starting_at(at(START));
    let backend = MemoryBackend::with_clock(Arc::new(clock));
    let lost = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&lost);
    let scheduler = builder(clock)
        .instance_id("a")
        .stale_after(Duration::from_secs(3))
        .backend(backend.clone())
        .job(Job::new("long", "0 * * * * *", move |ctx: JobContext| {
            let seen = Arc::clone(&seen);
            async move {
                ctx.lost().await;
                seen.fetch_add(1, Ordering::SeqCst);
                // Keep going as a stubborn job would; its outcome must still be refused.
                Ok::<(), JobError>(())
            }
        }))
        .build()
        .unwrap();
    let handle = scheduler.start();
    sleep(1.0).await;
    // The store goes away long enough for "a"'s heartbeat to go stale ...
    backend.set_unavailable(true);
    sleep(4.5).await;
    backend.set_unavailable(false);
    // ... and "b" takes the slot over with a higher token.
    let request = slotguard::store::ClaimRequest {
        key: slotguard::store::SlotKey {
            job: "long".into(),
            scheduled_at: at("2026-03-08T07:00:00Z"),
            partition: String::new(),
        },
        trigger: slotguard::store::Trigger::Schedule,
        zone: "UTC".into(),
        wall: at("2026-03-08T07:00:00Z").naive_utc(),
        business_date: at("2026-03-08T07:00:00Z").date_naive(),
        fingerprint: 0,
        stale_after: Duration::from_secs(3),
        overlap: slotguard::Overlap::Skip,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    };
    use slotguard::store::SlotStore;
    let claims = backend.claim("b", &[request]).await.unwrap();
    let slotguard::store::Claim::Won(lease) = &claims[0] else {
        panic!("b should take over the stale attempt: {claims:?}");
    };
    assert_eq!(lease.attempt, 2);
    sleep(1.5).await; // "a"'s next heartbeat is refused
    assert_eq!(lost.load(Ordering::SeqCst), 1, "the job was told");
    let run = &backend.runs()[0];
    assert_eq!(
        run.status,
        RunStatus::Running,
        "a's late completion was refused"
    );
    assert_eq!(run.attempts[0].status, RunStatus::Abandoned);
    assert_eq!(run.attempts[1].owner, "b");
    handle.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_runs_within_grace_and_claims_nothing_after() {
    let ledger = Ledger::default();
    let backend = MemoryBackend::new();
    let scheduler = builder(TokioClock::starting_at(at(START)))
        .backend(backend.clone())
        .job(ledger.job("quick", "* * * * * *", 2.0))
        .build()
        .unwrap();
    let handle = scheduler.start();
    sleep(1.0).await; // :00 is running
    assert_eq!(handle.running(), 1);
    let report = handle.shutdown().await;
    assert!(report.finished_in_grace);
    assert_eq!(report.in_flight, 1);
    assert_eq!(report.abandoned, 0);
    let after = ledger.slots().len();
    sleep(5.0).await;
    assert_eq!(
        ledger.slots().len(),
        after,
        "nothing claimed after shutdown"
    );
    assert!(
        backend
            .runs()
            .iter()
            .all(|r| r.status == RunStatus::Succeeded)
    );
    // A second call returns the same report.
    assert_eq!(handle.shutdown().await, report);
}

#[tokio::test(start_paused = true)]
async fn shutdown_past_grace_cancels_and_records_abandoned() {
    let backend = MemoryBackend::new();
    let scheduler = Scheduler::builder()
        .clock(TokioClock::starting_at(at(START)))
        .grace_period(Duration::from_secs(2))
        .kill_after(Duration::from_secs(1))
        .backend(backend.clone())
        .job(Job::new(
            "cooperative",
            "0 * * * * *",
            |ctx: JobContext| async move {
                tokio::select! {
                    () = ctx.cancelled() => Err(JobError::from("stopped by shutdown")),
                    () = sleep(60.0) => Ok(()),
                }
            },
        ))
        .job(Job::new(
            "stubborn",
            "0 * * * * *",
            |_ctx: JobContext| async move {
                sleep(60.0).await;
            },
        ))
        .build()
        .unwrap();
    let handle = scheduler.start();
    sleep(1.0).await;
    assert_eq!(handle.running(), 2);
    let report = handle.shutdown().await;
    assert!(!report.finished_in_grace);
    assert_eq!(report.abandoned, 2);
    assert!(report.took <= Duration::from_secs(4), "{report:?}");
    let runs = backend.runs();
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert_eq!(run.status, RunStatus::Abandoned, "{run:?}");
        assert_eq!(run.attempts[0].message.as_deref(), Some("shutdown"));
    }
    assert!(backend.lock_holders().is_empty());
}

#[tokio::test(start_paused = true)]
async fn external_token_shuts_down() {
    let token = tokio_util::sync::CancellationToken::new();
    let ledger = Ledger::default();
    let handle = builder(TokioClock::starting_at(at(START)))
        .cancellation_token(token.clone())
        .job(ledger.job("tick", "* * * * * *", 0.1))
        .build()
        .unwrap()
        .start();
    sleep(2.0).await;
    token.cancel();
    handle.stopped().await;
    let n = ledger.slots().len();
    sleep(3.0).await;
    assert_eq!(ledger.slots().len(), n);
}

#[tokio::test(start_paused = true)]
async fn context_carries_slot_identity_and_state() {
    struct AppState {
        greeting: &'static str,
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&seen);
    // 2026-03-08 01:59:59 UTC = 10:59:59 in Seoul.
    let handle = Scheduler::builder()
        .clock(TokioClock::starting_at(at("2026-03-08T01:59:59Z")))
        .backend(MemoryBackend::new())
        .state(AppState { greeting: "hi" })
        .job(
            Job::new("settle", "0 11 * * *", move |ctx: JobContext| {
                let out = Arc::clone(&out);
                async move {
                    let state = ctx.state::<AppState>()?;
                    let missing = ctx.state::<String>().unwrap_err().to_string();
                    out.lock().unwrap().push((
                        ctx.idempotency_key().to_owned(),
                        ctx.business_date().to_string(),
                        state.greeting,
                        missing,
                        ctx.attempt(),
                        ctx.fencing_token().is_some(),
                        ctx.job_name().to_owned(),
                    ));
                    Ok::<(), JobError>(())
                }
            })
            .tz("Asia/Seoul"),
        )
        .build()
        .unwrap()
        .start();
    sleep(2.0).await;
    handle.shutdown().await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let (key, date, greeting, missing, attempt, fenced, name) = &seen[0];
    assert_eq!(key, "settle:2026-03-08T02:00:00Z");
    assert_eq!(date, "2026-03-08");
    assert_eq!(*greeting, "hi");
    assert!(missing.contains("alloc::string::String"), "{missing}");
    assert_eq!(*attempt, 1);
    assert!(*fenced);
    assert_eq!(name, "settle");
}

#[tokio::test(start_paused = true)]
async fn store_outage_loses_no_slot_and_recovers() {
    let ledger = Ledger::default();
    let backend = MemoryBackend::new();
    let handle = builder(TokioClock::starting_at(at(START)))
        .backend(backend.clone())
        .job(ledger.job("tick", "* * * * * *", 0.1))
        .build()
        .unwrap()
        .start();
    sleep(2.0).await; // :00 and :01
    backend.set_unavailable(true);
    sleep(2.0).await; // :02 and :03 cannot be claimed while the store is down
    backend.set_unavailable(false);
    sleep(2.0).await; // :04 and :05
    handle.shutdown().await;
    let seconds: Vec<_> = ledger
        .slots()
        .iter()
        .map(|s| s.format("%S").to_string())
        .collect();
    for ran in ["00", "01", "04", "05"] {
        assert!(seconds.iter().any(|s| s == ran), ":{ran} ran: {seconds:?}");
    }
    // :02's window closed (its next slot fell due) while the store was down: it did not run, and
    // it was recorded once the store was back. Every slot either ran or has a row saying why not.
    assert!(!seconds.iter().any(|s| s == "02"), "{seconds:?}");
    let runs = backend.runs();
    for second in ["02", "03"] {
        let slot = at(&format!("2026-03-08T07:00:{second}Z"));
        let row = runs.iter().find(|r| r.key.scheduled_at == slot);
        let ran = seconds.iter().any(|s| s == second);
        let recorded = row.is_some_and(|r| {
            r.status == RunStatus::Skipped
                && r.error_message.as_deref() == Some("store unavailable at its tick")
        });
        assert!(
            ran ^ recorded,
            ":{second} ran ({ran}) or was recorded ({row:?})"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn failed_attempts_are_retried_with_backoff_then_dead() {
    let clock = TokioClock::starting_at(at(START));
    let backend = MemoryBackend::with_clock(Arc::new(clock));
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&attempts);
    let handle = builder(clock)
        .backend(backend.clone())
        .recovery_interval(Duration::from_millis(500))
        .job(
            Job::new("settle", "0 * * * * *", move |ctx: JobContext| {
                let seen = Arc::clone(&seen);
                async move {
                    seen.lock().unwrap().push((
                        ctx.scheduled_at(),
                        ctx.attempt(),
                        ctx.idempotency_key().to_owned(),
                    ));
                    if ctx.scheduled_at() == at("2026-03-08T07:00:00Z") && ctx.attempt() < 2 {
                        return Err(JobError::from("bank timeout"));
                    }
                    if ctx.scheduled_at() == at("2026-03-08T07:01:00Z") {
                        return Err(JobError::from("still down"));
                    }
                    Ok(())
                }
            })
            .retry(
                slotguard::RetryPolicy::exponential(
                    3,
                    Duration::from_secs(5),
                    Duration::from_secs(60),
                )
                .without_jitter(),
            ),
        )
        .build()
        .unwrap()
        .start();
    sleep(90.0).await;
    handle.shutdown().await;
    let attempts = attempts.lock().unwrap().clone();
    let first: Vec<_> = attempts
        .iter()
        .filter(|a| a.0 == at("2026-03-08T07:00:00Z"))
        .map(|a| (a.1, a.2.clone()))
        .collect();
    assert_eq!(
        first,
        [
            (1, "settle:2026-03-08T07:00:00Z".to_owned()),
            (2, "settle:2026-03-08T07:00:00Z".to_owned())
        ],
        "a retry is a new attempt of the same slot, with the same key"
    );
    let second = attempts
        .iter()
        .filter(|a| a.0 == at("2026-03-08T07:01:00Z"))
        .count();
    assert_eq!(second, 3, "three attempts in all");
    let runs = backend.runs();
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    assert_eq!(
        runs[1].status,
        RunStatus::Dead,
        "attempts exhausted: needs a person"
    );
    assert_eq!(runs[1].attempts.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn per_attempt_timeout_fails_the_attempt() {
    let backend = MemoryBackend::new();
    let handle = builder(TokioClock::starting_at(at(START)))
        .backend(backend.clone())
        .job(
            Job::new("slow", "0 * * * * *", |_ctx: JobContext| async {
                sleep(10.0).await;
            })
            .retry(slotguard::RetryPolicy::never())
            .timeout(Duration::from_secs(2)),
        )
        .build()
        .unwrap()
        .start();
    sleep(5.0).await;
    handle.shutdown().await;
    let runs = backend.runs();
    assert_eq!(runs[0].status, RunStatus::Failed);
    assert!(
        runs[0].attempts[0]
            .message
            .as_deref()
            .unwrap()
            .contains("timed out after 2s"),
        "{runs:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_replica_shut_down_past_grace_hands_its_run_over_at_once() {
    let clock = TokioClock::starting_at(at(START));
    let backend = MemoryBackend::with_clock(Arc::new(clock));
    let finished_by = Arc::new(Mutex::new(Vec::new()));
    let job = |who: &'static str, work: f64| {
        let finished_by = Arc::clone(&finished_by);
        Job::new("export", "0 * * * * *", move |ctx: JobContext| {
            let finished_by = Arc::clone(&finished_by);
            async move {
                tokio::select! {
                    () = sleep(work) => {
                        finished_by.lock().unwrap().push((who, ctx.attempt()));
                        Ok(())
                    }
                    () = ctx.cancelled() => Err(JobError::from("told to stop")),
                }
            }
        })
    };
    let a = builder(clock)
        .instance_id("a")
        .backend(backend.clone())
        .grace_period(Duration::from_secs(1))
        .kill_after(Duration::from_millis(200))
        .job(job("a", 30.0))
        .build()
        .unwrap()
        .start();
    sleep(1.0).await; // "a" runs :00
    let report = a.shutdown().await;
    assert_eq!(report.abandoned, 1);
    // "b" starts after the hand-over, with a 1-second recovery poll: it recovers the run at once,
    // not after a stale heartbeat.
    let b = builder(clock)
        .instance_id("b")
        .backend(backend.clone())
        .recovery_interval(Duration::from_secs(1))
        .job(job("b", 1.0))
        .build()
        .unwrap()
        .start();
    sleep(3.0).await;
    b.shutdown().await;
    assert_eq!(*finished_by.lock().unwrap(), [("b", 2)]);
    let run = &backend.runs()[0];
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(run.attempts[0].status, RunStatus::Abandoned);
    assert_eq!(run.attempts[0].owner, "a");
    assert_eq!(run.attempts[1].owner, "b");
}

#[tokio::test(start_paused = true)]
async fn buffer_one_runs_the_newest_waiting_slot_after_the_running_one() {
    let clock = TokioClock::starting_at(at(START));
    let backend = MemoryBackend::with_clock(Arc::new(clock));
    let ledger = Ledger::default();
    let handle = builder(clock)
        .backend(backend.clone())
        .recovery_interval(Duration::from_millis(100))
        .job(
            ledger
                .job("sync", "* * * * * *", 2.5)
                .overlap(slotguard::Overlap::BufferOne),
        )
        .build()
        .unwrap()
        .start();
    sleep(6.0).await;
    handle.shutdown().await;
    assert_eq!(
        ledger.max_running.load(Ordering::SeqCst),
        1,
        "never two at once"
    );
    let seconds: Vec<_> = ledger
        .slots()
        .iter()
        .map(|s| s.format("%S").to_string())
        .collect();
    // :00 runs until :02.5; :01 waits and is superseded by :02, which runs next; and so on.
    assert_eq!(&seconds[..2], ["00", "02"]);
    let runs = backend.runs();
    let skipped: Vec<_> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Skipped)
        .collect();
    assert!(!skipped.is_empty());
    assert!(
        skipped
            .iter()
            .all(|r| r.error_message.as_deref() == Some("overlap: superseded by a newer slot")),
        "{skipped:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn overlap_skip_records_the_skipped_slot_across_replicas() {
    let clock = TokioClock::starting_at(at(START));
    let backend = MemoryBackend::with_clock(Arc::new(clock));
    let ledger = Ledger::default();
    let mut handles = Vec::new();
    for replica in ["a", "b"] {
        handles.push(
            builder(clock)
                .instance_id(replica)
                .backend(backend.clone())
                .job(ledger.job("report", "* * * * * *", 1.5))
                .build()
                .unwrap()
                .start(),
        );
    }
    sleep(4.0).await;
    for h in &handles {
        h.shutdown().await;
    }
    assert_eq!(ledger.max_running.load(Ordering::SeqCst), 1);
    let runs = backend.runs();
    assert!(
        runs.iter().any(|r| r.status == RunStatus::Skipped
            && r.error_message.as_deref() == Some("overlap: a previous run is still running")),
        "{runs:?}"
    );
    assert!(
        runs.iter()
            .all(|r| matches!(r.status, RunStatus::Succeeded | RunStatus::Skipped))
    );
}

/// Issue 21, point 8: a job that asks for state the scheduler was never given fails for good
/// (`dead`, permanent) at its first attempt; no retry can give it the state.
#[tokio::test(start_paused = true)]
async fn missing_state_is_a_permanent_failure() {
    struct Bank;
    let store = MemoryBackend::new();
    let handle = Scheduler::builder()
        .clock(TokioClock::starting_at(at("2026-03-08T01:59:59.500Z")))
        .backend(store.clone())
        .job(
            Job::new("settle", "0 2 * * *", |ctx: JobContext| async move {
                let _bank = ctx.state::<Bank>()?;
                Ok::<(), JobError>(())
            })
            .retry(slotguard::RetryPolicy::exponential(
                5,
                Duration::from_secs(1),
                Duration::from_secs(1),
            )),
        )
        .build()
        .unwrap()
        .start();
    sleep(10.0).await;
    handle.shutdown().await;
    let runs = store.runs();
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0].status, RunStatus::Dead, "{runs:#?}");
    assert_eq!(runs[0].attempt, 1, "{runs:#?}");
    assert_eq!(
        runs[0].error_class.as_deref(),
        Some("permanent"),
        "{runs:#?}"
    );
    let message = runs[0].error_message.as_deref().unwrap_or_default();
    assert!(message.contains("Bank"), "{message}");
}
