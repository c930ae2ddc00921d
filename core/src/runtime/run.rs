//! The run of one job body, with every permit of its chain held, and how it ended.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::context::{JobContext, RunInfo};
use crate::entry::JobEntry;
use crate::guard::{Permit, RunOutcome};
use crate::job::{ErrorClass, JobResult};
use crate::store::Trigger;
use crate::trace;

use super::Runtime;
use super::chain::{Admitted, release};

/// What the body's future gave: `None` when it was dropped (lost ownership, or past `kill_after`
/// in shutdown); `Some(Err)` when it panicked.
type BodyEnd = Option<Result<JobResult, Box<dyn std::any::Any + Send>>>;

/// How a body ended, as the slot layer recorded it.
#[derive(Debug, Clone)]
pub(crate) struct Ended {
    pub(crate) outcome: RunOutcome,
    /// The attempt number (1 without a slot row).
    pub(crate) attempt: u32,
    /// Whether the store recorded the outcome (runs without a slot row: always).
    pub(crate) accepted: bool,
}

/// Runs one admitted body and records how it ended.
pub(crate) async fn execute(rt: Arc<Runtime>, admitted: Admitted) -> Ended {
    let mut info = RunInfo::default();
    for permit in &admitted.permits {
        permit.describe(&mut info);
    }
    let span = admitted.span.clone();
    trace::describe_attempt(&span, &info);
    if let Some(queued_by) = &admitted.run.trace_parent {
        trace::link(&span, queued_by);
    }
    let job = Arc::clone(&admitted.job);
    let attempt = info.attempt.unwrap_or(1);
    rt.running.fetch_add(1, Ordering::AcqRel);
    let scheduled = (admitted.run.trigger == Trigger::Schedule).then(|| {
        let run = &admitted.run;
        (run.slot.scheduled_at, Arc::clone(&run.partition))
    });
    let (outcome, accepted) = run_body(&rt, admitted, info).instrument(span).await;
    rt.running.fetch_sub(1, Ordering::AcqRel);
    if let (true, Some(scheduled)) = (accepted, scheduled) {
        pause_after_failure(&rt, &job, scheduled, attempt, &outcome);
    }
    if job.layers.slot && job.backlog.load(Ordering::Acquire) {
        // More of the job's work waits in the store: the recovery loop looks again now.
        job.look_again.store(true, Ordering::Release);
        rt.due_wake.notify_one();
    }
    Ended {
        outcome,
        attempt,
        accepted,
    }
}

/// After the run of a scheduled slot (its instant and partition) that failed for good (no retry
/// follows), pauses the stored schedules of its job and partition that ask for it, in the
/// background.
fn pause_after_failure(
    rt: &Arc<Runtime>,
    job: &JobEntry,
    (slot, partition): (chrono::DateTime<chrono::Utc>, Arc<str>),
    attempt: u32,
    outcome: &RunOutcome,
) {
    let RunOutcome::Failed { class, message } = outcome else {
        return;
    };
    let retried = matches!(
        job.retry.after_failure(*class, attempt),
        crate::policy::AfterFailure::Retry(_)
    );
    let store = rt.slots.as_ref().and_then(|s| s.store.schedules.clone());
    let (Some(store), false) = (store, retried) else {
        return;
    };
    let key = (Arc::clone(&job.name), partition);
    let failure = super::schedules::failure::pause(store, key, slot, message.clone());
    rt.tracker.spawn(failure);
}

/// The checkpoint the slot layer's permit keeps for this run, if any, read into `ctx`; a read that
/// fails starts the attempt from scratch.
async fn load_checkpoint(ctx: &mut JobContext, permits: &[Box<dyn crate::guard::Permit>]) {
    let Some(checkpoints) = permits.iter().find_map(|p| p.checkpoints()) else {
        return;
    };
    match checkpoints.load().await {
        Ok(saved) => ctx.checkpoint = saved.map(Arc::from),
        Err(e) => {
            tracing::warn!(error = %e, "could not read the checkpoint; the attempt starts from scratch")
        }
    }
    ctx.saver = Some(checkpoints);
}

/// The body's run: its outcome, and whether the store took it.
async fn run_body(rt: &Runtime, admitted: Admitted, info: RunInfo) -> (RunOutcome, bool) {
    let Admitted {
        job,
        run,
        permits,
        span,
        ..
    } = admitted;
    let losses: Vec<CancellationToken> = permits.iter().filter_map(|p| p.loss()).collect();
    let (stop, lost) = (rt.cancel.child_token(), CancellationToken::new());
    let mut ctx = JobContext::new(
        Arc::clone(&job.name),
        &run,
        info.clone(),
        Arc::clone(&rt.state),
        (stop.clone(), lost.clone()),
    );
    ctx.deadlines = permits.iter().filter_map(|p| p.deadline()).collect();
    load_checkpoint(&mut ctx, &permits).await;
    if run.trigger == Trigger::Schedule
        && let Ok(early) = (run.slot.scheduled_at - rt.clock.now()).to_std()
    {
        // Claimed ahead (`claim_ahead`) or spread: the body still starts at the slot's instant.
        tokio::time::sleep(early).await;
    }
    if losses.iter().any(CancellationToken::is_cancelled) {
        return not_started(&rt.abandoned, &job, permits).await;
    }
    // Debug, as is a success: a per-second job would otherwise log two lines a second. Failures,
    // abandonments and refused outcomes stay at warn; `job_run_started_total` counts starts.
    tracing::debug!(event = "job_started", level = %job.level, "job started");
    // One reading of the clock for the lag and the start gauge.
    let now = rt.clock.now();
    let lag = (run.trigger == Trigger::Schedule)
        .then(|| (now - run.slot.scheduled_at).to_std().unwrap_or_default());
    crate::metrics::run_started(&job.name, lag, now.timestamp_millis() as f64 / 1000.0);
    let check_in =
        crate::monitor::deliver::begin(&rt.upkeep, job.monitor.as_ref(), &job.name, &run, &info);
    let started = tokio::time::Instant::now();
    let watch = async {
        wait_any(&losses).await;
        lost.cancel();
        stop.cancel();
        crate::metrics::ownership_lost(&job.name);
        tracing::warn!(
            event = "job_ownership_lost",
            "lost ownership while running; telling the job to stop"
        );
        std::future::pending::<()>().await;
    };
    job.in_body.store(true, Ordering::Release);
    let timed_out = AtomicBool::new(false);
    let ended = tokio::select! {
        ended = body(rt, &job, ctx, &timed_out).instrument(trace::body_span(&span)) => ended,
        () = watch => None,
    };
    job.in_body.store(false, Ordering::Release);
    let panicked = matches!(ended, Some(Err(_)));
    let outcome = outcome(ended, rt.cancel.is_cancelled());
    let took = started.elapsed();
    crate::monitor::deliver::end(check_in, &outcome, took);
    crate::metrics::run_completed(
        &job.name,
        outcome.label(),
        took,
        rt.clock.now().timestamp_millis() as f64 / 1000.0,
    );
    let result = outcome.run_result(panicked, timed_out.load(Ordering::Acquire));
    trace::ended(&span, outcome.label(), result);
    settle(&rt.abandoned, permits, outcome, took).await
}

/// Hands `outcome` to the permits (the slot row records it, the locks are released), counts an
/// abandoned run and logs the end; answers the outcome and whether the store took it.
async fn settle(
    abandoned: &AtomicUsize,
    permits: Vec<Box<dyn Permit>>,
    outcome: RunOutcome,
    took: Duration,
) -> (RunOutcome, bool) {
    let accepted = release(permits, &outcome).await;
    if matches!(outcome, RunOutcome::Abandoned { .. }) {
        abandoned.fetch_add(1, Ordering::AcqRel);
    }
    log_end(&outcome, took.as_millis() as u64, accepted);
    (outcome, accepted)
}

/// A run whose hold was lost before its body started (its claim answered too late to be trusted):
/// the body does not start, and the attempt is handed back to be run again.
async fn not_started(
    abandoned: &AtomicUsize,
    job: &JobEntry,
    permits: Vec<Box<dyn Permit>>,
) -> (RunOutcome, bool) {
    crate::metrics::ownership_lost(&job.name);
    tracing::warn!(
        event = "job_ownership_lost",
        "lost ownership before the body started; it does not start"
    );
    let outcome = RunOutcome::Abandoned {
        reason: "lost".to_owned(),
    };
    settle(abandoned, permits, outcome, Duration::ZERO).await
}

/// Runs the body with the job's timeout (setting `timed_out` when it cuts the body short),
/// catching panics; after shutdown's cancel it gets `kill_after` to return.
async fn body(rt: &Runtime, job: &JobEntry, ctx: JobContext, timed_out: &AtomicBool) -> BodyEnd {
    let handler = Arc::clone(&job.handler);
    let body = match std::panic::catch_unwind(AssertUnwindSafe(move || handler(ctx))) {
        Ok(body) => body,
        Err(panic) => return Some(Err(panic)),
    };
    let timeout = job.retry.timeout;
    let body = async move {
        match timeout {
            None => body.await,
            Some(limit) => tokio::time::timeout(limit, body).await.unwrap_or_else(|_| {
                timed_out.store(true, Ordering::Release);
                Err(crate::JobError::transient(format!(
                    "attempt timed out after {limit:?}"
                )))
            }),
        }
    };
    let mut body = Box::pin(AssertUnwindSafe(body).catch_unwind());
    tokio::select! {
        biased;
        result = &mut body => return Some(result),
        () = rt.cancel.cancelled() => {}
    }
    tokio::time::timeout(rt.kill_after, &mut body).await.ok()
}

fn outcome(ended: BodyEnd, shutting_down: bool) -> RunOutcome {
    match ended {
        Some(Ok(Ok(()))) => RunOutcome::Succeeded,
        Some(Ok(Err(_)) | Err(_)) | None if shutting_down => RunOutcome::Abandoned {
            reason: "shutdown".to_owned(),
        },
        Some(Ok(Err(e))) => RunOutcome::Failed {
            class: e.class(),
            message: e.to_string(),
        },
        Some(Err(panic)) => RunOutcome::Failed {
            class: ErrorClass::Transient,
            message: format!("panicked: {}", panic_message(panic.as_ref())),
        },
        None => RunOutcome::Abandoned {
            reason: "lost".to_owned(),
        },
    }
}

/// `accepted`: whether the store recorded the outcome (runs without a slot row: always).
fn log_end(outcome: &RunOutcome, elapsed_ms: u64, accepted: bool) {
    match outcome {
        RunOutcome::Succeeded if accepted => {
            tracing::debug!(event = "job_succeeded", elapsed_ms, "job succeeded");
        }
        RunOutcome::Succeeded => {
            tracing::warn!(
                event = "job_succeeded",
                elapsed_ms,
                accepted,
                "job succeeded, but the store refused the outcome: this attempt no longer held the run"
            );
        }
        RunOutcome::Failed { class, message } => {
            tracing::warn!(event = "job_failed", elapsed_ms, accepted, class = ?class, error = %message, "job failed");
        }
        RunOutcome::Abandoned { reason } => {
            tracing::warn!(event = "job_abandoned", elapsed_ms, accepted, %reason, "job abandoned");
        }
    }
}

/// Completes when any token is cancelled; never, when there are none.
async fn wait_any(tokens: &[CancellationToken]) {
    if tokens.is_empty() {
        return std::future::pending().await;
    }
    futures::future::select_all(tokens.iter().map(|t| Box::pin(t.cancelled()))).await;
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}
