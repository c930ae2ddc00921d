//! The one way to a job body: candidates walk their job's layers, outside in, one batched call per
//! layer, and come out as runs holding every permit.
//!
//! ```text
//!   tick · second look · store-outage retry      recovery · retries · buffered · catch-up
//!        (slot work: claim by key)                 manual · backfill · hand-over (due work)
//!                      └──────────────┬──────────────────────┘
//!                              paused? recorded
//!                      flag (local) → lock → slot row (claim / claim_due)
//!                                     │
//!                               run::execute
//! ```

use std::sync::Arc;

use crate::context::RunInfo;
use crate::entry::{Candidate, JobEntry, RunSlot, Work};
use crate::guard::{Decision, GuardLevel, Permit, RunOutcome, SkipReason};
use crate::store::{ClaimRequest, Trigger};

use super::{OVERLAP_SKIPPED, PAUSED, Runtime};

/// A body about to run, with every permit its chain gave.
pub(crate) struct Admitted {
    pub(crate) job: Arc<JobEntry>,
    pub(crate) run: RunSlot,
    pub(crate) permits: Vec<Box<dyn Permit>>,
    /// Due work that recovered a run (see [`recovered`]): a retry, a take-over, a hand-over,
    /// catch-up or an operator's run, not a worker's first attempt of a queued slot.
    pub(crate) recovered: bool,
    /// The run's span (see `trace`); its claim span has ended.
    pub(crate) span: tracing::Span,
}

/// What the chain made of a batch.
#[derive(Default)]
pub(crate) struct Admission {
    /// Admitted by every layer: run them.
    pub(crate) runs: Vec<Admitted>,
    /// `slot`-level slots to look at again shortly: their lock was held elsewhere at the first
    /// look, this process's flag was up without a body of the job running, or another claim of
    /// their job was in flight.
    pub(crate) deferred: Vec<Candidate>,
    /// Slot work the store could not be asked about: claim it when the store is back.
    pub(crate) unavailable: Vec<Candidate>,
    /// Slots offered ahead of their instant while a run of their job was going: offered again at
    /// the instant, where the layers decide as they would have without the lead.
    pub(crate) at_instant: Vec<Candidate>,
}

/// A candidate on its way through the chain: the permits it holds, and the span of this walk
/// (a child of its run's span, ended when it leaves the chain).
type Held = (Candidate, Vec<Box<dyn Permit>>, tracing::Span);

/// Walks `batch` through the chain of each candidate's job.
pub(crate) async fn admit(rt: &Runtime, batch: Vec<Candidate>) -> Admission {
    let mut out = Admission::default();
    let batch: Vec<Candidate> = batch.into_iter().map(|c| c.traced(&rt.owner)).collect();
    let batch = drop_paused(rt, batch).await;
    let mut held: Vec<Held> = batch
        .into_iter()
        .map(|c| {
            let claim = crate::trace::claim_span(&c.span);
            (c, Vec::new(), claim)
        })
        .collect();
    for guard in &rt.guards {
        if rt.stop.is_cancelled() {
            break;
        }
        let indices: Vec<usize> = (0..held.len())
            .filter(|&i| held[i].0.job.layers.includes(guard.level()))
            .collect();
        if indices.is_empty() {
            continue;
        }
        let candidates: Vec<&Candidate> = indices.iter().map(|&i| &held[i].0).collect();
        let decisions = guard.acquire(&candidates).await;
        let mut leaving = Vec::new();
        let lock = guard.level() == GuardLevel::Lock;
        for (&i, decision) in indices.iter().zip(decisions) {
            match decision {
                Decision::Admit(permit) => {
                    if lock {
                        held[i].0.set_lock_elsewhere(false);
                    }
                    held[i].1.push(permit);
                }
                Decision::Pass => {
                    if lock {
                        held[i].0.set_lock_elsewhere(true);
                    }
                }
                other => leaving.push((i, other)),
            }
        }
        let mut overlapped = Vec::new();
        // Highest index first, so that `swap_remove` leaves the lower ones in place.
        for (i, decision) in leaving.into_iter().rev() {
            let (candidate, permits, _claim) = held.swap_remove(i);
            match decision {
                Decision::Claimed(runs) => {
                    claimed(&mut out, &rt.owner, &candidate, permits, runs).await;
                }
                Decision::Skip(reason) => {
                    refused(&mut out, &mut overlapped, candidate, permits, reason).await;
                }
                Decision::Admit(_) | Decision::Pass => unreachable!("kept above"),
            }
        }
        record(rt, &overlapped, OVERLAP_SKIPPED).await;
    }
    leave_chain(rt, &mut out, held).await;
    out
}

/// The candidates that passed every layer: slot work becomes a run; everything is handed back
/// instead when shutdown began meanwhile. Ends each walk's claim span.
async fn leave_chain(rt: &Runtime, out: &mut Admission, held: Vec<Held>) {
    for (candidate, permits, claim) in held {
        drop(claim);
        if rt.stop.is_cancelled() {
            skip(&candidate, permits, &SkipReason::ShuttingDown).await;
            crate::trace::skipped(&candidate.span, SkipReason::ShuttingDown.label());
            continue;
        }
        if let Work::Slot {
            slot, partition, ..
        } = candidate.work
        {
            let run = RunSlot {
                slot,
                trigger: Trigger::Schedule,
                partition,
                trace_parent: None,
            };
            out.runs.push(Admitted {
                job: candidate.job,
                run,
                permits,
                recovered: false,
                span: candidate.span,
            });
        }
    }
    if rt.stop.is_cancelled() {
        // Claimed while shutdown began: hand them straight back, for another replica to recover.
        for run in std::mem::take(&mut out.runs) {
            crate::trace::skipped(&run.span, SkipReason::ShuttingDown.label());
            release(run.permits, &abandoned(SkipReason::ShuttingDown.label())).await;
        }
    }
}

/// Leaves out the work of paused jobs, recording their slots `skipped` (reason `paused`).
pub(crate) async fn drop_paused(rt: &Runtime, mut batch: Vec<Candidate>) -> Vec<Candidate> {
    let paused: Vec<Candidate> = batch.extract_if(.., |c| c.job.is_paused()).collect();
    let mut requests = Vec::new();
    for candidate in &paused {
        let Some(slot) = candidate.slot_at() else {
            continue;
        };
        crate::metrics::skipped(&candidate.job.name, "paused");
        crate::trace::skipped(&candidate.span, "paused");
        tracing::info!(event = "job_claim_skipped", job = %candidate.job.name, %slot, reason = "paused", "job is paused");
        if candidate.job.level == GuardLevel::Slot {
            requests.extend(candidate.claim_request());
        }
    }
    record(rt, &requests, PAUSED).await;
    batch
}

/// Due work the slot layer claimed: each claimed attempt becomes a run. Only jobs whose chain has
/// no flag and no lock can get more than one (one per partition, or `allow`).
async fn claimed(
    out: &mut Admission,
    owner: &str,
    candidate: &Candidate,
    mut outer: Vec<Box<dyn Permit>>,
    runs: Vec<(RunSlot, Box<dyn Permit>)>,
) {
    if runs.is_empty() {
        // Nothing was due after all (another replica was first): give the flag and lock back.
        crate::trace::skipped(&candidate.span, "nothing_due");
        release(outer, &abandoned("nothing due")).await;
        return;
    }
    debug_assert!(runs.len() == 1 || outer.is_empty());
    for (i, (run, permit)) in runs.into_iter().enumerate() {
        // The first run takes the span its claim is under; the others follow from it.
        let span = if i == 0 {
            candidate.span.clone()
        } else {
            let span = crate::trace::run_span(&candidate.job.name, owner);
            span.follows_from(&candidate.span);
            span
        };
        // Due work learns its slot from the claim.
        let (at, partition) = (run.slot.scheduled_at, &run.partition);
        crate::trace::describe_slot(&span, at, run.trigger, partition);
        let mut permits = std::mem::take(&mut outer);
        let recovered = recovered(&run, permit.as_ref());
        if recovered {
            crate::metrics::recovered(&candidate.job.name);
        }
        permits.push(permit);
        out.runs.push(Admitted {
            job: Arc::clone(&candidate.job),
            run,
            permits,
            recovered,
            span,
        });
    }
}

/// Whether a claim of due work recovered a run: anything but the first attempt of a scheduled slot,
/// which is a worker taking a slot a scheduler queued (its normal start, not a recovery).
fn recovered(run: &RunSlot, slot_permit: &dyn Permit) -> bool {
    let mut info = RunInfo::default();
    slot_permit.describe(&mut info);
    run.trigger != Trigger::Schedule || info.attempt != Some(1)
}

/// A candidate a layer refused: logged, its permits released, and sorted into what follows.
async fn refused(
    out: &mut Admission,
    overlapped: &mut Vec<ClaimRequest>,
    candidate: Candidate,
    permits: Vec<Box<dyn Permit>>,
    reason: SkipReason,
) {
    if candidate.slot_at().is_none() {
        // Due work stays in the store for the next round.
        crate::trace::skipped(&candidate.span, reason.label());
        release(permits, &abandoned(reason.label())).await;
        return;
    }
    let slot_level = candidate.job.level == GuardLevel::Slot;
    if reason == SkipReason::Busy
        || (candidate.is_ahead() && waits_for_instant(&reason, slot_level))
    {
        let (job, slot) = (&candidate.job.name, candidate.slot_at());
        tracing::debug!(event = "job_claim_deferred", %job, ?slot, reason = reason.label(), "a run of the job is going ahead of the slot's instant; offered again at the instant");
        release(permits, &abandoned(reason.label())).await;
        out.at_instant.push(candidate);
        return;
    }
    if reason == SkipReason::Contended {
        let (job, slot) = (&candidate.job.name, candidate.slot_at());
        tracing::debug!(event = "job_claim_deferred", %job, ?slot, reason = reason.label(), "another claim of the job was in flight; looked at again shortly");
        release(permits, &abandoned(reason.label())).await;
        let mut candidate = candidate;
        candidate.contended();
        out.deferred.push(candidate);
        return;
    }
    skip(&candidate, permits, &reason).await;
    let in_body = candidate
        .job
        .in_body
        .load(std::sync::atomic::Ordering::Acquire);
    match reason {
        // Only this process's own body, running, proves a previous run is still going. A flag up
        // while a chain is walked or a run's permits are released, or a lock held elsewhere (maybe
        // by another replica working on this very slot), must not be recorded as skipped: look
        // again shortly.
        SkipReason::RunningHere if slot_level && !in_body && candidate.looks() < MAX_LOOKS => {
            out.deferred.push(candidate);
        }
        SkipReason::RunningHere if slot_level => {
            crate::trace::skipped(&candidate.span, reason.label());
            overlapped.extend(candidate.claim_request());
        }
        SkipReason::LockedElsewhere if slot_level && !candidate.is_recheck() => {
            out.deferred.push(candidate);
        }
        SkipReason::StoreUnavailable(_) => out.unavailable.push(candidate),
        _ => crate::trace::skipped(&candidate.span, reason.label()),
    }
}

/// Whether a slot offered ahead of its instant and refused for `reason` waits for its instant:
/// every refusal that says a run of the job is going, since that run may end before the instant.
/// A `slot`-level job's lock held elsewhere takes its second look instead (after the instant).
fn waits_for_instant(reason: &SkipReason, slot_level: bool) -> bool {
    match reason {
        SkipReason::RunningHere | SkipReason::Busy => true,
        SkipReason::LockedElsewhere => !slot_level,
        _ => false,
    }
}

/// How many times a slot is looked at while this process's flag for its job is up without a body
/// running, before it is recorded skipped.
const MAX_LOOKS: u8 = 4;

/// Records a slot that an external trigger asked for after its window closed.
pub(crate) async fn record_too_late(rt: &Runtime, candidate: &Candidate) {
    crate::metrics::skipped(&candidate.job.name, "too_late");
    let requests: Vec<ClaimRequest> = candidate.claim_request().into_iter().collect();
    if candidate.job.level == GuardLevel::Slot {
        record(rt, &requests, super::TOO_LATE).await;
    }
}

/// Records slots not run, with `reason`, through the slot layer.
async fn record(rt: &Runtime, requests: &[ClaimRequest], reason: &str) {
    if let (Some(slots), false) = (&rt.slots, requests.is_empty())
        && let Err(e) = slots.record_skipped(requests, reason).await
    {
        tracing::warn!(error = %e, reason, slots = requests.len(), "could not record skipped slots");
    }
}

fn abandoned(reason: &str) -> RunOutcome {
    RunOutcome::Abandoned {
        reason: reason.to_owned(),
    }
}

async fn skip(candidate: &Candidate, permits: Vec<Box<dyn Permit>>, reason: &SkipReason) {
    let job = &candidate.job.name;
    if !(candidate.is_recheck() && *reason == SkipReason::AlreadyClaimed) {
        // A second look that finds the row is the same conflict, counted at the tick.
        crate::metrics::skipped(job, reason.label());
    }
    let slot = candidate.slot_at();
    match reason {
        SkipReason::AlreadyClaimed
        | SkipReason::LockedElsewhere
        | SkipReason::Busy
        | SkipReason::Contended => {
            tracing::debug!(event = "job_claim_skipped", %job, ?slot, reason = reason.label(), "{reason}");
        }
        SkipReason::RunningHere | SkipReason::ShuttingDown | SkipReason::Overlap(_) => {
            tracing::info!(event = "job_claim_skipped", %job, ?slot, reason = reason.label(), "{reason}");
        }
        SkipReason::StoreUnavailable(_) | SkipReason::NotDue => {
            tracing::warn!(event = "job_claim_skipped", %job, ?slot, reason = reason.label(), "{reason}");
        }
    }
    release(permits, &abandoned(reason.label())).await;
}

/// Releases permits inside out; the answer of the innermost layer that records outcomes (`true`
/// when there is none).
pub(crate) async fn release(permits: Vec<Box<dyn Permit>>, outcome: &RunOutcome) -> bool {
    let mut accepted = None;
    for permit in permits.into_iter().rev() {
        let answer = permit.release(outcome).await;
        accepted = accepted.or(answer);
    }
    accepted.unwrap_or(true)
}
