//! `slot`: claim the slot row, keep its heartbeat, write the outcome under the fencing token.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::batch::Batcher;
use super::heartbeats::Heartbeats;
use slotguard_cron::{Slot, parse_zone};

use super::{Decision, Guard, GuardLevel, Permit, RunInfo, RunOutcome, SkipReason};
use crate::context::Checkpoints;
use crate::entry::{Candidate, RunSlot, Work};
use crate::policy::{AfterFailure, RetryPolicy};
use crate::store::{
    Claim, ClaimRequest, DueSpec, Finish, Lease, LeaseDeadline, RunStatus, SlotStore, Store,
    StoreError,
};

/// Lets a slot in only if this process wins its row.
pub(crate) struct SlotGuard {
    /// The store and its capabilities: `build()` checked that it has those this process needs.
    pub(crate) store: Store,
    pub(crate) owner: Arc<str>,
    pub(crate) heartbeats: Arc<Heartbeats>,
    /// Outcomes of runs that end together go to the store in one call.
    pub(crate) finisher: Arc<Finisher>,
}

/// Batches outcomes into [`SlotStore::finish`](crate::store::SlotStore::finish) calls.
pub(crate) type Finisher = Batcher<(Lease, Finish), Result<bool, StoreError>>;

/// The finisher of `owner`'s attempts on `store`.
pub(crate) fn finisher(store: Arc<dyn SlotStore>, owner: Arc<str>) -> Finisher {
    Batcher::new(move |items: Vec<(Lease, Finish)>| {
        let (store, owner) = (Arc::clone(&store), Arc::clone(&owner));
        async move {
            match store.finish(&owner, &items).await {
                Ok(answers) => answers.into_iter().map(Ok).collect(),
                Err(e) => items.iter().map(|_| Err(e.clone())).collect(),
            }
        }
    })
}

#[async_trait]
impl Guard for SlotGuard {
    fn level(&self) -> GuardLevel {
        GuardLevel::Slot
    }

    async fn acquire(&self, batch: &[&Candidate]) -> Vec<Decision> {
        let (slots, due): (Vec<usize>, Vec<usize>) =
            (0..batch.len()).partition(|&i| matches!(batch[i].work, Work::Slot { .. }));
        let mut decisions: Vec<Option<Decision>> = (0..batch.len()).map(|_| None).collect();
        let slot_batch: Vec<&Candidate> = slots.iter().map(|&i| batch[i]).collect();
        for (i, d) in slots.iter().zip(self.claim_slots(&slot_batch).await) {
            decisions[*i] = Some(d);
        }
        let due_batch: Vec<&Candidate> = due.iter().map(|&i| batch[i]).collect();
        for (i, d) in due.iter().zip(self.claim_due(&due_batch).await) {
            decisions[*i] = Some(d);
        }
        decisions.into_iter().map(|d| d.expect("decided")).collect()
    }
}

impl SlotGuard {
    /// Slot work: one claim for the whole batch.
    async fn claim_slots(&self, batch: &[&Candidate]) -> Vec<Decision> {
        if batch.is_empty() {
            return Vec::new();
        }
        let requests: Vec<ClaimRequest> = batch.iter().filter_map(|c| c.claim_request()).collect();
        let sent = Instant::now();
        let claims = match self.store.slots.claim(&self.owner, &requests).await {
            Ok(claims) => claims,
            Err(e) => return unavailable(batch.len(), &e),
        };
        claims
            .into_iter()
            .zip(batch)
            .map(|(claim, candidate)| match claim {
                Claim::Won(lease) => {
                    Decision::Admit(Box::new(self.hold(lease, candidate.job.retry, sent)))
                }
                Claim::Taken {
                    status: status @ (RunStatus::Skipped | RunStatus::Pending),
                } => Decision::Skip(SkipReason::Overlap(status)),
                Claim::Taken { .. } | Claim::Queued => Decision::Skip(SkipReason::AlreadyClaimed),
                Claim::NotDue => Decision::Skip(SkipReason::NotDue),
                Claim::Busy => Decision::Skip(SkipReason::Busy),
                Claim::Contended => Decision::Skip(SkipReason::Contended),
            })
            .collect()
    }

    /// Due work: one `claim_due` for every job in the batch; each job's claims go to its candidate.
    async fn claim_due(&self, batch: &[&Candidate]) -> Vec<Decision> {
        if batch.is_empty() {
            return Vec::new();
        }
        let specs: Vec<DueSpec> = batch.iter().map(|c| c.due_spec()).collect();
        let limit = batch.iter().map(|c| c.due_limit()).max().unwrap_or(1);
        let sent = Instant::now();
        let claims = match self.store.slots.claim_due(&self.owner, &specs, limit).await {
            Ok(claims) => claims,
            Err(e) => return unavailable(batch.len(), &e),
        };
        let mut per_job: HashMap<String, Vec<ClaimedRun>> = HashMap::new();
        for claim in claims {
            let Some(candidate) = batch.iter().find(|c| *c.job.name == claim.key.job) else {
                continue;
            };
            let job = &candidate.job;
            let run = RunSlot {
                slot: Slot {
                    scheduled_at: claim.key.scheduled_at,
                    wall: claim.wall,
                    zone: parse_zone(&claim.zone).unwrap_or(job.schedule.zone()),
                },
                trigger: claim.trigger,
                partition: Arc::from(claim.key.partition.as_str()),
                trace_parent: claim.trace_parent,
            };
            let permit: Box<dyn Permit> = Box::new(self.hold(claim.lease, job.retry, sent));
            per_job
                .entry(job.name.to_string())
                .or_default()
                .push((run, permit));
        }
        batch
            .iter()
            .map(|c| Decision::Claimed(per_job.remove(&*c.job.name).unwrap_or_default()))
            .collect()
    }

    /// The permit for an attempt this process holds, claimed by a call sent at `sent`: registered
    /// for heartbeats until released.
    pub(crate) fn hold(&self, lease: Lease, retry: RetryPolicy, sent: Instant) -> ClaimedSlot {
        debug_assert!(retry.max_attempts >= 1);
        let (lost, deadline) = self.heartbeats.add(lease.token, sent);
        ClaimedSlot {
            finisher: Arc::clone(&self.finisher),
            heartbeats: Arc::clone(&self.heartbeats),
            checkpoints: Arc::new(SlotCheckpoints {
                store: self.store.clone(),
                owner: Arc::clone(&self.owner),
                lease: lease.clone(),
            }),
            lease,
            lost,
            deadline,
            retry,
        }
    }

    /// Records slots that are not run, with `reason`, where no row exists for them yet: skipped by
    /// this process's flag, paused, or given up after the store was unavailable at their tick.
    pub(crate) async fn record_skipped(
        &self,
        requests: &[ClaimRequest],
        reason: &str,
    ) -> Result<(), StoreError> {
        if requests.is_empty() {
            return Ok(());
        }
        self.store.slots.record_skipped(requests, reason).await
    }
}

fn unavailable(n: usize, e: &StoreError) -> Vec<Decision> {
    (0..n)
        .map(|_| Decision::Skip(SkipReason::StoreUnavailable(e.to_string())))
        .collect()
}

/// The first and the longest wait between writes of an outcome the store could not take.
const OUTCOME_RETRY: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(2));

/// What the store records for an outcome, under the job's retry policy.
fn finish_for(outcome: &RunOutcome, attempt: u32, retry: &RetryPolicy) -> Finish {
    match outcome {
        RunOutcome::Succeeded => Finish::succeeded(),
        RunOutcome::Failed { class, message } => match retry.after_failure(*class, attempt) {
            AfterFailure::Retry(wait) => Finish::failed(*class, message.clone(), Some(wait)),
            AfterFailure::Exhausted => {
                let mut finish = Finish::failed(*class, message.clone(), None);
                // Attempts exhausted: a person has to look.
                finish.status = RunStatus::Dead;
                finish
            }
            AfterFailure::Final => Finish::failed(*class, message.clone(), None),
        },
        // Handed over: another replica (or this one, after a restart) recovers it at once.
        RunOutcome::Abandoned { reason } => Finish::abandoned(reason.clone(), Some(Duration::ZERO)),
    }
}

/// A run the slot layer claimed for due work, with its permit.
type ClaimedRun = (RunSlot, Box<dyn Permit>);

/// Checkpoints of one attempt, written under its fencing token.
struct SlotCheckpoints {
    store: Store,
    owner: Arc<str>,
    lease: Lease,
}

impl std::fmt::Debug for SlotCheckpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotCheckpoints")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Checkpoints for SlotCheckpoints {
    async fn save(&self, data: &str) -> Result<bool, StoreError> {
        self.store
            .checkpoints()?
            .save_checkpoint(&self.owner, &self.lease, data)
            .await
    }

    async fn load(&self) -> Result<Option<String>, StoreError> {
        if self.lease.attempt <= 1 {
            return Ok(None);
        }
        self.store
            .checkpoints()?
            .load_checkpoint(self.lease.run_id)
            .await
    }
}

pub(crate) struct ClaimedSlot {
    finisher: Arc<Finisher>,
    heartbeats: Arc<Heartbeats>,
    checkpoints: Arc<SlotCheckpoints>,
    lease: Lease,
    lost: CancellationToken,
    /// Until when the attempt is trusted without another confirmed heartbeat.
    deadline: LeaseDeadline,
    retry: RetryPolicy,
}

#[async_trait]
impl Permit for ClaimedSlot {
    fn describe(&self, info: &mut RunInfo) {
        info.run_id = Some(self.lease.run_id);
        info.attempt = Some(self.lease.attempt);
        info.fencing_token = Some(self.lease.token);
    }

    fn loss(&self) -> Option<CancellationToken> {
        Some(self.lost.clone())
    }

    fn deadline(&self) -> Option<LeaseDeadline> {
        Some(self.deadline.clone())
    }

    fn checkpoints(&self) -> Option<Arc<dyn Checkpoints>> {
        Some(Arc::clone(&self.checkpoints) as Arc<dyn Checkpoints>)
    }

    async fn release(self: Box<Self>, outcome: &RunOutcome) -> Option<bool> {
        let finish = finish_for(outcome, self.lease.attempt, &self.retry);
        let dead = finish.status == RunStatus::Dead;
        // The attempt keeps its heartbeat until its outcome is written: a row left `running`
        // without one would go stale and be run again, though its body is done.
        let answer = self.record(finish).await;
        self.heartbeats.remove(self.lease.token);
        Some(match answer {
            Ok(true) => {
                if dead {
                    crate::metrics::run_dead(&self.lease.key.job);
                }
                true
            }
            Ok(false) => {
                tracing::warn!(
                    event = "job_ownership_lost",
                    job = %self.lease.key.job,
                    slot = %self.lease.key.scheduled_at,
                    run_id = self.lease.run_id,
                    attempt = self.lease.attempt,
                    token = self.lease.token,
                    outcome = outcome.label(),
                    "outcome refused: another process owns this slot now"
                );
                false
            }
            Err(e) => {
                tracing::error!(
                    job = %self.lease.key.job,
                    slot = %self.lease.key.scheduled_at,
                    run_id = self.lease.run_id,
                    error = %e,
                    "could not record the outcome; the run will be recovered as abandoned"
                );
                false
            }
        })
    }
}

impl ClaimedSlot {
    /// Writes the outcome; while the store is unavailable (a restart, a full lock table), tries
    /// again with a growing wait, heartbeating meanwhile, for as long as the attempt can still
    /// hold its run: until a heartbeat is refused, or for the stale threshold (three heartbeat
    /// intervals), after which another process may have taken the run over.
    async fn record(&self, finish: Finish) -> Result<bool, StoreError> {
        let budget = Instant::now() + self.heartbeats.interval * 3;
        let mut wait = OUTCOME_RETRY.0;
        loop {
            let Some(answer) = self
                .finisher
                .submit((self.lease.clone(), finish.clone()))
                .await
            else {
                return Err(StoreError::unavailable("the runtime is shutting down"));
            };
            let retry = match &answer {
                Err(e) if e.is_unavailable() => Instant::now() + wait < budget,
                _ => false,
            };
            if !retry || self.lost.is_cancelled() {
                return answer;
            }
            if let Err(e) = &answer {
                tracing::warn!(job = %self.lease.key.job, run_id = self.lease.run_id, error = %e, "could not record the outcome yet; trying again");
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.lost.cancelled() => return answer,
            }
            wait = (wait * 2).min(OUTCOME_RETRY.1);
        }
    }
}

impl Drop for ClaimedSlot {
    fn drop(&mut self) {
        self.heartbeats.remove(self.lease.token);
    }
}
