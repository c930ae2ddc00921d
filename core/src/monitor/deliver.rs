//! How check-ins reach a monitor: each run's on a task of its own, the run never waiting; every
//! call bounded in time and in number. The one place the delivery rules live.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::task::TaskTracker;

use crate::context::{RunInfo, RunSlot};
use crate::guard::RunOutcome;

use super::attached::Attached;
use super::{CheckIn, CheckInStatus, Monitor};

/// How long one call to a monitor may take before it is dropped and counted a failure.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(1);

/// How many calls one check-in gets at most: the first and two retries.
pub const TRIES: u32 = 3;

/// The pause before the first retry of a check-in; doubled before each further one.
pub const BACKOFF: Duration = Duration::from_millis(100);

/// A run whose start went to its monitor: [`end`] sends how it ended.
pub(crate) struct Started {
    event: CheckIn,
    end: oneshot::Sender<CheckIn>,
}

/// Sends the `in_progress` check-in of a run that starts now, on a task of its own on `upkeep`;
/// `None` when the job has no monitor. The task then waits for the run's [`end`] and sends it after
/// the start, so a receiver sees them in order. Shutdown waits for the upkeep tracker after the
/// runs: the last runs' check-ins still go out, within their bounded tries.
pub(crate) fn begin(
    upkeep: &TaskTracker,
    attached: Option<&Attached>,
    job: &Arc<str>,
    run: &RunSlot,
    info: &RunInfo,
) -> Option<Started> {
    let attached = attached?;
    let event = CheckIn {
        job: Arc::clone(job),
        scheduled_at: run.slot.scheduled_at,
        partition: Arc::clone(&run.partition),
        attempt: info.attempt.unwrap_or(1),
        run_id: info.run_id,
        trigger: run.trigger,
        status: CheckInStatus::InProgress,
        error: None,
        duration: None,
        config: Arc::clone(&attached.config),
    };
    let (end, ended) = oneshot::channel();
    let monitor = Arc::clone(&attached.monitor);
    let start = event.clone();
    upkeep.spawn(async move {
        send(monitor.as_ref(), &start).await;
        // A run dropped before its end (the runtime going away) sends no second check-in.
        if let Ok(end) = ended.await {
            send(monitor.as_ref(), &end).await;
        }
    });
    Some(Started { event, end })
}

/// Hands the end of a run `took` long to its check-in task; returns at once.
pub(crate) fn end(started: Option<Started>, outcome: &RunOutcome, took: Duration) {
    let Some(Started { mut event, end }) = started else {
        return;
    };
    (event.status, event.error) = match outcome {
        RunOutcome::Succeeded => (CheckInStatus::Ok, None),
        RunOutcome::Failed { message, .. } => (CheckInStatus::Error, Some(message.clone())),
        RunOutcome::Abandoned { reason } => {
            (CheckInStatus::Error, Some(format!("abandoned: {reason}")))
        }
    };
    event.duration = Some(took);
    // The task is gone only if the runtime is: nothing left to tell.
    let _ = end.send(event);
}

/// One check-in: up to [`TRIES`] calls of [`CALL_TIMEOUT`] each, [`BACKOFF`] doubling between
/// them. Whether it went through is logged, never returned: nobody waits for it.
async fn send(monitor: &dyn Monitor, event: &CheckIn) {
    let mut pause = BACKOFF;
    for attempt in 1..=TRIES {
        let error = match tokio::time::timeout(CALL_TIMEOUT, monitor.check_in(event)).await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {CALL_TIMEOUT:?}"),
        };
        if attempt == TRIES {
            tracing::warn!(
                event = "check_in_failed",
                job = %event.job,
                status = event.status.as_str(),
                tries = TRIES,
                %error,
                "the monitor did not take the check-in; giving up on it (the run is not affected)"
            );
            return;
        }
        tracing::debug!(job = %event.job, status = event.status.as_str(), attempt, %error, "check-in failed; trying again");
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
}
