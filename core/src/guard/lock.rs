//! `lock`: a cluster-wide lock per job, keyed from the scheduler's key registry.
//!
//! At the `lock` level the lock is all there is: if its session dies, another process may take it,
//! so the run is told it lost ownership. At the `slot` level the slot row is the authority (the
//! store never lets two runs of one job be `running` at once), so losing only the lock's session
//! does not end the run: the lock is taken again on a fresh session while the body goes on.
//!
//! The lock comes from the scheduler's [`lock_store`](crate::SchedulerBuilder::lock_store) when it
//! has one (Redis), else from its [`backend`](crate::SchedulerBuilder::backend). A lease lock's
//! fencing token is what `ctx.fencing_token()` gives at the `lock` level; at the `slot` level the
//! slot row's token replaces it (the slot layer describes the run after this one).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::batch::Batcher;
use super::{Decision, Guard, GuardLevel, Permit, RunInfo, RunOutcome, SkipReason};
use crate::entry::{Candidate, Work};
use crate::store::{LeaseDeadline, LockLease, LockStore, StaleLock, StoreError};

/// How often a `slot`-level run whose lock session died tries to take its lock again.
const RETAKE_EVERY: Duration = Duration::from_millis(250);

/// Lets a job in only while no other process holds its lock.
pub(crate) struct LockGuard {
    pub(crate) store: Arc<dyn LockStore>,
    pub(crate) owner: Arc<str>,
    /// Locks released together go to the store in one call.
    pub(crate) unlocker: Arc<Unlocker>,
}

/// Batches released keys into [`LockStore::unlock`](crate::store::LockStore::unlock) calls.
pub(crate) type Unlocker = Batcher<i64, Result<(), StoreError>>;

/// The unlocker of `owner`'s keys on `store`.
pub(crate) fn unlocker(store: Arc<dyn LockStore>, owner: Arc<str>) -> Unlocker {
    Batcher::new(move |keys: Vec<i64>| {
        let (store, owner) = (Arc::clone(&store), Arc::clone(&owner));
        async move {
            let result = store.unlock(&owner, &keys).await;
            keys.iter().map(|_| result.clone()).collect()
        }
    })
}

#[async_trait]
impl Guard for LockGuard {
    fn level(&self) -> GuardLevel {
        GuardLevel::Lock
    }

    async fn acquire(&self, batch: &[&Candidate]) -> Vec<Decision> {
        let keys: Vec<i64> = batch.iter().map(|c| c.job.lock_key).collect();
        let mut leases = match self.store.try_lock(&self.owner, &keys).await {
            Ok(leases) => leases,
            Err(e) => return unavailable(batch.len(), &e),
        };
        if let Err(e) = self.break_stale(batch, &mut leases).await {
            tracing::warn!(error = %e, "could not look for frozen lock holders");
        }
        batch
            .iter()
            .zip(leases)
            .map(|(c, lease)| match lease {
                Some(lease) => Decision::Admit(Box::new(self.hold(c, lease))),
                // On a second look, and for due work, the store decides: it never lets two runs of
                // the job be running at once (see `runtime::tick` and `runtime::recover`).
                None if c.is_recheck() || matches!(c.work, Work::Due { .. }) => Decision::Pass,
                None => Decision::Skip(SkipReason::LockedElsewhere),
            })
            .collect()
    }
}

fn unavailable(n: usize, e: &StoreError) -> Vec<Decision> {
    (0..n)
        .map(|_| Decision::Skip(SkipReason::StoreUnavailable(e.to_string())))
        .collect()
}

impl LockGuard {
    /// For due work refused because another process holds the lock: asks the store to free locks
    /// whose holder's runs of the job are stale (a frozen or cut-off process), then tries those keys
    /// again. Only for due work: a stale run is due work, so a recovery round finds a frozen holder
    /// within one round of its run going stale, and ticks do not pay for the look.
    async fn break_stale(
        &self,
        batch: &[&Candidate],
        leases: &mut [Option<LockLease>],
    ) -> Result<(), StoreError> {
        let stale: Vec<(usize, StaleLock)> = batch
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                leases[*i].is_none() && c.job.layers.slot && matches!(c.work, Work::Due { .. })
            })
            .map(|(i, c)| {
                let lock = StaleLock {
                    key: c.job.lock_key,
                    job: c.job.name.to_string(),
                };
                (i, lock)
            })
            .collect();
        if stale.is_empty() {
            return Ok(());
        }
        let locks: Vec<StaleLock> = stale.iter().map(|(_, l)| l.clone()).collect();
        let freed = self.store.break_stale_locks(&self.owner, &locks).await?;
        let retry: Vec<(usize, i64)> = stale
            .iter()
            .filter(|(_, l)| freed.contains(&l.key))
            .map(|(i, l)| (*i, l.key))
            .collect();
        if retry.is_empty() {
            return Ok(());
        }
        for (i, key) in &retry {
            tracing::warn!(event = "job_lock_broken", job = %batch[*i].job.name, lock_key = key, "the lock's holder had stale runs of the job (frozen or cut off); its session was ended");
        }
        let keys: Vec<i64> = retry.iter().map(|(_, k)| *k).collect();
        let again = self.store.try_lock(&self.owner, &keys).await?;
        for ((i, _), lease) in retry.into_iter().zip(again) {
            leases[i] = lease;
        }
        Ok(())
    }

    fn hold(&self, candidate: &Candidate, lease: LockLease) -> HeldLock {
        let done = CancellationToken::new();
        // At the slot level, a lost session is not a lost run: keep the lock taken.
        let fatal = !candidate.job.layers.slot;
        if !fatal {
            tokio::spawn(keep(
                Arc::clone(&self.store),
                Arc::clone(&self.owner),
                Arc::clone(&candidate.job.name),
                lease.clone(),
                done.clone(),
            ));
        }
        HeldLock {
            unlocker: Arc::clone(&self.unlocker),
            store: Arc::clone(&self.store),
            owner: Arc::clone(&self.owner),
            key: lease.key,
            token: lease.token,
            lost: lease.lost,
            deadline: lease.deadline,
            fatal,
            done,
            released: false,
        }
    }
}

/// Takes the lock again whenever its session dies, until the run releases it.
async fn keep(
    store: Arc<dyn LockStore>,
    owner: Arc<str>,
    job: Arc<str>,
    mut lease: LockLease,
    done: CancellationToken,
) {
    loop {
        tokio::select! {
            () = done.cancelled() => return,
            () = lease.lost.cancelled() => {}
        }
        tracing::warn!(event = "job_lock_session_lost", %job, lock_key = lease.key, "the lock's session died; the slot row is still this run's, so it goes on and takes the lock again");
        lease = loop {
            tokio::select! {
                () = done.cancelled() => return,
                () = tokio::time::sleep(RETAKE_EVERY) => {}
            }
            match store.try_lock(&owner, &[lease.key]).await {
                Ok(mut got) => {
                    if let Some(Some(again)) = got.pop() {
                        break again;
                    }
                }
                Err(e) => tracing::debug!(%job, error = %e, "lock not taken again yet"),
            }
        };
        if done.is_cancelled() {
            // Released while the lock was being taken again: give it back.
            let _ = store.unlock(&owner, &[lease.key]).await;
            return;
        }
        tracing::info!(event = "job_lock_retaken", %job, lock_key = lease.key, "lock taken again");
    }
}

struct HeldLock {
    store: Arc<dyn LockStore>,
    unlocker: Arc<Unlocker>,
    owner: Arc<str>,
    key: i64,
    /// The lease's fencing token, when the store's locks have one.
    token: Option<i64>,
    lost: CancellationToken,
    /// When the lease lapses unless renewed (Redis).
    deadline: Option<LeaseDeadline>,
    /// Whether losing the lock ends the run (`lock` level) or not (`slot` level).
    fatal: bool,
    /// Tells the re-taking task (`slot` level) that the run is over.
    done: CancellationToken,
    released: bool,
}

#[async_trait]
impl Permit for HeldLock {
    fn describe(&self, info: &mut RunInfo) {
        // Inner layers describe after this one: at the `slot` level the row's token wins.
        if self.token.is_some() {
            info.fencing_token = self.token;
        }
    }

    fn loss(&self) -> Option<CancellationToken> {
        self.fatal.then(|| self.lost.clone())
    }

    fn deadline(&self) -> Option<LeaseDeadline> {
        self.deadline.clone().filter(|_| self.fatal)
    }

    async fn release(mut self: Box<Self>, _outcome: &RunOutcome) -> Option<bool> {
        self.released = true;
        self.done.cancel();
        let result = self.unlocker.submit(self.key).await.unwrap_or(Ok(()));
        if let Err(e) = result {
            // The store is gone; so is the session that held the lock, and with it the lock.
            tracing::warn!(lock_key = self.key, error = %e, "unlock failed");
        }
        self.fatal.then(|| !self.lost.is_cancelled())
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        self.done.cancel();
        if self.released {
            return;
        }
        // Fallback for a run task that was torn down without releasing: unlock in the background.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (store, owner, key) = (Arc::clone(&self.store), Arc::clone(&self.owner), self.key);
            rt.spawn(async move { store.unlock(&owner, &[key]).await });
        }
    }
}
