//! The `scheduler` role's tick: the slots that fell due become `pending` rows for workers, decided
//! by each job's overlap policy at the slot's instant, as a tick's claim would be. No body starts
//! here: workers run the rows through the job's guard chain (see `worker`).

use std::sync::Arc;

use crate::entry::Candidate;
use crate::store::{Claim, ClaimRequest, StoreError};
use crate::trace;

use super::Runtime;
use super::chain::drop_paused;
use super::window::{OUTAGE_RETRY, record_expired, window_closed};

/// Enqueues the slots of one tick; while the store is unavailable, tries again with a growing wait
/// until each slot's window closes (then it is recorded `skipped`, as a tick's would be).
pub(crate) async fn enqueue(rt: Arc<Runtime>, batch: Vec<Candidate>) {
    let Some(slots) = &rt.slots else { return };
    let mut batch = drop_paused(&rt, batch).await;
    let mut wait = OUTAGE_RETRY.0;
    let mut expired: Vec<Candidate> = Vec::new();
    while !batch.is_empty() {
        let requests: Vec<ClaimRequest> =
            batch.iter().filter_map(Candidate::claim_request).collect();
        let spans: Vec<tracing::Span> = requests
            .iter()
            .map(|r| trace::enqueue_span(r, &rt.owner))
            .collect();
        let queued = match slots.store.queue() {
            Ok(queue) => queue.enqueue_slots(&requests, &traces(&spans)).await,
            Err(e) => Err(e),
        };
        match queued {
            Ok(answers) => {
                for (span, answer) in spans.iter().zip(&answers) {
                    trace::enqueued(span, answer);
                }
                log(&requests, &answers);
                break;
            }
            Err(e @ StoreError::Unavailable { .. }) => {
                tracing::warn!(error = %e, slots = requests.len(), "could not enqueue slots; trying again");
            }
            Err(e) => {
                tracing::error!(error = %e, slots = requests.len(), "the store refused to enqueue slots; they are not run");
                return;
            }
        }
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(OUTAGE_RETRY.1);
        let now = rt.clock.now();
        expired.extend(batch.extract_if(.., |c| window_closed(c, now)));
    }
    // The store answered (or every window closed): record the slots that missed theirs.
    while !expired.is_empty() && !rt.stop.is_cancelled() {
        if record_expired(&rt, &expired).await {
            break;
        }
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(OUTAGE_RETRY.1) => {}
        }
    }
}

/// The trace context of each enqueue span, for the rows; none at all when no span has one (no
/// OpenTelemetry layer, or feature `otel` off).
fn traces(spans: &[tracing::Span]) -> Vec<Option<String>> {
    let traces: Vec<Option<String>> = spans.iter().map(trace::traceparent).collect();
    if traces.iter().all(Option::is_none) {
        return Vec::new();
    }
    traces
}

/// One event per slot: queued, decided otherwise by its overlap policy, or found existing.
fn log(requests: &[ClaimRequest], answers: &[Claim]) {
    for (request, answer) in requests.iter().zip(answers) {
        let (job, slot, partition) = (
            &request.key.job,
            request.key.scheduled_at,
            &request.key.partition,
        );
        match answer {
            Claim::Queued => {
                crate::metrics::enqueued(job);
                tracing::debug!(event = "job_enqueued", %job, %slot, %partition, "slot enqueued for a worker");
            }
            Claim::Taken { status } => {
                tracing::debug!(event = "job_enqueue_skipped", %job, %slot, %partition, status = status.as_str(), "slot has a row already");
            }
            Claim::NotDue => {
                tracing::warn!(event = "job_enqueue_skipped", %job, %slot, reason = "not_due", "the store's clock says the slot is not due yet; this replica's clock is ahead");
            }
            Claim::Won(_) | Claim::Busy | Claim::Contended => {}
        }
    }
}
