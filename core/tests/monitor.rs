//! Check-ins in paused tokio time: what a monitor receives and when, and that a monitor that never
//! answers neither delays nor fails a run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::monitor::{CALL_TIMEOUT, CheckIn, Monitor, MonitorError, TRIES};
use slotguard::store::Trigger;
use slotguard::{
    CheckInStatus, Clock, Job, JobContext, JobError, MemoryBackend, Scheduler, TokioClock,
};

const START: &str = "2026-03-08T06:59:59.500Z";

fn clock() -> TokioClock {
    TokioClock::starting_at(
        DateTime::parse_from_rfc3339(START)
            .unwrap()
            .with_timezone(&Utc),
    )
}

async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

/// Keeps every check-in; `stuck` never answers, `failing` always errs.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<CheckIn>>,
    calls: AtomicUsize,
    stuck: bool,
    failing: bool,
}

#[slotguard::async_trait]
impl Monitor for Recorder {
    async fn check_in(&self, event: &CheckIn) -> Result<(), MonitorError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.stuck {
            std::future::pending::<()>().await;
        }
        if self.failing {
            return Err("receiver said 500".into());
        }
        self.events.lock().unwrap().push(event.clone());
        Ok(())
    }
}

/// A job every second that records each start's lag behind its slot, and works `work` seconds.
fn job(lags: &Arc<Mutex<Vec<Duration>>>, clock: TokioClock, work: f64, fail: bool) -> Job {
    let lags = Arc::clone(lags);
    Job::new("report", "* * * * * *", move |ctx: JobContext| {
        let lag = (clock.now() - ctx.scheduled_at())
            .to_std()
            .unwrap_or_default();
        lags.lock().unwrap().push(lag);
        async move {
            sleep(work).await;
            if fail {
                Err(JobError::permanent("the ledger does not balance"))
            } else {
                Ok(())
            }
        }
    })
    .timeout(Duration::from_secs(90))
}

/// Runs `job` for `secs` on a memory backend with `monitor` (if any) as the scheduler's monitor.
async fn run(job: Job, monitor: Option<Arc<dyn Monitor>>, secs: f64) {
    let mut builder = Scheduler::builder()
        .clock(clock())
        .backend(MemoryBackend::new())
        .job(job);
    if let Some(monitor) = monitor {
        builder = builder.monitor(monitor);
    }
    let handle = builder.build().unwrap().start();
    sleep(secs).await;
    assert!(handle.shutdown().await.finished_in_grace);
}

#[tokio::test(start_paused = true)]
async fn a_run_checks_in_at_start_and_at_success() {
    let monitor = Arc::new(Recorder::default());
    let lags = Arc::default();
    run(job(&lags, clock(), 0.25, false), Some(monitor.clone()), 1.2).await;
    // No wait: shutdown waited for the last run's check-ins.
    let events = monitor.events.lock().unwrap().clone();
    let statuses: Vec<_> = events.iter().map(|e| e.status).collect();
    assert_eq!(statuses, [CheckInStatus::InProgress, CheckInStatus::Ok]);
    let (start, end) = (&events[0], &events[1]);
    assert_eq!(&*start.job, "report");
    assert_eq!(start.scheduled_at.to_rfc3339(), "2026-03-08T07:00:00+00:00");
    assert_eq!((start.attempt, start.trigger), (1, Trigger::Schedule));
    assert!(start.run_id.is_some() && start.duration.is_none());
    assert_eq!(start.id(), end.id(), "both check-ins name the same attempt");
    assert_eq!(end.duration, Some(Duration::from_millis(250)));
    assert_eq!(end.error, None);
    let config = &start.config;
    assert_eq!(
        (config.cron.as_str(), config.zone.as_str()),
        ("* * * * * *", "UTC")
    );
    assert_eq!(config.max_runtime, Some(Duration::from_secs(90)));
    assert_eq!(config.margin, slotguard::monitor::DEFAULT_MARGIN);
}

#[tokio::test(start_paused = true)]
async fn a_failed_run_checks_in_an_error_with_its_message() {
    let monitor = Arc::new(Recorder::default());
    let lags = Arc::default();
    run(job(&lags, clock(), 0.1, true), Some(monitor.clone()), 1.2).await;
    sleep(1.0).await;
    let events = monitor.events.lock().unwrap().clone();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1].status, CheckInStatus::Error);
    assert_eq!(
        events[1].error.as_deref(),
        Some("the ledger does not balance")
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_monitor_replaces_the_schedulers() {
    let (own, shared) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
    let lags = Arc::default();
    let job = job(&lags, clock(), 0.1, false).monitor(own.clone());
    run(job, Some(shared.clone()), 1.2).await;
    sleep(1.0).await;
    assert_eq!(own.events.lock().unwrap().len(), 2);
    assert_eq!(shared.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_monitor_that_never_answers_delays_no_start_and_is_tried_a_bounded_number_of_times() {
    let plain: Arc<Mutex<Vec<Duration>>> = Arc::default();
    run(job(&plain, clock(), 0.5, false), None, 3.2).await;
    let stuck = Arc::new(Recorder {
        stuck: true,
        ..Recorder::default()
    });
    let watched: Arc<Mutex<Vec<Duration>>> = Arc::default();
    run(job(&watched, clock(), 0.5, false), Some(stuck.clone()), 3.2).await;
    let (plain, watched) = (
        plain.lock().unwrap().clone(),
        watched.lock().unwrap().clone(),
    );
    assert_eq!(plain.len(), 3);
    assert_eq!(watched, plain, "every start as late as without a monitor");
    // Every run's two check-ins get TRIES calls of CALL_TIMEOUT each, then are given up.
    sleep(2.0 * TRIES as f64 * (CALL_TIMEOUT.as_secs_f64() + 0.4)).await;
    assert_eq!(stuck.calls.load(Ordering::SeqCst), 3 * 2 * TRIES as usize);
    sleep(60.0).await;
    assert_eq!(stuck.calls.load(Ordering::SeqCst), 3 * 2 * TRIES as usize);
}

#[tokio::test(start_paused = true)]
async fn a_failing_monitor_is_retried_with_backoff_then_given_up() {
    let failing = Arc::new(Recorder {
        failing: true,
        ..Recorder::default()
    });
    let lags = Arc::default();
    run(job(&lags, clock(), 0.1, false), Some(failing.clone()), 1.2).await;
    sleep(30.0).await;
    assert_eq!(failing.calls.load(Ordering::SeqCst), 2 * TRIES as usize);
    assert_eq!(lags.lock().unwrap().len(), 1, "the run itself went ahead");
}
