//! The runtime: one timer for all jobs, the guard chain per tick, and the run of a job body.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use slotguard_cron::{Schedule, Slot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

pub(crate) mod catchup;
pub(crate) mod clock_sync;
pub(crate) mod control;
pub(crate) mod recover;

use crate::clock::SharedClock;
use crate::context::JobContext;
use crate::guard::{Decision, Guard, GuardLevel, Permit, RunInfo, RunOutcome, SkipReason};
use crate::job::{ErrorClass, Handler};
use crate::policy::{CatchUp, Overlap, RetryPolicy};
use crate::state::StateMap;
use crate::store::{Backend, ClaimRequest, SlotKey, Trigger};

/// A validated job, as the runtime keeps it.
pub(crate) struct JobEntry {
    pub(crate) name: Arc<str>,
    pub(crate) schedule: Schedule,
    pub(crate) level: GuardLevel,
    pub(crate) lock_key: i64,
    pub(crate) running: AtomicBool,
    pub(crate) handler: Handler,
    pub(crate) stale_after: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) overlap: Overlap,
    pub(crate) catch_up: CatchUp,
    pub(crate) deadline: Option<Duration>,
    pub(crate) partitions: Option<crate::job::PartitionProvider>,
    /// Stored pause state, refreshed every recovery interval.
    pub(crate) paused: AtomicBool,
}

impl JobEntry {
    /// Whether the flag and lock layers step aside so the store can apply the overlap policy.
    pub(crate) fn overlap_by_store(&self) -> bool {
        self.level == GuardLevel::Slot
            && (self.overlap != Overlap::Skip || self.partitions.is_some())
    }
}

/// A slot that fell due, on its way through the guard chain.
pub(crate) struct Candidate {
    pub(crate) job: Arc<JobEntry>,
    pub(crate) slot: Slot,
    pub(crate) trigger: Trigger,
    /// Empty when the job is not partitioned.
    pub(crate) partition: Arc<str>,
    /// A second look at a slot whose job's lock was held elsewhere at its tick ([`recheck`]).
    pub(crate) recheck: bool,
}

impl Candidate {
    pub(crate) fn claim_request(&self) -> ClaimRequest {
        ClaimRequest {
            key: SlotKey {
                job: self.job.name.to_string(),
                scheduled_at: self.slot.scheduled_at,
                partition: self.partition.to_string(),
            },
            trigger: self.trigger,
            zone: self.slot.zone.name().to_owned(),
            wall: self.slot.wall,
            business_date: self.slot.business_date(),
            fingerprint: self.job.schedule.fingerprint(),
            stale_after: self.job.stale_after,
            overlap: self.job.overlap,
        }
    }
}

/// Everything the driver, the ticks and the runs share.
pub(crate) struct Runtime {
    pub(crate) jobs: Vec<Arc<JobEntry>>,
    /// Outside in: local, lock, slot (those the scheduler has).
    pub(crate) guards: Vec<Arc<dyn Guard>>,
    pub(crate) state: Arc<StateMap>,
    pub(crate) clock: SharedClock,
    pub(crate) owner: Arc<str>,
    /// Phase one of shutdown: claim nothing new.
    pub(crate) stop: CancellationToken,
    /// Phase two: tell running jobs to stop.
    pub(crate) cancel: CancellationToken,
    pub(crate) tracker: TaskTracker,
    pub(crate) grace: Duration,
    /// After `cancel`, how long a job body gets to return before it is dropped.
    pub(crate) kill_after: Duration,
    /// How long before a slot's instant its guard chain runs; the body still starts at the instant.
    pub(crate) claim_ahead: Duration,
    pub(crate) running: AtomicUsize,
    pub(crate) abandoned: AtomicUsize,
    /// Where skipped slots of `slot`-level jobs are recorded.
    pub(crate) store: Option<Arc<dyn Backend>>,
    /// `clock`, when it is measured against the store's ([`ClockSync`](crate::ClockSync)).
    pub(crate) synced: Option<Arc<clock_sync::SyncedClock>>,
}

/// The reason recorded for a slot skipped because a run of its job was still going.
pub(crate) const OVERLAP_SKIPPED: &str = "overlap: a previous run is still running";

/// The reason recorded for a slot of a paused job.
pub(crate) const PAUSED: &str = "paused";

/// The timer: a heap of each job's next slot. It sleeps until the earliest is due, hands every slot
/// due by then to a tick task, and never awaits a run.
pub(crate) async fn drive(rt: Arc<Runtime>) {
    let mut next: Vec<Option<Slot>> = vec![None; rt.jobs.len()];
    // The last slot fired per job: a clock that steps back never fires a slot twice here.
    let mut fired: Vec<Option<chrono::DateTime<chrono::Utc>>> = vec![None; rt.jobs.len()];
    let mut heap = BinaryHeap::with_capacity(rt.jobs.len());
    let mut changes = rt.synced.as_ref().map(|c| c.changes());
    plan(&rt, &mut next, &fired, &mut heap);
    let lead = chrono::Duration::from_std(rt.claim_ahead).unwrap_or(chrono::Duration::zero());
    loop {
        let Some(&Reverse((due, _))) = heap.peek() else {
            // No job will ever fire again (the calendar ran out); wait for shutdown.
            rt.stop.cancelled().await;
            return;
        };
        let wait = (due - lead - rt.clock.now())
            .to_std()
            .unwrap_or(Duration::ZERO);
        if !wait.is_zero() {
            let changed = async {
                match &mut changes {
                    Some(changes) => {
                        if changes.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = rt.stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
                () = changed => {
                    // The scheduler's time stepped (see `ClockSync`): plan from the new time.
                    plan(&rt, &mut next, &fired, &mut heap);
                }
            }
            // Re-read the clock: a wake-up is never trusted to be on time.
            continue;
        }
        if rt.stop.is_cancelled() {
            return;
        }
        let now = rt.clock.now();
        let horizon = now + lead;
        let mut batch = Vec::new();
        let mut in_batch = std::collections::HashSet::new();
        while let Some(&Reverse((due, i))) = heap.peek() {
            // One slot per job per tick: a job's next slot inside the horizon goes to the next tick.
            if due > horizon || in_batch.contains(&i) {
                break;
            }
            heap.pop();
            in_batch.insert(i);
            let job = &rt.jobs[i];
            let Some(slot) = next[i] else { continue };
            fired[i] = Some(slot.scheduled_at);
            let mut following = job.schedule.next_after(slot.scheduled_at);
            if following.is_some_and(|f| f.scheduled_at <= now) {
                let skipped = job
                    .schedule
                    .slots_after(slot.scheduled_at)
                    .take_while(|s| s.scheduled_at <= now)
                    .take(100_000)
                    .count() as u64;
                crate::metrics::slots_missed(&job.name, skipped.saturating_sub(1).max(1));
                // This process was not running its timer (suspended, starved): fire the latest due
                // slot once rather than a burst. Catch-up policies decide about the rest.
                tracing::warn!(
                    event = "job_slots_missed",
                    job = %job.name,
                    from = %slot.scheduled_at,
                    until = %now,
                    "timer fell behind; slots in between were not fired"
                );
                following = job.schedule.next_after(now);
            }
            next[i] = following;
            if let Some(f) = following {
                heap.push(Reverse((f.scheduled_at, i)));
            }
            if let (Some(deadline), Some(store)) = (job.deadline, &rt.store) {
                rt.tracker.spawn(watch_deadline(
                    Arc::clone(&rt),
                    Arc::clone(store),
                    Arc::clone(job),
                    slot.scheduled_at,
                    deadline,
                ));
            }
            batch.push(Candidate {
                job: Arc::clone(job),
                slot,
                trigger: Trigger::Schedule,
                partition: Arc::from(""),
                recheck: false,
            });
        }
        if !batch.is_empty() {
            rt.tracker.spawn(tick(Arc::clone(&rt), batch));
        }
    }
}

/// Each job's next slot after the current time (and after the last slot it fired here), in a heap
/// by due time.
fn plan(
    rt: &Runtime,
    next: &mut [Option<Slot>],
    fired: &[Option<chrono::DateTime<chrono::Utc>>],
    heap: &mut BinaryHeap<Reverse<(chrono::DateTime<chrono::Utc>, usize)>>,
) {
    heap.clear();
    let now = rt.clock.now();
    for (i, job) in rt.jobs.iter().enumerate() {
        let from = fired[i].map_or(now, |f| f.max(now));
        let slot = job.schedule.next_after(from);
        if let Some(slot) = slot {
            heap.push(Reverse((slot.scheduled_at, i)));
        }
        next[i] = slot;
    }
}

/// Walks the slots of one tick through the guard chain, one batched call per layer, and spawns a run
/// for each slot every layer admitted.
pub(crate) async fn tick(rt: Arc<Runtime>, batch: Vec<Candidate>) {
    let mut deferred = Vec::new();
    tick_chain(&rt, batch, &mut deferred).await;
    if !deferred.is_empty() {
        rt.tracker.spawn(recheck(Arc::clone(&rt), deferred));
    }
}

/// How long after its tick a slot whose job's lock was held elsewhere is looked at again.
const LOCK_RECHECK: Duration = Duration::from_millis(250);

/// The second look at slots of `slot`-level jobs whose lock another process held at their tick.
/// Usually that process was working on the same slot and its row exists by now: the claim answers
/// `Taken` and nothing happens. But the holder may have died between taking the lock and claiming
/// (then nobody would run the slot), or have been working on another slot of the job (a replica
/// with another version of the schedule, or a wrong clock; then nobody would record this one). So
/// the slot goes through the chain again, and where the lock is still held elsewhere the store's
/// overlap policy decides instead: `skipped` behind the running slot, or claimed and run now.
async fn recheck(rt: Arc<Runtime>, mut batch: Vec<Candidate>) {
    tokio::select! {
        () = rt.stop.cancelled() => return,
        () = tokio::time::sleep(LOCK_RECHECK) => {}
    }
    for candidate in &mut batch {
        candidate.recheck = true;
    }
    let mut ignored = Vec::new();
    let chain: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> =
        Box::pin(tick_chain(&rt, batch, &mut ignored));
    chain.await;
}

/// The guard chain for one tick's slots; slots to look at again go to `deferred`.
async fn tick_chain(rt: &Arc<Runtime>, batch: Vec<Candidate>, deferred: &mut Vec<Candidate>) {
    let mut batch = expand_partitions(batch).await;
    let paused: Vec<Candidate> = batch
        .extract_if(.., |c| c.job.paused.load(Ordering::Acquire))
        .collect();
    if !paused.is_empty() {
        for candidate in &paused {
            crate::metrics::skipped(&candidate.job.name, "paused");
            tracing::info!(event = "job_claim_skipped", job = %candidate.job.name, slot = %candidate.slot.scheduled_at, reason = "paused", "job is paused");
        }
        let requests: Vec<ClaimRequest> = paused
            .iter()
            .filter(|c| c.job.level == GuardLevel::Slot)
            .map(Candidate::claim_request)
            .collect();
        if let (Some(store), false) = (&rt.store, requests.is_empty())
            && let Err(e) = store.record_skipped(&requests, PAUSED).await
        {
            tracing::warn!(error = %e, "could not record paused slots");
        }
    }
    let mut held: Vec<(Candidate, Vec<Box<dyn Permit>>)> =
        batch.into_iter().map(|c| (c, Vec::new())).collect();
    for guard in &rt.guards {
        if rt.stop.is_cancelled() {
            for (candidate, permits) in held {
                skip(&candidate, permits, &SkipReason::ShuttingDown).await;
            }
            return;
        }
        let indices: Vec<usize> = (0..held.len())
            .filter(|&i| held[i].0.job.level >= guard.level())
            .collect();
        if indices.is_empty() {
            continue;
        }
        let candidates: Vec<&Candidate> = indices.iter().map(|&i| &held[i].0).collect();
        let decisions = guard.acquire(&candidates).await;
        let mut refused = Vec::new();
        for (&i, decision) in indices.iter().zip(decisions) {
            match decision {
                Decision::Admit(permit) => held[i].1.push(permit),
                Decision::Pass => {}
                Decision::Skip(reason) => refused.push((i, reason)),
            }
        }
        let mut overlapped = Vec::new();
        for (i, reason) in refused.into_iter().rev() {
            let (candidate, permits) = held.swap_remove(i);
            skip(&candidate, permits, &reason).await;
            // Only this process's own flag proves a previous run is still going. A lock held
            // elsewhere may be another replica working on this very slot, which must not be
            // recorded as skipped under it: look again shortly, when its row should exist.
            if candidate.job.level == GuardLevel::Slot {
                match reason {
                    SkipReason::RunningHere => overlapped.push(candidate.claim_request()),
                    SkipReason::LockedElsewhere if !candidate.recheck => {
                        deferred.push(candidate);
                    }
                    _ => {}
                }
            }
        }
        if let (Some(store), false) = (&rt.store, overlapped.is_empty()) {
            // So that an audit can tell "skipped by policy" from "missed".
            if let Err(e) = store.record_skipped(&overlapped, OVERLAP_SKIPPED).await {
                tracing::warn!(error = %e, "could not record skipped slots");
            }
        }
    }
    for (candidate, permits) in held {
        rt.tracker
            .spawn(execute(Arc::clone(rt), candidate, permits));
    }
}

/// Replaces each candidate of a partitioned job by one per partition key its provider lists.
async fn expand_partitions(batch: Vec<Candidate>) -> Vec<Candidate> {
    if batch.iter().all(|c| c.job.partitions.is_none()) {
        return batch;
    }
    let mut out = Vec::with_capacity(batch.len());
    for candidate in batch {
        let Some(provider) = &candidate.job.partitions else {
            out.push(candidate);
            continue;
        };
        let keys = match provider().await {
            Ok(keys) => keys,
            Err(e) => {
                tracing::error!(event = "job_partitions_failed", job = %candidate.job.name, slot = %candidate.slot.scheduled_at, error = %e, "partition provider failed; the slot is not run");
                crate::metrics::skipped(&candidate.job.name, "partitions_failed");
                continue;
            }
        };
        let mut seen = std::collections::HashSet::new();
        for key in keys {
            if let Err(problem) = crate::scheduler::check_partition(&key) {
                tracing::warn!(job = %candidate.job.name, partition = %crate::admin::shown(&key), problem, "partition key left out");
                continue;
            }
            if seen.insert(key.clone()) {
                out.push(Candidate {
                    job: Arc::clone(&candidate.job),
                    slot: candidate.slot,
                    trigger: candidate.trigger,
                    partition: Arc::from(key),
                    recheck: candidate.recheck,
                });
            }
        }
    }
    out
}

/// Runs a slot whose attempt is already claimed (a retry or a recovery), with the given permits.
pub(crate) fn spawn_run(rt: &Arc<Runtime>, candidate: Candidate, permits: Vec<Box<dyn Permit>>) {
    rt.tracker
        .spawn(execute(Arc::clone(rt), candidate, permits));
}

async fn skip(candidate: &Candidate, permits: Vec<Box<dyn Permit>>, reason: &SkipReason) {
    let job = &candidate.job.name;
    if !(candidate.recheck && *reason == SkipReason::AlreadyClaimed) {
        // A second look that finds the row is the same conflict, counted at the tick.
        crate::metrics::skipped(job, reason.label());
    }
    let slot = candidate.slot.scheduled_at;
    match reason {
        SkipReason::AlreadyClaimed | SkipReason::LockedElsewhere => {
            tracing::debug!(event = "job_claim_skipped", %job, %slot, reason = reason.label(), "{reason}");
        }
        SkipReason::RunningHere | SkipReason::ShuttingDown | SkipReason::Overlap(_) => {
            tracing::info!(event = "job_claim_skipped", %job, %slot, reason = reason.label(), "{reason}");
        }
        SkipReason::StoreUnavailable(_) | SkipReason::NotDue => {
            tracing::warn!(event = "job_claim_skipped", %job, %slot, reason = reason.label(), "{reason}");
        }
    }
    let outcome = RunOutcome::Abandoned {
        reason: reason.label().to_owned(),
    };
    release(permits, &outcome).await;
}

/// Releases permits inside out; `true` when every layer accepted the outcome.
async fn release(permits: Vec<Box<dyn Permit>>, outcome: &RunOutcome) -> bool {
    let mut accepted = true;
    for permit in permits.into_iter().rev() {
        accepted &= permit.release(outcome).await;
    }
    accepted
}

/// Runs one job body with its permits held, and records how it ended.
async fn execute(rt: Arc<Runtime>, candidate: Candidate, permits: Vec<Box<dyn Permit>>) {
    let mut info = RunInfo::default();
    for permit in &permits {
        permit.describe(&mut info);
    }
    let losses: Vec<CancellationToken> = permits.iter().filter_map(|p| p.loss()).collect();
    let stop = rt.cancel.child_token();
    let lost = CancellationToken::new();
    let job = &candidate.job;
    let mut ctx = JobContext::new(
        &candidate,
        info.clone(),
        Arc::clone(&rt.state),
        stop.clone(),
        lost.clone(),
    );
    if let (Some(store), Some(run_id), Some(attempt), Some(token)) =
        (&rt.store, info.run_id, info.attempt, info.fencing_token)
    {
        if attempt > 1 {
            match store.load_checkpoint(run_id).await {
                Ok(saved) => ctx.checkpoint = saved.map(Arc::from),
                Err(e) => {
                    tracing::warn!(job = %candidate.job.name, run_id, error = %e, "could not read the checkpoint; the attempt starts from scratch")
                }
            }
        }
        ctx.saver = Some(Arc::new(crate::context::CheckpointSaver {
            store: Arc::clone(store),
            owner: Arc::clone(&rt.owner),
            lease: crate::store::Lease {
                run_id,
                attempt,
                token,
            },
        }));
    }
    let span = tracing::info_span!(
        "job_run",
        job = %job.name,
        slot = %candidate.slot.scheduled_at.format("%Y-%m-%dT%H:%M:%SZ"),
        trigger = candidate.trigger.as_str(),
        partition = %candidate.partition,
        attempt = info.attempt.unwrap_or(1),
        run_id = info.run_id,
        token = info.fencing_token,
        owner = %rt.owner,
        outcome = tracing::field::Empty,
    );
    rt.running.fetch_add(1, Ordering::AcqRel);
    async {
        if candidate.trigger == Trigger::Schedule
            && let Ok(early) = (candidate.slot.scheduled_at - rt.clock.now()).to_std()
        {
            // Claimed ahead (`claim_ahead`): the body still starts at the slot's instant.
            tokio::time::sleep(early).await;
        }
        tracing::info!(event = "job_started", level = %job.level, "job started");
        let lag = (candidate.trigger == Trigger::Schedule)
            .then(|| (rt.clock.now() - candidate.slot.scheduled_at).to_std().unwrap_or_default());
        crate::metrics::run_started(&job.name, lag);
        let started = tokio::time::Instant::now();
        let handler = Arc::clone(&job.handler);
        let body = std::panic::catch_unwind(AssertUnwindSafe(move || handler(ctx)));
        let result = match body {
            Err(panic) => Some(Err(panic)),
            Ok(body) => {
                let timeout = job.retry.timeout;
                let body = async move {
                    match timeout {
                        None => body.await,
                        Some(limit) => tokio::time::timeout(limit, body).await.unwrap_or_else(|_| {
                            Err(crate::JobError::transient(format!(
                                "attempt timed out after {limit:?}"
                            )))
                        }),
                    }
                };
                let mut body = Box::pin(AssertUnwindSafe(body).catch_unwind());
                let run = async {
                    tokio::select! {
                        biased;
                        result = &mut body => return Some(result),
                        () = rt.cancel.cancelled() => {}
                    }
                    tokio::time::timeout(rt.kill_after, &mut body).await.ok()
                };
                let watch = async {
                    wait_any(&losses).await;
                    lost.cancel();
                    stop.cancel();
                    crate::metrics::ownership_lost(&job.name);
                    tracing::warn!(event = "job_ownership_lost", "lost ownership while running; telling the job to stop");
                    std::future::pending::<()>().await;
                };
                tokio::select! {
                    result = run => result,
                    () = watch => None,
                }
            }
        };
        let shutting_down = rt.cancel.is_cancelled();
        let outcome = match result {
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
        };
        let took = started.elapsed();
        let elapsed_ms = took.as_millis() as u64;
        crate::metrics::run_completed(
            &job.name,
            outcome.label(),
            took,
            rt.clock.now().timestamp_millis() as f64 / 1000.0,
        );
        tracing::Span::current().record("outcome", outcome.label());
        let accepted = release(permits, &outcome).await;
        match &outcome {
            RunOutcome::Succeeded => {
                tracing::info!(event = "job_succeeded", elapsed_ms, accepted, "job succeeded");
            }
            RunOutcome::Failed { class, message } => {
                tracing::warn!(event = "job_failed", elapsed_ms, accepted, class = ?class, error = %message, "job failed");
            }
            RunOutcome::Abandoned { reason } => {
                rt.abandoned.fetch_add(1, Ordering::AcqRel);
                tracing::warn!(event = "job_abandoned", elapsed_ms, accepted, %reason, "job abandoned");
            }
        }
    }
    .instrument(span)
    .await;
    rt.running.fetch_sub(1, Ordering::AcqRel);
}

/// At `slot + deadline`, reports the slot overdue unless it has succeeded.
async fn watch_deadline(
    rt: Arc<Runtime>,
    store: Arc<dyn Backend>,
    job: Arc<JobEntry>,
    slot: chrono::DateTime<chrono::Utc>,
    deadline: Duration,
) {
    let due = slot + chrono::Duration::from_std(deadline).unwrap_or(chrono::Duration::MAX / 2);
    let wait = (due - rt.clock.now()).to_std().unwrap_or_default();
    tokio::select! {
        () = rt.stop.cancelled() => return,
        () = tokio::time::sleep(wait) => {}
    }
    let filter = crate::store::RunFilter {
        job: Some(job.name.to_string()),
        partition: Some(String::new()),
        from: Some(slot),
        to: Some(slot + chrono::Duration::milliseconds(1)),
        limit: 1,
        ..crate::store::RunFilter::default()
    };
    let status = match store.runs(&filter).await {
        Ok(runs) => runs.first().map(|r| r.status),
        Err(e) => {
            tracing::warn!(job = %job.name, %slot, error = %e, "could not check the deadline");
            return;
        }
    };
    if status != Some(crate::store::RunStatus::Succeeded) {
        crate::metrics::overdue(&job.name);
        tracing::error!(
            event = "job_overdue",
            job = %job.name,
            %slot,
            deadline_secs = deadline.as_secs(),
            status = status.map_or("missing", |s| s.as_str()),
            "slot has not succeeded by its deadline"
        );
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
