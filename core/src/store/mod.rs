//! The traits a backend implements: slot rows with fencing, and cluster-wide locks.
//!
//! Policy lives in the runtime; a backend holds mechanism only. The memory backend in this crate
//! implements both traits so that the `lock` and `slot` semantics are tested without a database; the
//! SQLite and PostgreSQL backends implement the same traits and pass the same contract tests.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::guard::RunOutcome;

pub mod memory;

/// The identity of a slot row: `UNIQUE(job, scheduled_at, partition)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SlotKey {
    /// The job's name.
    pub job: String,
    /// The slot's instant, to the second.
    pub scheduled_at: DateTime<Utc>,
    /// The partition key; empty when the job is not partitioned.
    pub partition: String,
}

/// Why a run exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// The schedule fell due.
    Schedule,
    /// A slot missed while no replica ran, caught up by policy.
    CatchUp,
    /// An operator asked for a run now.
    Manual,
    /// An operator asked for a range of past slots.
    Backfill,
}

impl Trigger {
    /// The name stored with the run.
    pub const fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::CatchUp => "catch_up",
            Trigger::Manual => "manual",
            Trigger::Backfill => "backfill",
        }
    }
}

/// Everything a store records when it claims a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// The slot.
    pub key: SlotKey,
    /// Why it runs.
    pub trigger: Trigger,
    /// The IANA zone of the schedule.
    pub zone: String,
    /// The wall-clock time the schedule names.
    pub wall: NaiveDateTime,
    /// The slot's business date.
    pub business_date: NaiveDate,
    /// The schedule's fingerprint (expression, zone, DST policy).
    pub fingerprint: u64,
    /// A `running` row whose heartbeat is older than this (by the store's clock) is abandoned and may be
    /// claimed again with a higher fencing token.
    pub stale_after: Duration,
}

/// A claimed attempt of a run. Every write about it carries its fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The run's id in the store.
    pub run_id: i64,
    /// The attempt number, from 1.
    pub attempt: u32,
    /// The fencing token: rises on every claim and re-claim of any run in the store.
    pub token: i64,
}

/// The states of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Waiting for its next attempt.
    Pending,
    /// An attempt holds it.
    Running,
    /// Done.
    Succeeded,
    /// The last attempt failed; it may be retried.
    Failed,
    /// The last attempt stopped without an outcome (shutdown, a dead process).
    Abandoned,
    /// Not run, by policy, with a reason.
    Skipped,
    /// Attempts exhausted or a permanent error: needs a person.
    Dead,
}

impl RunStatus {
    /// The name stored with the run.
    pub const fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Abandoned => "abandoned",
            RunStatus::Skipped => "skipped",
            RunStatus::Dead => "dead",
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer to one claim request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This process holds the attempt.
    Won(Lease),
    /// The row exists and is not claimable: another process holds it, or it has finished.
    Taken {
        /// The row's status at the time of the claim.
        status: RunStatus,
    },
}

/// A store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached; nothing was changed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store refused the request.
    #[error("store refused the request: {0}")]
    Rejected(String),
}

/// Slot rows: claim, heartbeat, finish, all fenced.
#[async_trait]
pub trait SlotStore: Send + Sync + 'static {
    /// Claims every slot in `requests` for `owner`, in one round trip. A new slot becomes `running`
    /// with attempt 1; a `running` row whose heartbeat is older than its `stale_after` (by the store's
    /// clock) becomes a new attempt with a higher token; any other existing row is [`Claim::Taken`].
    /// One answer per request, in order.
    async fn claim(&self, owner: &str, requests: &[ClaimRequest])
    -> Result<Vec<Claim>, StoreError>;

    /// Refreshes the heartbeat of every attempt `owner` holds with one of `tokens`, in one statement,
    /// and returns the tokens still held. A token missing from the answer means ownership was lost.
    async fn heartbeat(&self, owner: &str, tokens: &[i64]) -> Result<Vec<i64>, StoreError>;

    /// Records the outcome of an attempt, only if `owner` still holds it with `lease.token`. Returns
    /// `false` when ownership was lost: nothing is written then.
    async fn finish(
        &self,
        owner: &str,
        lease: &Lease,
        outcome: &RunOutcome,
    ) -> Result<bool, StoreError>;
}

/// A held cluster-wide lock.
#[derive(Debug, Clone)]
pub struct LockLease {
    /// The lock's key.
    pub key: i64,
    /// Cancelled when the store notices the lock is gone while held (its connection died).
    pub lost: CancellationToken,
}

/// Cluster-wide locks, keyed by 64-bit integers from the scheduler's key registry.
#[async_trait]
pub trait LockStore: Send + Sync + 'static {
    /// Tries every key without waiting, in one round trip; `None` where another owner holds it.
    async fn try_lock(
        &self,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError>;

    /// Releases keys `owner` holds.
    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), StoreError>;
}

/// A store for every guard level: what [`SchedulerBuilder::backend`](crate::SchedulerBuilder::backend)
/// takes.
pub trait Backend: SlotStore + LockStore {
    /// A short name for logs (`memory`, `sqlite`, `postgres`).
    fn name(&self) -> &'static str;
}
