//! The capabilities some roles and settings need beside the slot rows: the queue between
//! schedulers and workers ([`QueueStore`]), checkpoints ([`CheckpointStore`]) and the store's clock
//! ([`ClockStore`]). None has a default: a store has a capability by writing all of it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[cfg(doc)]
use super::DueClaim;
use super::{Claim, ClaimRequest, DueSpec, Lease, StoreError};
#[cfg(doc)]
use super::{MAX_EARLY, SlotStore, rules};

/// The slot table as a durable queue: what the `scheduler` and `worker` roles need.
#[async_trait]
pub trait QueueStore: Send + Sync + 'static {
    /// Enqueues every slot in `requests` for workers, in one round trip; one answer per request, in
    /// order. The slot table is the durable queue and the slot key its message id, so any number of
    /// schedulers enqueue each slot once.
    ///
    /// A new slot becomes a `pending` row (attempt 0, no owner) due at its own instant
    /// ([`Claim::Queued`]), whatever else of its job runs: the worker that picks it decides its
    /// overlap ([`SlotStore::claim_due`]), as a tick decides it at the slot's instant. An existing
    /// row is left alone ([`Claim::Taken`]; a stale running row is recovered by a worker). A
    /// scheduled slot more than [`MAX_EARLY`] ahead of the store's clock is [`Claim::NotDue`].
    /// Stores that can wake workers ([`due_signal`](Self::due_signal)) do so when something was
    /// queued. See [`rules::plan_claim`].
    ///
    /// `traces` is empty, or holds one entry per request: the W3C `traceparent` of the span that
    /// queued it, kept with a row this call queued ([`Claim::Queued`]) and handed back with its
    /// claim ([`DueClaim::trace_parent`]), so that the worker's span links to the scheduler's. An
    /// opaque string to the store; `None` entries (and an empty slice) store nothing.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have queued the slots; enqueueing again is idempotent.
    async fn enqueue_slots(
        &self,
        requests: &[ClaimRequest],
        traces: &[Option<String>],
    ) -> Result<Vec<Claim>, StoreError>;

    /// The earliest instant, after the store's now, at which a `pending` run of the jobs in `specs`
    /// falls due (`next_attempt_at`), in one read: a worker sleeps until then (less its lead,
    /// [`DueSpec::ahead`](super::DueSpec::ahead)) instead of polling.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn next_due(&self, specs: &[DueSpec]) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// A counter that changes when some process queued work ([`enqueue_slots`](Self::enqueue_slots)),
    /// so that workers wake without polling (PostgreSQL: `LISTEN`/`NOTIFY`); each caller gets its own
    /// receiver. `None` from a store that cannot notify (SQLite): its workers poll every 100 ms,
    /// woken as well by [`next_due`](Self::next_due).
    ///
    /// # Cancel safety
    /// Cancel safe.
    async fn due_signal(&self) -> Option<tokio::sync::watch::Receiver<u64>>;
}

/// A run's checkpoint, written under its attempt's fencing token: what `ctx.save_checkpoint` and
/// `ctx.checkpoint()` need in a process that runs `slot`-level bodies.
#[async_trait]
pub trait CheckpointStore: Send + Sync + 'static {
    /// Saves `data` as the run's checkpoint, only if `owner` still holds the run with the lease's run
    /// id and token, it is `running` and it is the run of the lease's slot. Returns `false` when
    /// ownership was lost: nothing is written then.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have saved `data`; the previous checkpoint stays whole.
    async fn save_checkpoint(
        &self,
        owner: &str,
        lease: &Lease,
        data: &str,
    ) -> Result<bool, StoreError>;

    /// The checkpoint last saved under the run, by any of its attempts.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn load_checkpoint(&self, run_id: i64) -> Result<Option<String>, StoreError>;
}

/// The store's clock: what [`ClockSync`](crate::ClockSync) measures this replica's clock against.
#[async_trait]
pub trait ClockStore: Send + Sync + 'static {
    /// The store's now: the clock it judges heartbeats and leases by (`clock_timestamp()` in
    /// PostgreSQL).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn store_now(&self) -> Result<DateTime<Utc>, StoreError>;
}
