//! Real check-ins over real sockets: a local axum receiver, a real scheduler on the memory backend.
//! The receiver answers, answers slowly, fails, or is not there at all; runs start and end on time
//! whatever it does.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use serde_json::Value;
use slotguard::monitor::{BACKOFF, CALL_TIMEOUT, Monitor, TRIES};
use slotguard::{Job, JobContext, JobError, MemoryBackend, Scheduler, SchedulerHandle};
use slotguard_checkins::{SentryCrons, Webhook};

/// A request as the receiver saw it: path, `authorization` header, JSON body.
type Seen = (String, Option<String>, Value);

/// A local HTTP receiver that records every request on arrival, then waits `delay` and answers
/// `status`.
#[derive(Clone)]
struct Receiver {
    seen: Arc<Mutex<Vec<Seen>>>,
    delay: Duration,
    status: StatusCode,
}

impl Receiver {
    async fn start(delay: Duration, status: StatusCode) -> (Self, SocketAddr) {
        let receiver = Receiver {
            seen: Arc::default(),
            delay,
            status,
        };
        let app = Router::new().fallback(record).with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many runs checked in (distinct check-in ids).
    fn runs(&self) -> usize {
        let mut ids: Vec<String> = self
            .seen()
            .iter()
            .map(|s| s.2["check_in_id"].to_string())
            .collect();
        ids.sort();
        ids.dedup();
        ids.len()
    }

    fn statuses(&self) -> Vec<String> {
        let seen = self.seen();
        seen.iter()
            .map(|s| s.2["status"].as_str().unwrap_or("?").to_owned())
            .collect()
    }
}

async fn record(State(receiver): State<Receiver>, request: Request) -> StatusCode {
    let path = request.uri().path().to_owned();
    let auth = request
        .headers()
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    receiver.seen.lock().unwrap().push((path, auth, body));
    tokio::time::sleep(receiver.delay).await;
    receiver.status
}

/// A port nothing listens on.
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// Each run's lag behind its slot at the body's first line, and how long it ran.
type Runs = Arc<Mutex<Vec<(Duration, Duration)>>>;

/// A job every second that works `work` and records its start lag and its run time.
fn job(name: &str, runs: &Runs, work: Duration, fail: bool) -> Job {
    let runs = Arc::clone(runs);
    Job::new(name, "* * * * * *", move |ctx: JobContext| {
        let lag = (slotguard::chrono::Utc::now() - ctx.scheduled_at())
            .to_std()
            .unwrap_or_default();
        let runs = Arc::clone(&runs);
        async move {
            let started = std::time::Instant::now();
            tokio::time::sleep(work).await;
            runs.lock().unwrap().push((lag, started.elapsed()));
            if fail {
                Err(JobError::permanent("the ledger does not balance"))
            } else {
                Ok(())
            }
        }
    })
}

/// A scheduler of `job` on a memory backend, real time, claims 200 ms ahead so that the body
/// starts at its instant.
fn start(job: Job, monitor: Option<Arc<dyn Monitor>>) -> SchedulerHandle {
    let job = match monitor {
        Some(monitor) => job.monitor(monitor),
        None => job,
    };
    Scheduler::builder()
        .backend(MemoryBackend::new())
        .instance_id("checkins-test")
        .load_spread(Duration::ZERO)
        .claim_ahead(Duration::from_millis(200))
        .job(job)
        .build()
        .unwrap()
        .start()
}

fn lags(runs: &Runs) -> Vec<Duration> {
    let mut lags: Vec<_> = runs.lock().unwrap().iter().map(|r| r.0).collect();
    lags.sort();
    lags
}

fn median(sorted: &[Duration]) -> Duration {
    sorted[sorted.len() / 2]
}

/// Runs a job with `monitor` and the same job without one side by side for `secs`; asserts every
/// run started and ended on time, and that the monitor added under 5 ms to the median start lag.
async fn compare_start_lag(what: &str, monitor: Arc<dyn Monitor>, secs: f64) {
    let work = Duration::from_millis(300);
    let (plain, watched): (Runs, Runs) = (Runs::default(), Runs::default());
    let a = start(job("plain", &plain, work, false), None);
    let b = start(job("watched", &watched, work, false), Some(monitor));
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    a.shutdown().await;
    b.shutdown().await;
    let (plain_lags, watched_lags) = (lags(&plain), lags(&watched));
    println!(
        "{what}: start lag without monitor median {:?} max {:?}; with monitor median {:?} max {:?} ({} runs)",
        median(&plain_lags),
        plain_lags.last().unwrap(),
        median(&watched_lags),
        watched_lags.last().unwrap(),
        watched_lags.len()
    );
    assert!(watched_lags.len() >= plain_lags.len().saturating_sub(1) && watched_lags.len() >= 2);
    let added = median(&watched_lags).saturating_sub(median(&plain_lags));
    assert!(
        added < Duration::from_millis(5),
        "{what}: the monitor added {added:?}"
    );
    for (lag, took) in watched.lock().unwrap().iter() {
        assert!(
            *lag < Duration::from_millis(50),
            "{what}: a start {lag:?} late"
        );
        assert!(
            *took < work + Duration::from_millis(50),
            "{what}: a run took {took:?}"
        );
    }
}

/// Waits up to `limit` for the receiver to have seen `count` requests.
async fn wait_for(receiver: &Receiver, count: usize, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while receiver.seen().len() < count && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_gets_in_progress_then_ok_for_the_same_check_in() {
    let (receiver, addr) = Receiver::start(Duration::ZERO, StatusCode::ACCEPTED).await;
    let sentry = SentryCrons::from_dsn("https://pubkey@o1.ingest.sentry.io/42")
        .unwrap()
        .base_url(&format!("http://{addr}"))
        .unwrap()
        .environment("test");
    let runs = Runs::default();
    let handle = start(
        job("Nightly_Report", &runs, Duration::from_millis(150), false),
        Some(Arc::new(sentry)),
    );
    wait_for(&receiver, 2, Duration::from_secs(3)).await;
    handle.shutdown().await;
    let seen = receiver.seen();
    assert_eq!(receiver.statuses()[..2], ["in_progress", "ok"]);
    let ((path, _, start), (_, _, end)) = (&seen[0], &seen[1]);
    assert_eq!(path, "/api/42/cron/nightly_report/pubkey/");
    assert_eq!(start["check_in_id"], end["check_in_id"]);
    assert_eq!(start["check_in_id"].as_str().unwrap().len(), 36);
    assert_eq!(start["environment"], "test");
    assert!(start.get("duration").is_none());
    let took = end["duration"].as_f64().unwrap();
    assert!((0.15..0.25).contains(&took), "duration {took}");
    // Six fields (seconds): no crontab Sentry reads, so no monitor_config.
    assert!(start.get("monitor_config").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_gets_the_event_and_an_error_for_a_failing_body() {
    let (receiver, addr) = Receiver::start(Duration::ZERO, StatusCode::OK).await;
    let hook = Webhook::new(&format!("http://{addr}/hooks/cron"))
        .unwrap()
        .header("authorization", "Bearer s3cret")
        .unwrap();
    let runs = Runs::default();
    let handle = start(
        job("settle", &runs, Duration::from_millis(50), true),
        Some(Arc::new(hook)),
    );
    wait_for(&receiver, 2, Duration::from_secs(3)).await;
    handle.shutdown().await;
    let seen = receiver.seen();
    assert_eq!(receiver.statuses()[..2], ["in_progress", "error"]);
    let ((path, auth, start), (_, _, end)) = (&seen[0], &seen[1]);
    assert_eq!(
        (path.as_str(), auth.as_deref()),
        ("/hooks/cron", Some("Bearer s3cret"))
    );
    assert_eq!(start["job"], "settle");
    assert_eq!(start["trigger"], "schedule");
    assert_eq!(start["attempt"], 1);
    assert!(start["run_id"].is_i64());
    assert_eq!(start["partition"], Value::Null);
    assert_eq!(start["duration"], Value::Null);
    assert_eq!(start["monitor"]["cron"], "* * * * * *");
    assert_eq!(start["monitor"]["zone"], "UTC");
    assert_eq!(start["scheduled_at"], end["scheduled_at"]);
    assert!(start["scheduled_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(end["error"], "the ledger does not balance");
    assert!(end["duration"].as_f64().unwrap() >= 0.05);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_receiver_delays_no_run_and_gets_a_bounded_number_of_requests() {
    let (receiver, addr) = Receiver::start(Duration::from_secs(2), StatusCode::OK).await;
    let hook = Webhook::new(&format!("http://{addr}/")).unwrap();
    compare_start_lag("slow receiver (2 s per request)", Arc::new(hook), 2.2).await;
    // Each check-in: TRIES calls cut at CALL_TIMEOUT, with the backoff between them.
    let expected = 2 * TRIES as usize * receiver.runs();
    let per_check_in = CALL_TIMEOUT * TRIES + BACKOFF * 3;
    wait_for(
        &receiver,
        expected,
        per_check_in * 2 + Duration::from_secs(1),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(receiver.seen().len(), expected, "{:?}", receiver.statuses());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_delays_no_run() {
    let hook = Webhook::new(&format!("http://{}/", closed_port())).unwrap();
    compare_start_lag("receiver down (port closed)", Arc::new(hook), 3.2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_gets_each_check_in_a_bounded_number_of_times() {
    let (receiver, addr) = Receiver::start(Duration::ZERO, StatusCode::INTERNAL_SERVER_ERROR).await;
    let hook = Webhook::new(&format!("http://{addr}/")).unwrap();
    let runs = Runs::default();
    let handle = start(
        job("flaky_hook", &runs, Duration::from_millis(50), false),
        Some(Arc::new(hook)),
    );
    wait_for(&receiver, 1, Duration::from_secs(2)).await;
    // Let the first run's check-ins exhaust their tries, then stop before the next slot's.
    tokio::time::sleep(Duration::from_millis(800)).await;
    handle.shutdown().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let statuses = receiver.statuses();
    assert_eq!(
        statuses.len(),
        2 * TRIES as usize * receiver.runs(),
        "{statuses:?}"
    );
    assert!(!runs.lock().unwrap().is_empty(), "the runs went ahead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentry_upserts_the_monitor_from_a_crontab_job_run_by_hand() {
    let (receiver, addr) = Receiver::start(Duration::ZERO, StatusCode::ACCEPTED).await;
    let sentry = SentryCrons::from_dsn(&format!("http://pubkey@{addr}/42")).unwrap();
    let backend = MemoryBackend::new();
    let handle = Scheduler::builder()
        .backend(backend.clone())
        .recovery_interval(Duration::from_millis(50))
        .job(
            Job::new("nightly", "0 3 * * *", |_ctx: JobContext| async {})
                .tz("Europe/Berlin")
                .deadline(Duration::from_secs(90))
                .timeout(Duration::from_secs(600))
                .monitor(Arc::new(sentry)),
        )
        .build()
        .unwrap()
        .start();
    let admin = slotguard_admin::Admin::new(backend);
    let by = slotguard_admin::ChangeRequest::new("ops", "check the monitor");
    // Registration is a start-up task: retry until the job is known.
    let mut triggered = None;
    for _ in 0..40 {
        if let Ok(done) = admin.trigger("nightly", &by).await {
            triggered = Some(done);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(triggered.is_some(), "the trigger was taken");
    wait_for(&receiver, 2, Duration::from_secs(3)).await;
    handle.shutdown().await;
    assert_eq!(receiver.statuses()[..2], ["in_progress", "ok"]);
    let (path, _, start) = &receiver.seen()[0];
    assert_eq!(path, "/api/42/cron/nightly/pubkey/");
    assert_eq!(
        start["monitor_config"],
        serde_json::json!({
            "schedule": { "type": "crontab", "value": "0 3 * * *" },
            "checkin_margin": 2,
            "max_runtime": 10,
            "timezone": "Europe/Berlin",
        })
    );
}
