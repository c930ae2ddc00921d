//! A replica whose network holds its store calls up (the `proxy` fault scenario's blackhole) never
//! runs a body beside another replica's: an attempt is trusted only for the stale threshold from
//! the sending of its last confirmed claim or heartbeat, by the replica's own clock. A claim
//! answered later never starts its body; a body whose heartbeats hang is told to stop before the
//! store lets another replica take its slot over.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::RunStatus;
use slotguard::{Clock, Job, JobContext, MemoryBackend, Scheduler, TokioClock};

#[path = "support/faulty_store.rs"]
mod faulty_store;
use faulty_store::Faulty;

const STALE: Duration = Duration::from_secs(3);

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// What the bodies did: how many started, the most that ran at once, and each start and stop by
/// the store's clock with the replica's name.
#[derive(Default)]
struct Bodies {
    running: AtomicU32,
    most: AtomicU32,
    started: AtomicU32,
    events: Mutex<Vec<(DateTime<Utc>, &'static str, &'static str)>>,
}

impl Bodies {
    /// A body of `work` that stops early when told it lost the run.
    async fn run(
        &self,
        ctx: JobContext,
        clock: &TokioClock,
        replica: &'static str,
        work: Duration,
    ) {
        self.started.fetch_add(1, Ordering::AcqRel);
        let now = self.running.fetch_add(1, Ordering::AcqRel) + 1;
        self.most.fetch_max(now, Ordering::AcqRel);
        self.events
            .lock()
            .unwrap()
            .push((clock.now(), replica, "start"));
        let end = tokio::select! {
            () = tokio::time::sleep(work) => "end",
            () = ctx.lost() => "lost",
        };
        self.events
            .lock()
            .unwrap()
            .push((clock.now(), replica, end));
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A once-a-minute job with bodies of `work` on two replicas: `held` (its store calls held up as
/// `delay` and `hang` say: `hang` cuts it off after its claims) offers the 01:01:00 slot first, `healthy` 900 ms later. Runs for a
/// minute and answers what the bodies did, each slot's status and attempt, and whether both
/// replicas shut down within 30 s.
async fn two_replicas(
    delay: Duration,
    hang: bool,
    work: Duration,
) -> (Arc<Bodies>, Vec<(RunStatus, u32)>, bool) {
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:59.500Z"));
    let memory = Arc::new(MemoryBackend::with_clock(Arc::new(clock)));
    let bodies = Arc::new(Bodies::default());
    let mut handles = Vec::new();
    for (id, delay, hang) in [("held", delay, hang), ("healthy", Duration::ZERO, false)] {
        let store = Faulty {
            inner: Arc::clone(&memory),
            claim_delay: delay,
            cut_off: AtomicBool::new(hang),
            ..Faulty::default()
        }
        .into_store();
        let b = Arc::clone(&bodies);
        let job = Job::new("settle", "0 * * * * *", move |ctx: JobContext| {
            let b = Arc::clone(&b);
            async move { b.run(ctx, &clock, id, work).await }
        });
        let builder = Scheduler::builder()
            .store(store)
            .clock(clock)
            .instance_id(id)
            .stale_after(STALE)
            .recovery_interval(Duration::from_millis(500))
            .job(job);
        handles.push(builder.build().unwrap().try_start().await.unwrap());
        tokio::time::sleep(Duration::from_millis(900)).await;
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    let mut shut_down = true;
    for handle in handles {
        // A store that never answers must not hold shutdown up.
        let shut = tokio::time::timeout(Duration::from_secs(30), handle.shutdown()).await;
        shut_down &= shut.is_ok();
    }
    let rows = memory
        .runs()
        .iter()
        .map(|r| (r.status, r.attempt))
        .collect();
    (bodies, rows, shut_down)
}

#[tokio::test(start_paused = true)]
async fn a_claim_answered_after_the_stale_threshold_never_starts_its_body() {
    // The claim lands at 01:01:00 and its answer 5 s later; the healthy replica takes the stale
    // attempt over after 3 s and runs the slot for 4 s.
    let (bodies, rows, shut_down) =
        two_replicas(Duration::from_secs(5), false, Duration::from_secs(4)).await;
    let events = bodies.events.lock().unwrap().clone();
    assert_eq!(
        bodies.most.load(Ordering::Acquire),
        1,
        "bodies overlapped: {events:?}"
    );
    assert!(
        events.iter().all(|(_, replica, _)| *replica == "healthy"),
        "the held replica started a body on a claim it could no longer trust: {events:?}"
    );
    // Every slot ran once: on the take-over where the held replica had claimed it.
    assert_eq!(bodies.started.load(Ordering::Acquire), 2, "{events:?}");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter()
            .all(|(status, _)| *status == RunStatus::Succeeded),
        "{rows:?}"
    );
    assert_eq!(rows[0], (RunStatus::Succeeded, 2), "{rows:?}");
    assert!(shut_down, "shutdown waited on the held-up store");
}

#[tokio::test(start_paused = true)]
async fn a_body_whose_heartbeats_hang_is_told_to_stop_before_another_may_take_over() {
    // The held replica wins 01:01:00 and runs it for 10 s, but is cut off from the store after
    // its claim: none of its heartbeats is answered, its outcome cannot be written.
    let (bodies, rows, shut_down) =
        two_replicas(Duration::ZERO, true, Duration::from_secs(10)).await;
    let events = bodies.events.lock().unwrap().clone();
    assert_eq!(
        bodies.most.load(Ordering::Acquire),
        1,
        "bodies overlapped: {events:?}"
    );
    let first = |replica: &str, what: &str| {
        events
            .iter()
            .find(|(_, r, w)| *r == replica && *w == what)
            .map(|(t, ..)| *t)
            .unwrap_or_else(|| panic!("no {what} of {replica}: {events:?}"))
    };
    let (started, told) = (first("held", "start"), first("held", "lost"));
    // Told within the stale threshold of its claim, and before the slot was taken over.
    assert!(
        told - started < chrono::Duration::from_std(STALE).unwrap(),
        "{events:?}"
    );
    assert!(told < first("healthy", "start"), "{events:?}");
    assert_eq!(rows[0], (RunStatus::Succeeded, 2), "{rows:?}");
    assert!(shut_down, "shutdown waited on the held-up store");
}
