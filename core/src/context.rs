//! What a running job sees of its run.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use slotguard_cron::Slot;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use async_trait::async_trait;

use crate::state::{MissingState, StateMap};
use crate::store::{LeaseDeadline, StoreError, Trigger};

/// The slot a body runs for, as the chain admitted it.
#[derive(Debug, Clone)]
pub(crate) struct RunSlot {
    pub(crate) slot: Slot,
    pub(crate) trigger: Trigger,
    /// Empty when the job is not partitioned.
    pub(crate) partition: Arc<str>,
    /// The `traceparent` of the span that queued the run (scheduler role), if it carried one.
    pub(crate) trace_parent: Option<String>,
}

/// What the run's context learns from the permits it holds.
#[derive(Debug, Default, Clone)]
pub(crate) struct RunInfo {
    pub(crate) run_id: Option<i64>,
    pub(crate) attempt: Option<u32>,
    pub(crate) fencing_token: Option<i64>,
}

/// Where a run's checkpoints go: the slot layer, which writes them under the attempt's fencing
/// token.
#[async_trait]
pub(crate) trait Checkpoints: Send + Sync + std::fmt::Debug {
    /// Saves `data`; `false` when the attempt no longer holds the run.
    async fn save(&self, data: &str) -> Result<bool, StoreError>;

    /// The checkpoint an earlier attempt saved.
    async fn load(&self) -> Result<Option<String>, StoreError>;
}

/// The context of one run, handed to the job body.
///
/// ```
/// use slotguard::{Job, JobContext};
///
/// struct Mailer { from: &'static str }
///
/// let job = Job::new("settle", "0 2 * * *", |ctx: JobContext| async move {
///     let mailer = ctx.state::<Mailer>()?;
///     // The same key on every attempt of this slot, on every replica: give it to the bank.
///     println!("{} settles {} as {}", mailer.from, ctx.business_date(), ctx.idempotency_key());
///     Ok::<(), slotguard::JobError>(())
/// });
/// # let _ = job;
/// ```
#[derive(Debug, Clone)]
pub struct JobContext {
    pub(crate) job: Arc<str>,
    pub(crate) slot: Slot,
    pub(crate) partition: Option<Arc<str>>,
    pub(crate) trigger: Trigger,
    pub(crate) info: RunInfo,
    pub(crate) idempotency_key: String,
    pub(crate) state: Arc<StateMap>,
    pub(crate) stop: CancellationToken,
    pub(crate) lost: CancellationToken,
    /// The deadlines of the leases whose loss ends the run (Redis at the `lock` level).
    pub(crate) deadlines: Vec<LeaseDeadline>,
    pub(crate) checkpoint: Option<Arc<str>>,
    pub(crate) saver: Option<Arc<dyn Checkpoints>>,
}

/// The largest checkpoint accepted, in bytes.
pub const MAX_CHECKPOINT_BYTES: usize = 1 << 20;

/// Why a checkpoint was not saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Checkpoints live in slot rows: the job is not at the `slot` level.
    #[error("checkpoints need the `slot` guard level")]
    NotAvailable,
    /// This attempt no longer holds the run; nothing was written.
    #[error("this attempt lost the run; the checkpoint was not saved")]
    Lost,
    /// The checkpoint is larger than [`MAX_CHECKPOINT_BYTES`].
    #[error("checkpoint of {0} bytes is larger than the 1 MiB accepted")]
    TooLarge(usize),
    /// The store could not be reached.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A run's idempotency key: `job:slot` or `job:slot:partition`, the slot in UTC. Scheduled slots fall
/// on whole seconds; manual runs carry milliseconds so that their keys cannot equal a scheduled slot's.
pub fn idempotency_key(
    job: &str,
    scheduled_at: &chrono::DateTime<chrono::Utc>,
    partition: &str,
) -> String {
    let format = if scheduled_at.timestamp_subsec_millis() == 0 {
        "%Y-%m-%dT%H:%M:%SZ"
    } else {
        "%Y-%m-%dT%H:%M:%S%.3fZ"
    };
    let mut key = format!("{job}:{}", scheduled_at.format(format));
    if !partition.is_empty() {
        key.push(':');
        key.push_str(partition);
    }
    key
}

impl JobContext {
    pub(crate) fn new(
        job: Arc<str>,
        run: &RunSlot,
        info: RunInfo,
        state: Arc<StateMap>,
        (stop, lost): (CancellationToken, CancellationToken),
    ) -> Self {
        let (slot, trigger) = (run.slot, run.trigger);
        let partition = (!run.partition.is_empty()).then(|| Arc::clone(&run.partition));
        let idempotency_key = idempotency_key(&job, &slot.scheduled_at, &run.partition);
        JobContext {
            job,
            slot,
            partition,
            trigger,
            info,
            idempotency_key,
            state,
            stop,
            lost,
            deadlines: Vec::new(),
            checkpoint: None,
            saver: None,
        }
    }

    /// The job's name.
    pub fn job_name(&self) -> &str {
        &self.job
    }

    /// The slot this run is for.
    pub fn slot(&self) -> &Slot {
        &self.slot
    }

    /// The slot's instant: computed from the schedule, never from "now".
    pub fn scheduled_at(&self) -> DateTime<Utc> {
        self.slot.scheduled_at
    }

    /// The slot's business date: the local date of the wall time the schedule names.
    pub fn business_date(&self) -> NaiveDate {
        self.slot.business_date()
    }

    /// The partition key, for partitioned jobs.
    pub fn partition(&self) -> Option<&str> {
        self.partition.as_deref()
    }

    /// Why this run exists.
    pub fn trigger(&self) -> Trigger {
        self.trigger
    }

    /// The attempt number, from 1. Without a slot row (levels below `slot`) it is always 1.
    pub fn attempt(&self) -> u32 {
        self.info.attempt.unwrap_or(1)
    }

    /// The run's id in the store, at the `slot` level.
    pub fn run_id(&self) -> Option<i64> {
        self.info.run_id
    }

    /// The fencing token of this run: it rises with every grant, so a side effect written with it can
    /// refuse a late write from a holder that lost its hold.
    ///
    /// - At the `slot` level, the slot row's token (the authority: the store fences every write of
    ///   the attempt with it).
    /// - At the `lock` level, the lock lease's token when the lock store's locks are leases that can
    ///   lapse (Redis, SQLite); `None` with PostgreSQL advisory locks, which end only with their
    ///   session.
    /// - `None` below `lock`.
    ///
    /// The two come from different counters and are never compared with each other; see
    /// `docs/guards.md`, "Fencing tokens".
    pub fn fencing_token(&self) -> Option<i64> {
        self.info.fencing_token
    }

    /// `job:scheduled_at` (`daily_settlement:2026-03-08T17:00:00Z`), with `:partition` appended for a
    /// partitioned job: the same on every attempt and every replica, so an external system can
    /// deduplicate on it. A manual run (`Admin::trigger` of the `slotguard-admin` crate) has a slot
    /// with milliseconds (`…T17:03:12.345Z`), so its key never equals a scheduled slot's.
    pub fn idempotency_key(&self) -> &str {
        &self.idempotency_key
    }

    /// State given to the scheduler with [`SchedulerBuilder::state`](crate::SchedulerBuilder::state),
    /// looked up by type.
    ///
    /// # Errors
    /// [`MissingState`] when no state of that type was given. Returned with `?` from a job, it is a
    /// permanent failure: the run ends `dead` at once, without retries (the state will not appear
    /// on a second attempt; give it with [`SchedulerBuilder::state`](crate::SchedulerBuilder::state)).
    pub fn state<T: Send + Sync + 'static>(&self) -> Result<&T, MissingState> {
        self.state.get::<T>()
    }

    /// Completes when the job should stop: the scheduler's grace period ran out during shutdown, or
    /// this run lost its ownership. Cancel safe.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.stop.cancelled()
    }

    /// Whether the job should stop now.
    pub fn is_cancelled(&self) -> bool {
        self.stop.is_cancelled() || self.lease_lapsed()
    }

    /// Completes when this run really lost its ownership, and [`cancelled`](Self::cancelled)
    /// completes with it:
    ///
    /// - at the `slot` level, when the slot row is no longer this attempt's: a heartbeat or a
    ///   fenced write was refused because another process took the run over (after this one missed
    ///   its heartbeats, was frozen, or the store fenced it for a newer slot), an operator cancelled
    ///   it, or a `replace` slot superseded it; or when no heartbeat was confirmed for the stale
    ///   threshold (less a quarter of a heartbeat interval) since the sending of the last one, by
    ///   this process's clock, so that the body stops before another process may take the run
    ///   over (its heartbeats hang in a network that holds them up). Losing only the lock's
    ///   database session is **not** a loss at this level: the row is still this attempt's, the
    ///   run goes on and the lock is taken again on a fresh session;
    /// - at the `lock` level (no row to judge by), when the lock's session died or its lease
    ///   expired: another process may hold the lock now.
    ///
    /// Never at the `none` and `local` levels. Whatever the job writes afterwards with its fencing
    /// token must be refused by the system it writes to. Cancel safe.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.lost.cancelled()
    }

    /// Whether this run lost its ownership. At the `slot` level, and at the `lock` level on a
    /// lease store (Redis, `PgLeaseLocks`), this is also true once the deadline has passed
    /// unrenewed, before the renewal task has run to say so (a process frozen past the deadline
    /// and woken again): check it right before a side effect.
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled() || self.lease_lapsed()
    }

    /// Whether a lease this run holds has passed its deadline unrenewed.
    fn lease_lapsed(&self) -> bool {
        self.deadlines.iter().any(LeaseDeadline::has_passed)
    }

    /// The checkpoint an earlier attempt of this run saved, if any: where a retry resumes.
    pub fn checkpoint(&self) -> Option<&str> {
        self.checkpoint.as_deref()
    }

    /// Saves progress under this run (text, JSON by convention; at most 1 MiB), so that the next
    /// attempt, after a failure, a crash or a hand-over, can resume from
    /// [`checkpoint`](Self::checkpoint). The write is fenced: an attempt that lost the run cannot
    /// overwrite the progress of the one that took it over.
    ///
    /// # Errors
    /// [`CheckpointError`]: not at the `slot` level, ownership lost, too large, or the store is
    /// unreachable.
    pub async fn save_checkpoint(&self, data: impl Into<String>) -> Result<(), CheckpointError> {
        let data = data.into();
        if data.len() > MAX_CHECKPOINT_BYTES {
            return Err(CheckpointError::TooLarge(data.len()));
        }
        let saver = self.saver.as_ref().ok_or(CheckpointError::NotAvailable)?;
        if saver.save(&data).await? {
            Ok(())
        } else {
            Err(CheckpointError::Lost)
        }
    }

    /// A token cancelled together with [`cancelled`](Self::cancelled), to hand to other tasks.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.stop.clone()
    }
}
