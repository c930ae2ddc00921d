//! `lock`: a cluster-wide lock per job, keyed from the scheduler's key registry.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::batch::Batcher;
use super::{Decision, Guard, GuardLevel, Permit, RunOutcome, SkipReason};
use crate::runtime::Candidate;
use crate::store::{Backend, StoreError};

/// Lets a job in only while no other process holds its lock.
pub(crate) struct LockGuard {
    pub(crate) store: Arc<dyn Backend>,
    pub(crate) owner: Arc<str>,
    /// Locks released together go to the store in one call.
    pub(crate) unlocker: Arc<Unlocker>,
}

/// Batches released keys into [`LockStore::unlock`](crate::store::LockStore::unlock) calls.
pub(crate) type Unlocker = Batcher<i64, Result<(), StoreError>>;

/// The unlocker of `owner`'s keys on `store`.
pub(crate) fn unlocker(store: Arc<dyn Backend>, owner: Arc<str>) -> Unlocker {
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
        let keys: Vec<i64> = batch
            .iter()
            .filter(|c| !c.job.overlap_by_store())
            .map(|c| c.job.lock_key)
            .collect();
        let mut leases = if keys.is_empty() {
            Vec::new()
        } else {
            match self.store.try_lock(&self.owner, &keys).await {
                Ok(leases) => leases,
                Err(e) => {
                    return batch
                        .iter()
                        .map(|_| Decision::Skip(SkipReason::StoreUnavailable(e.to_string())))
                        .collect();
                }
            }
        }
        .into_iter();
        batch
            .iter()
            .map(|c| {
                if c.job.overlap_by_store() {
                    return Decision::Pass;
                }
                match leases.next().flatten() {
                    Some(lease) => Decision::Admit(Box::new(HeldLock {
                        store: Arc::clone(&self.store),
                        unlocker: Arc::clone(&self.unlocker),
                        owner: Arc::clone(&self.owner),
                        key: lease.key,
                        lost: lease.lost,
                        released: false,
                    })),
                    // On a second look the store's overlap policy decides (see `runtime::recheck`).
                    None if c.recheck => Decision::Pass,
                    None => Decision::Skip(SkipReason::LockedElsewhere),
                }
            })
            .collect()
    }
}

struct HeldLock {
    store: Arc<dyn Backend>,
    unlocker: Arc<Unlocker>,
    owner: Arc<str>,
    key: i64,
    lost: CancellationToken,
    released: bool,
}

#[async_trait]
impl Permit for HeldLock {
    fn loss(&self) -> Option<CancellationToken> {
        Some(self.lost.clone())
    }

    async fn release(mut self: Box<Self>, _outcome: &RunOutcome) -> bool {
        self.released = true;
        let result = self.unlocker.submit(self.key).await.unwrap_or(Ok(()));
        if let Err(e) = result {
            // The store is gone; so is the session that held the lock, and with it the lock.
            tracing::warn!(lock_key = self.key, error = %e, "unlock failed");
        }
        !self.lost.is_cancelled()
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
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
