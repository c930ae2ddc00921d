//! `slot`: claim the slot row, keep its heartbeat, write the outcome under the fencing token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::batch::Batcher;
use super::{Decision, Guard, GuardLevel, Permit, RunInfo, RunOutcome, SkipReason};
use crate::ErrorClass;
use crate::policy::RetryPolicy;
use crate::runtime::Candidate;
use crate::store::{Backend, Claim, ClaimRequest, Finish, Lease, RunStatus, SlotKey, StoreError};

/// Lets a slot in only if this process wins its row.
pub(crate) struct SlotGuard {
    pub(crate) store: Arc<dyn Backend>,
    pub(crate) owner: Arc<str>,
    pub(crate) heartbeats: Arc<Heartbeats>,
    /// Outcomes of runs that end together go to the store in one call.
    pub(crate) finisher: Arc<Finisher>,
}

/// Batches outcomes into [`SlotStore::finish_many`](crate::store::SlotStore::finish_many) calls.
pub(crate) type Finisher = Batcher<(Lease, Finish), Result<bool, StoreError>>;

/// The finisher of `owner`'s attempts on `store`.
pub(crate) fn finisher(store: Arc<dyn Backend>, owner: Arc<str>) -> Finisher {
    Batcher::new(move |items: Vec<(Lease, Finish)>| {
        let (store, owner) = (Arc::clone(&store), Arc::clone(&owner));
        async move {
            match store.finish_many(&owner, &items).await {
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
        let requests: Vec<ClaimRequest> = batch.iter().map(|c| c.claim_request()).collect();
        match self.store.claim(&self.owner, &requests).await {
            Ok(claims) => claims
                .into_iter()
                .zip(requests)
                .zip(batch)
                .map(|((claim, request), candidate)| match claim {
                    Claim::Won(lease) => Decision::Admit(Box::new(self.hold(
                        request.key,
                        lease,
                        candidate.job.retry,
                    ))),
                    Claim::Taken {
                        status: status @ (RunStatus::Skipped | RunStatus::Pending),
                    } => Decision::Skip(SkipReason::Overlap(status)),
                    Claim::Taken { .. } => Decision::Skip(SkipReason::AlreadyClaimed),
                    Claim::NotDue => Decision::Skip(SkipReason::NotDue),
                })
                .collect(),
            Err(e) => batch
                .iter()
                .map(|_| Decision::Skip(SkipReason::StoreUnavailable(e.to_string())))
                .collect(),
        }
    }
}

impl SlotGuard {
    /// The permit for an attempt this process holds: registered for heartbeats until released.
    pub(crate) fn hold(&self, key: SlotKey, lease: Lease, retry: RetryPolicy) -> ClaimedSlot {
        debug_assert!(retry.max_attempts >= 1);
        let lost = self.heartbeats.add(lease.token);
        ClaimedSlot {
            finisher: Arc::clone(&self.finisher),
            heartbeats: Arc::clone(&self.heartbeats),
            key,
            lease,
            lost,
            retry,
        }
    }
}

/// What the store records for an outcome, under the job's retry policy.
fn finish_for(outcome: &RunOutcome, attempt: u32, retry: &RetryPolicy) -> Finish {
    match outcome {
        RunOutcome::Succeeded => Finish::succeeded(),
        RunOutcome::Failed { class, message } => {
            let again = match class {
                ErrorClass::Transient => retry.delay_after(attempt),
                ErrorClass::Permanent => None,
            };
            let mut finish = Finish::failed(*class, message.clone(), again);
            if again.is_none() && *class == ErrorClass::Transient && retry.max_attempts > 1 {
                // Attempts exhausted: a person has to look.
                finish.status = RunStatus::Dead;
            }
            finish
        }
        // Handed over: another replica (or this one, after a restart) recovers it at once.
        RunOutcome::Abandoned { reason } => Finish::abandoned(reason.clone(), Some(Duration::ZERO)),
    }
}

pub(crate) struct ClaimedSlot {
    finisher: Arc<Finisher>,
    heartbeats: Arc<Heartbeats>,
    key: SlotKey,
    lease: Lease,
    lost: CancellationToken,
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

    async fn release(self: Box<Self>, outcome: &RunOutcome) -> bool {
        self.heartbeats.remove(self.lease.token);
        let finish = finish_for(outcome, self.lease.attempt, &self.retry);
        let answer = self
            .finisher
            .submit((self.lease, finish))
            .await
            .unwrap_or_else(|| {
                Err(StoreError::Unavailable(
                    "the runtime is shutting down".into(),
                ))
            });
        match answer {
            Ok(true) => true,
            Ok(false) => {
                tracing::warn!(
                    event = "job_ownership_lost",
                    job = %self.key.job,
                    slot = %self.key.scheduled_at,
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
                    job = %self.key.job,
                    slot = %self.key.scheduled_at,
                    run_id = self.lease.run_id,
                    error = %e,
                    "could not record the outcome; the run will be recovered as abandoned"
                );
                false
            }
        }
    }
}

impl Drop for ClaimedSlot {
    fn drop(&mut self) {
        self.heartbeats.remove(self.lease.token);
    }
}

/// The running attempts of this process, refreshed together: one store call per interval, whatever
/// their number, and none at all while nothing runs.
pub(crate) struct Heartbeats {
    active: Mutex<HashMap<i64, CancellationToken>>,
    wake: Notify,
    pub(crate) interval: Duration,
}

impl Heartbeats {
    pub(crate) fn new(interval: Duration) -> Self {
        Heartbeats {
            active: Mutex::default(),
            wake: Notify::new(),
            interval,
        }
    }

    fn add(&self, token: i64) -> CancellationToken {
        let lost = CancellationToken::new();
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token, lost.clone());
        self.wake.notify_one();
        lost
    }

    fn remove(&self, token: i64) {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&token);
    }

    fn tokens(&self) -> Vec<i64> {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .copied()
            .collect()
    }

    /// Refreshes every held attempt each interval until `done` is cancelled; sleeps without waking
    /// while no attempt is held.
    pub(crate) async fn run(
        &self,
        store: Arc<dyn Backend>,
        owner: Arc<str>,
        done: CancellationToken,
    ) {
        loop {
            if self.tokens().is_empty() {
                tokio::select! {
                    () = self.wake.notified() => continue,
                    () = done.cancelled() => return,
                }
            }
            tokio::select! {
                () = tokio::time::sleep(self.interval) => {}
                () = done.cancelled() => return,
            }
            let tokens = self.tokens();
            if tokens.is_empty() {
                continue;
            }
            match store.heartbeat(&owner, &tokens).await {
                Ok(held) => {
                    for token in tokens.iter().filter(|t| !held.contains(t)) {
                        let lost = self
                            .active
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .remove(token);
                        if let Some(lost) = lost {
                            tracing::warn!(
                                event = "job_ownership_lost",
                                token,
                                "heartbeat refused: the attempt was taken over; telling the job to stop"
                            );
                            lost.cancel();
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "heartbeat failed; will retry next interval"),
            }
        }
    }
}
