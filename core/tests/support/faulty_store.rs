//! The memory store behind a faulty network, for the tests of what a replica does when its store
//! calls fail or are held up; and the [`Store`] of it with every capability the runtime needs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use slotguard::MemoryBackend;
use slotguard::store::{
    Claim, ClaimRequest, DueClaim, DueSpec, Finish, Lease, SlotKey, SlotStore, Store, StoreError,
};

/// The memory store, with faults: claims answered `claim_delay` late; the first `finish_failures`
/// outcome writes meet an unavailable store; while `cut_off`, every heartbeat hangs for good and
/// every outcome write fails; while `contended`, every claim request that may defer is answered
/// `Contended` (another claim of its job in flight, as PostgreSQL answers it), and `defers` keeps
/// each request's `defer_if_contended`; `due_claims` counts the `claim_due` calls.
#[derive(Default)]
pub(crate) struct Faulty {
    pub(crate) inner: Arc<MemoryBackend>,
    pub(crate) claim_delay: Duration,
    pub(crate) contended: AtomicBool,
    pub(crate) defers: std::sync::Mutex<Vec<bool>>,
    pub(crate) finish_failures: AtomicU32,
    pub(crate) cut_off: AtomicBool,
    /// How many `claim_due` calls were made.
    pub(crate) due_claims: AtomicU32,
}

impl Faulty {
    /// `self` as the slot store of a [`Store`] whose other capabilities are `self.inner`'s.
    #[allow(dead_code)] // not every test file that includes this uses it
    pub(crate) fn into_store(self) -> Store {
        Self::store_of(&Arc::new(self))
    }

    /// The [`Store`] of a shared `Faulty`, which the test keeps to look at.
    #[allow(dead_code)] // not every test file that includes this uses it
    pub(crate) fn store_of(this: &Arc<Self>) -> Store {
        let m = Arc::clone(&this.inner);
        Store::new("faulty", Arc::clone(this) as _)
            .with_locks(Arc::clone(&m) as _)
            .with_checkpoints(Arc::clone(&m) as _)
            .with_clock(Arc::clone(&m) as _)
            .with_admin(Arc::clone(&m) as _)
            .with_replicas(Arc::clone(&m) as _)
            .with_retention(m as _)
    }

    fn cut(&self) -> bool {
        self.cut_off.load(Ordering::Acquire)
    }
}

#[async_trait]
impl SlotStore for Faulty {
    async fn claim(&self, owner: &str, r: &[ClaimRequest]) -> Result<Vec<Claim>, StoreError> {
        self.defers
            .lock()
            .unwrap()
            .extend(r.iter().map(|r| r.defer_if_contended));
        if self.contended.load(Ordering::Acquire) && r.iter().all(|r| r.defer_if_contended) {
            return Ok(r.iter().map(|_| Claim::Contended).collect());
        }
        let answer = self.inner.claim(owner, r).await;
        tokio::time::sleep(self.claim_delay).await;
        answer
    }

    async fn claim_due(
        &self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> Result<Vec<DueClaim>, StoreError> {
        self.due_claims.fetch_add(1, Ordering::AcqRel);
        self.inner.claim_due(owner, specs, limit).await
    }

    async fn due_jobs(&self, specs: &[DueSpec]) -> Result<Vec<String>, StoreError> {
        self.inner.due_jobs(specs).await
    }

    async fn existing_slots(&self, keys: &[SlotKey]) -> Result<Vec<bool>, StoreError> {
        self.inner.existing_slots(keys).await
    }

    async fn record_skipped(&self, r: &[ClaimRequest], reason: &str) -> Result<(), StoreError> {
        self.inner.record_skipped(r, reason).await
    }

    async fn heartbeat(&self, owner: &str, tokens: &[i64]) -> Result<Vec<i64>, StoreError> {
        if self.cut() {
            return std::future::pending().await;
        }
        self.inner.heartbeat(owner, tokens).await
    }

    async fn finish(
        &self,
        owner: &str,
        finishes: &[(Lease, Finish)],
    ) -> Result<Vec<bool>, StoreError> {
        if self.cut() {
            return Err(StoreError::unavailable("connection reset"));
        }
        let failed = self
            .finish_failures
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if failed.is_ok() {
            return Err(StoreError::unavailable("out of shared memory"));
        }
        self.inner.finish(owner, finishes).await
    }
}
