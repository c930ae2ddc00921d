//! The traits a store implements, one per capability: slot rows with fencing ([`SlotStore`], the
//! minimal store), the queue of schedulers and workers ([`QueueStore`]), checkpoints
//! ([`CheckpointStore`]), the store's clock ([`ClockStore`]), cluster-wide locks ([`LockStore`]),
//! what operators read and change ([`AdminStore`]), the replica registry ([`ReplicaStore`]) and
//! history retention ([`RetentionStore`]), schedules kept as data ([`ScheduleStore`]) and operators'
//! holiday overrides ([`CalendarStore`]). No method has a default: a store has a capability by
//! writing all of it, and [`Store`] says which it has, so that `build()` names a capability a role
//! or setting needs and the store lacks. A [`Backend`] has them all.
//!
//! The claim rules (overlap, fencing, take-over, burial, not-due) are written once, in [`rules`], as
//! pure functions the stores carry out; the events they imply are logged by core. The memory backend
//! in this crate implements every trait so that the `lock` and `slot` semantics are tested without a
//! database; the SQLite and PostgreSQL backends implement the same traits, pass the same contract
//! tests, and are held to [`rules`] by a model-based test.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::ErrorClass;
use crate::policy::Overlap;

pub mod admin;
pub mod calendars;
mod capabilities;
mod deadline;
pub mod held;
pub mod memory;
mod queue;
pub mod renewal;
pub mod replicas;
pub mod retention;
pub mod rules;
pub mod schedules;
mod stamp;
pub(crate) mod vocab;

pub use admin::{
    AdminStore, AttemptRecord, AuditEntry, AuditRecord, Enqueue, JobDefinition, JobRecord,
    RunChange, RunCounts, RunFilter, RunRecord,
};
pub use calendars::{
    CalendarOverride, CalendarStore, OverrideChanges, OverrideError, OverrideKind, OverrideSpec,
};
pub use capabilities::{AdminStoreExt, Capability, SlotStoreExt, Store};
pub use deadline::LeaseDeadline;
pub use queue::{CheckpointStore, ClockStore, QueueStore};
pub use replicas::{ReplicaInfo, ReplicaRecord, ReplicaStore};
pub use retention::{PRUNE_BATCH, PRUNE_LOCK_KEY, PruneSpec, Pruned, RetentionStore};
pub use schedules::{
    SCHEDULE_FENCE, ScheduleChanges, ScheduleSpec, ScheduleStore, ScheduleVersion, ScheduleWrite,
};
pub use stamp::CalendarStamp;
pub use vocab::{RunStatus, Trigger, UnknownRunStatus, UnknownTrigger};

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
    /// What to do when another run of the same job and partition is `running` (and not stale).
    pub overlap: Overlap,
    /// The calendar the slot was planned on, recorded with a new row; `None` without one.
    pub calendar: Option<CalendarStamp>,
    /// Claimed ahead of the slot's instant ([`claim_ahead`](crate::SchedulerBuilder::claim_ahead)):
    /// when another run of the job and partition is `running` with a fresh heartbeat and the
    /// overlap policy is not `allow`, nothing is written and the answer is [`Claim::Busy`]. The
    /// caller claims again at the instant, where the policy decides: an early claim never decides
    /// an overlap that the running run might end before the instant.
    pub ahead: bool,
    /// The caller asks again shortly when the answer is [`Claim::Contended`]: a store whose claims
    /// of one job take turns may then answer that for a request whose job another claim is
    /// deciding right now, instead of waiting for it. `false` makes the store wait.
    pub defer_if_contended: bool,
}

/// A claimed attempt of a run. Every write about it carries its fencing token, and the writes that
/// record what the attempt did ([`SlotStore::finish`], [`CheckpointStore::save_checkpoint`]) are
/// checked against the whole lease: the run id, the token, the owner and the slot's own key, so
/// that a run id and token handed out again (a database that went back in time) never match
/// another slot's run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    /// The run's id in the store.
    pub run_id: i64,
    /// The attempt number, from 1.
    pub attempt: u32,
    /// The fencing token: rises on every claim and re-claim of any run in the store.
    pub token: i64,
    /// The slot the run is of.
    pub key: SlotKey,
}

/// How far ahead of the store's clock a [`Trigger::Schedule`] slot may be claimed or recorded:
/// [`claim_ahead`](crate::SchedulerBuilder::claim_ahead) (at most 1 s), the clock tolerance of
/// [`ClockSync`](crate::ClockSync) and a margin. A claimer further ahead has a clock that is wrong;
/// its slot is not due yet, and the replicas with the right time will claim it when it is.
pub const MAX_EARLY: Duration = Duration::from_secs(2);

/// The longest lead ([`DueSpec::ahead`]) a store honours; a longer one counts as this. A worker's
/// lead is at most 1 s ([`claim_ahead`](crate::SchedulerBuilder::claim_ahead)).
pub const MAX_AHEAD: Duration = Duration::from_secs(86_400);

/// Whether `request` is a scheduled slot more than [`MAX_EARLY`] ahead of the store's `now`.
pub fn not_due(request: &ClaimRequest, now: DateTime<Utc>) -> bool {
    request.trigger == Trigger::Schedule
        && chrono::TimeDelta::from_std(MAX_EARLY)
            .ok()
            .and_then(|early| now.checked_add_signed(early))
            .is_some_and(|limit| request.key.scheduled_at > limit)
}

/// The answer to one claim request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// This process holds the attempt.
    Won(Lease),
    /// The row exists and is not claimable: another process holds it, or it has finished.
    Taken {
        /// The row's status at the time of the claim.
        status: RunStatus,
    },
    /// A scheduled slot more than [`MAX_EARLY`] ahead of the store's clock: nothing was written.
    NotDue,
    /// A request made [`ahead`](ClaimRequest::ahead) of its instant found another run of its job
    /// and partition running: nothing was written; claim it again at the instant.
    Busy,
    /// A request that may [defer](ClaimRequest::defer_if_contended) found another claim of its job
    /// in flight (usually of the same slot, by another replica): nothing was written; ask again
    /// shortly, when that claim has committed and its row can be seen.
    Contended,
    /// [`QueueStore::enqueue_slots`] wrote the slot as a `pending` row, due at its instant, for a
    /// worker to claim with [`SlotStore::claim_due`].
    Queued,
}

/// How an attempt ended, as the runtime decided it from the outcome and the job's retry policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish {
    /// The run's new status: `succeeded`, `pending` (a retry is planned), `failed`, `dead` or
    /// `abandoned`.
    pub status: RunStatus,
    /// The attempt's status: `succeeded`, `failed` or `abandoned`.
    pub attempt_status: RunStatus,
    /// For failures, whether a retry could help.
    pub error_class: Option<ErrorClass>,
    /// The error or the reason.
    pub message: Option<String>,
    /// When set, the run may be claimed again (by [`SlotStore::claim_due`]) this long after now, by
    /// the store's clock. `None` leaves it alone.
    pub retry_in: Option<Duration>,
}

impl Finish {
    /// The attempt succeeded.
    pub fn succeeded() -> Self {
        Finish {
            status: RunStatus::Succeeded,
            attempt_status: RunStatus::Succeeded,
            error_class: None,
            message: None,
            retry_in: None,
        }
    }

    /// The attempt failed; with `retry_in` the run waits `pending` for another attempt, without it the
    /// run ends `failed` (or `dead` for a permanent error).
    pub fn failed(
        class: ErrorClass,
        message: impl Into<String>,
        retry_in: Option<Duration>,
    ) -> Self {
        Finish {
            status: match (class, retry_in) {
                (ErrorClass::Permanent, _) => RunStatus::Dead,
                (ErrorClass::Transient, Some(_)) => RunStatus::Pending,
                (ErrorClass::Transient, None) => RunStatus::Failed,
            },
            attempt_status: RunStatus::Failed,
            error_class: Some(class),
            message: Some(message.into()),
            retry_in: if class == ErrorClass::Permanent {
                None
            } else {
                retry_in
            },
        }
    }

    /// The attempt stopped without an outcome; with `retry_in` another process may recover it then.
    pub fn abandoned(reason: impl Into<String>, retry_in: Option<Duration>) -> Self {
        Finish {
            status: RunStatus::Abandoned,
            attempt_status: RunStatus::Abandoned,
            error_class: None,
            message: Some(reason.into()),
            retry_in,
        }
    }
}

/// A job whose overdue work [`SlotStore::claim_due`] may claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueSpec {
    /// The job's name.
    pub job: String,
    /// Attempts in all; a stale or abandoned run that has had them all becomes `dead` instead.
    pub max_attempts: u32,
    /// The job's overlap policy. Unless it is [`Overlap::Allow`], a run of the job is only handed
    /// out while no other run of the same job and partition is `running` with a fresh heartbeat,
    /// and at most one per job and partition per call.
    pub overlap: Overlap,
    /// At most this many runs of the job handed out by this call (a worker's room for the job);
    /// `None`: only the call's limit.
    pub limit: Option<u32>,
    /// At most this many runs of the job `running` with a fresh heartbeat in the whole store once
    /// the call has handed its runs out; `None`: no such limit.
    pub cluster_limit: Option<u32>,
    /// Hands out early, besides the work that is due, the slots a scheduler queued (`pending`,
    /// attempt 0, from the schedule) that fall due within this long after the store's now, so
    /// that the caller can start each body at its slot's instant instead of claiming then. An
    /// early claim decides no overlap: unless the overlap is [`Overlap::Allow`], a queued slot of
    /// a job and partition with a run `running` and fresh is left alone until it is due, where
    /// the policy decides. Zero (the default): only due work; at most [`MAX_AHEAD`] counts.
    pub ahead: Duration,
}

impl DueSpec {
    /// A spec for `job` with `max_attempts` and overlap [`Overlap::Skip`] (the default policy).
    pub fn new(job: impl Into<String>, max_attempts: u32) -> Self {
        DueSpec {
            job: job.into(),
            max_attempts,
            overlap: Overlap::Skip,
            limit: None,
            cluster_limit: None,
            ahead: Duration::ZERO,
        }
    }

    /// The same spec, handing out queued slots that fall due within `ahead` (see
    /// [`ahead`](Self::ahead)).
    pub fn with_ahead(mut self, ahead: Duration) -> Self {
        self.ahead = ahead;
        self
    }

    /// The lead a store honours: [`ahead`](Self::ahead), at most [`MAX_AHEAD`].
    pub fn lead(&self) -> Duration {
        self.ahead.min(MAX_AHEAD)
    }

    /// The same spec with a limit on this call's runs of the job and one across the store.
    pub fn with_limits(mut self, limit: Option<u32>, cluster_limit: Option<u32>) -> Self {
        self.limit = limit;
        self.cluster_limit = cluster_limit;
        self
    }

    /// Whether a call that handed out `handed` runs of the job may hand out no more, with `running`
    /// runs of the job `running` and fresh in the store (those handed out included).
    pub fn is_full(&self, handed: usize, running: usize) -> bool {
        self.limit.is_some_and(|n| handed >= n as usize)
            || self.cluster_limit.is_some_and(|n| running >= n as usize)
    }

    /// The same spec with another overlap policy.
    pub fn with_overlap(mut self, overlap: Overlap) -> Self {
        self.overlap = overlap;
        self
    }
}

/// A run claimed by [`SlotStore::claim_due`]: a retry, a recovered stale or abandoned attempt, or a
/// buffered slot whose predecessor ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueClaim {
    /// The slot.
    pub key: SlotKey,
    /// The new attempt.
    pub lease: Lease,
    /// Why the run exists.
    pub trigger: Trigger,
    /// The zone recorded with the run.
    pub zone: String,
    /// The wall time recorded with the run.
    pub wall: NaiveDateTime,
    /// The business date recorded with the run.
    pub business_date: NaiveDate,
    /// The W3C `traceparent` of the span that queued the run
    /// ([`QueueStore::enqueue_slots`]), if it carried one: the run's span links to it.
    pub trace_parent: Option<String>,
}

/// A store could not do what was asked: which kind of failure, what happened, and the error
/// underneath (a driver's, such as `sqlx::Error` or `redis::RedisError`), reached by
/// [`std::error::Error::source`].
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached; nothing was changed.
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What happened.
        message: String,
        /// The error underneath, if any.
        #[source]
        source: Option<ErrorSource>,
    },
    /// The store refused the request.
    #[error("store refused the request: {message}")]
    Rejected {
        /// What happened.
        message: String,
        /// The error underneath, if any.
        #[source]
        source: Option<ErrorSource>,
    },
}

/// The error underneath a [`StoreError`], shared so that the error stays `Clone`.
pub type ErrorSource = std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>;

impl StoreError {
    /// The store cannot be reached.
    pub fn unavailable(message: impl Into<String>) -> Self {
        StoreError::Unavailable {
            message: message.into(),
            source: None,
        }
    }

    /// The store refused the request.
    pub fn rejected(message: impl Into<String>) -> Self {
        StoreError::Rejected {
            message: message.into(),
            source: None,
        }
    }

    /// The same error with `source` underneath it.
    pub fn with_source(mut self, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        let (StoreError::Unavailable { source, .. } | StoreError::Rejected { source, .. }) =
            &mut self;
        *source = Some(std::sync::Arc::new(error));
        self
    }

    /// Whether the store could not be reached (as opposed to refusing the request).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }

    /// What happened, without the kind.
    pub fn message(&self) -> &str {
        let (StoreError::Unavailable { message, .. } | StoreError::Rejected { message, .. }) = self;
        message
    }
}

/// Two errors are equal when they are of one kind and say the same: the sources are not compared.
impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        self.is_unavailable() == other.is_unavailable() && self.message() == other.message()
    }
}

impl Eq for StoreError {}

/// Slot rows: claim, heartbeat, finish, all fenced. The minimal store: every store that keeps
/// slot rows writes each of these methods (none has a default); what only some roles or stores
/// do is a trait of its own ([`QueueStore`], [`CheckpointStore`], [`ClockStore`], [`LockStore`],
/// [`AdminStore`], [`ReplicaStore`], [`RetentionStore`]), and [`Store`] says which a store has.
#[async_trait]
pub trait SlotStore: Send + Sync + 'static {
    /// Claims every slot in `requests` for `owner`, in one round trip; one answer per request, in order.
    ///
    /// - A new slot becomes `running` with attempt 1 and a new token, unless another run of the same
    ///   job and partition is `running` and not stale, in which case the request's [`Overlap`] decides:
    ///   `Skip` records the slot `skipped` (message `overlap: a previous run is still running`) and
    ///   answers `Taken { Skipped }`; `BufferOne` marks older waiting slots of the job `skipped` and
    ///   records this one `pending` with no `next_attempt_at` (it waits), answering `Taken { Pending }`;
    ///   `Replace` marks the running runs `abandoned` (message `replaced by a newer slot`, no
    ///   `next_attempt_at`, so nothing recovers them) and claims the new slot; `Allow` claims it.
    /// - A `running` row whose heartbeat is older than its `stale_after` (by the store's clock) becomes
    ///   a new attempt with a higher token; its previous attempt is recorded `abandoned`.
    /// - When a new slot is claimed to run (overlap not `allow`), the other runs of its job and
    ///   partition that are `running` with a stale heartbeat are fenced: recorded `abandoned`
    ///   (message `heartbeat expired`, due again at once), their attempts closed, so that their
    ///   frozen holders' heartbeats and writes are refused from now on; `claim_due` hands them out
    ///   again once the new run has ended.
    /// - Any other existing row is [`Claim::Taken`] with its status.
    /// - Before all of that, a [`Trigger::Schedule`] slot more than [`MAX_EARLY`] ahead of the
    ///   store's clock is [`Claim::NotDue`], and nothing is written for it.
    /// - A store whose claims of one job wait for each other (PostgreSQL's per-job claim locks) may
    ///   answer [`Claim::Contended`], writing nothing, for a request that
    ///   [may defer](ClaimRequest::defer_if_contended) while another claim of its job is in flight;
    ///   the memory and SQLite stores never do (their claims run one at a time).
    ///
    /// A batch holds at most one request per job and partition.
    ///
    /// # Cancel safety
    /// Dropping the future before it completes may leave slots claimed that nobody runs; their rows
    /// go stale after their threshold and are recovered like those of a dead process.
    async fn claim(&self, owner: &str, requests: &[ClaimRequest])
    -> Result<Vec<Claim>, StoreError>;

    /// Claims, for `owner`, up to `limit` runs of the jobs in `specs` that are due for another attempt,
    /// oldest slot first, in one round trip:
    /// - `pending` or `abandoned` with `next_attempt_at` reached (retries, shutdown hand-overs);
    /// - `pending` with no `next_attempt_at` (buffered) once no run of the same job and partition is
    ///   `running` and fresh;
    /// - `running` with a stale heartbeat (its attempt is recorded `abandoned`, message
    ///   `heartbeat expired`);
    /// - a slot a scheduler queued that falls due within the spec's [`ahead`](DueSpec::ahead),
    ///   unless (overlap not `allow`) a run of its job and partition is `running` with a fresh
    ///   heartbeat: it is claimed early and decided by nothing.
    ///
    /// Each becomes `running` with attempt + 1 and a new token. A stale or abandoned run that already
    /// had `max_attempts` attempts becomes `dead` instead and is not returned.
    ///
    /// A slot a scheduler queued ([`QueueStore::enqueue_slots`]) whose job and partition
    /// has another run `running` with a fresh heartbeat is decided by the spec's overlap first:
    /// `skip` records it `skipped`, `buffer_one` lets the newest wait, `replace` abandons the
    /// running runs (and the slot then runs). See [`rules::plan_due`].
    ///
    /// Unless a spec's overlap is [`Overlap::Allow`], a run is not handed out while another run of
    /// the same job and partition is `running` with a fresh heartbeat, and at most one run per job
    /// and partition is handed out per call: whatever path claims it, the store never has two runs
    /// of such a job and partition running at once.
    ///
    /// # Cancel safety
    /// Dropping the future before it completes may leave runs claimed that nobody runs; they are
    /// stale after their threshold and recovered like those of a dead process.
    async fn claim_due(
        &self,
        owner: &str,
        specs: &[DueSpec],
        limit: usize,
    ) -> Result<Vec<DueClaim>, StoreError>;

    /// Which of the jobs in `specs` have work waiting for [`claim_due`](Self::claim_due), in one
    /// read (nothing is written): due retries, hand-overs, manual and backfill runs, stale attempts,
    /// buffered slots — including work that must wait for a running run of its job. The runtime
    /// asks first, so that it takes the flag and the lock only of jobs with work waiting, and so
    /// that the end of a run looks again at once when its job has more.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn due_jobs(&self, specs: &[DueSpec]) -> Result<Vec<String>, StoreError>;

    /// Which of the slots in `keys` have a row, in one read (nothing is written): the second look
    /// at slots whose lock was held elsewhere asks first, and walks the chain only for slots that
    /// still have none (usually the holder was working on the same slot and its row exists).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn existing_slots(&self, keys: &[SlotKey]) -> Result<Vec<bool>, StoreError>;

    /// Records slots that were not run because a run of the same job was still going in this process:
    /// each becomes a `skipped` row with `reason`, unless a row for it exists already
    /// (then nothing changes), or it is a scheduled slot not due yet (see [`Claim::NotDue`]). One
    /// round trip.
    ///
    /// # Cancel safety
    /// Cancel safe: recording is idempotent (an existing row is left alone), the caller may record
    /// again.
    async fn record_skipped(
        &self,
        requests: &[ClaimRequest],
        reason: &str,
    ) -> Result<(), StoreError>;

    /// Refreshes the heartbeat of every attempt `owner` holds with one of `tokens`, in one statement,
    /// and returns the tokens still held. A token missing from the answer means ownership was lost.
    ///
    /// # Cancel safety
    /// Cancel safe: a heartbeat only moves a time forward; the next one repeats it.
    async fn heartbeat(&self, owner: &str, tokens: &[i64]) -> Result<Vec<i64>, StoreError>;

    /// Records how attempts of `owner` ended, in one round trip; one answer per attempt, in order.
    /// Each is written only if `owner` still holds the run with its lease's run id and token, it is
    /// `running` and it is the run of the lease's slot (job, instant, partition); `false` means
    /// ownership was lost, and nothing is written for that attempt.
    ///
    /// # Cancel safety
    /// Dropping the future may or may not have recorded the outcomes; an attempt whose outcome was
    /// not recorded stays `running` until its heartbeat is stale, and is then recovered.
    async fn finish(
        &self,
        owner: &str,
        finishes: &[(Lease, Finish)],
    ) -> Result<Vec<bool>, StoreError>;
}

/// A lock another process holds, and the job it guards, for [`LockStore::break_stale_locks`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleLock {
    /// The lock's key.
    pub key: i64,
    /// The job whose runs tell whether the holder is alive.
    pub job: String,
}

/// A held cluster-wide lock.
#[derive(Debug, Clone)]
pub struct LockLease {
    /// The lock's key.
    pub key: i64,
    /// Cancelled when the store notices the lock is gone while held (its connection died, its lease
    /// lapsed or was taken).
    pub lost: CancellationToken,
    /// The lease's fencing token, for stores whose locks are leases that can lapse while their holder
    /// still works (SQLite, Redis): it rises with every grant of the key, so a system that refuses
    /// writes carrying a token lower than the highest it has seen makes a late holder harmless.
    /// `None` for locks tied to a live session (PostgreSQL advisory locks, the memory backend).
    pub token: Option<i64>,
    /// When the lease lapses unless renewed, for stores that renew their leases in the background
    /// (Redis, SQLite): a run at the `lock` level counts as lost from then on
    /// ([`JobContext::is_lost`](crate::JobContext::is_lost)), even before the store's renewal task
    /// has run to cancel [`lost`](Self::lost) (a process frozen past the deadline). `None` where
    /// the store tells a loss only through `lost`.
    pub deadline: Option<LeaseDeadline>,
}

/// Cluster-wide locks, keyed by 64-bit integers from the scheduler's key registry.
#[async_trait]
pub trait LockStore: Send + Sync + 'static {
    /// Tries every key without waiting, in one round trip; `None` where another owner holds it.
    ///
    /// # Cancel safety
    /// Must be cancel safe: locks granted after the caller went away are released again (the
    /// runtime relies on it; the PostgreSQL and SQLite backends do so).
    async fn try_lock(
        &self,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError>;

    /// Releases keys `owner` holds.
    ///
    /// # Cancel safety
    /// Should complete even if the caller goes away; a lock left held is released when its session
    /// ends (PostgreSQL) or its lease expires (SQLite).
    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), StoreError>;

    /// Frees the locks in `locks` whose holder (another process) is frozen or cut off: it holds the
    /// lock while its runs of the lock's job are `running` with a stale heartbeat and no run of the
    /// job is fresh. Returns the keys freed; the caller tries them again. A store whose locks are
    /// leases that expire on their own (SQLite, Redis) frees nothing.
    ///
    /// # Cancel safety
    /// Cancel safe: a lock freed for a caller that is gone is taken by the next one.
    async fn break_stale_locks(
        &self,
        owner: &str,
        locks: &[StaleLock],
    ) -> Result<Vec<i64>, StoreError>;

    /// Records which job each key belongs to, so that two binaries sharing a store cannot use one key
    /// for different jobs without noticing. Fails with [`StoreError::Rejected`] naming both jobs when a
    /// key is registered to another job.
    ///
    /// # Cancel safety
    /// Cancel safe: registration is idempotent.
    async fn register_lock_keys(
        &self,
        namespace: &str,
        keys: &[(i64, String)],
    ) -> Result<(), StoreError>;
}

/// A store with every capability, for every guard level, role and setting and for operators:
/// what [`SchedulerBuilder::backend`](crate::SchedulerBuilder::backend) takes. A store that does
/// only some of it is described by a [`Store`] instead.
pub trait Backend:
    SlotStore
    + QueueStore
    + CheckpointStore
    + ClockStore
    + LockStore
    + AdminStore
    + ReplicaStore
    + RetentionStore
    + ScheduleStore
    + CalendarStore
{
    /// A short name for logs (`memory`, `sqlite`, `postgres`).
    fn name(&self) -> &'static str;
}
