//! What a running job sees of its run.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use slotguard_cron::Slot;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::guard::RunInfo;
use crate::runtime::Candidate;
use crate::state::{MissingState, StateMap};
use crate::store::{Backend, Lease, StoreError, Trigger};

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
    pub(crate) checkpoint: Option<Arc<str>>,
    pub(crate) saver: Option<Arc<CheckpointSaver>>,
}

/// Where [`JobContext::save_checkpoint`] writes: the run's row, fenced by the attempt's token.
pub(crate) struct CheckpointSaver {
    pub(crate) store: Arc<dyn Backend>,
    pub(crate) owner: Arc<str>,
    pub(crate) lease: Lease,
}

impl std::fmt::Debug for CheckpointSaver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointSaver")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

/// The largest checkpoint accepted, in bytes.
pub const MAX_CHECKPOINT_BYTES: usize = 1 << 20;

/// Why a checkpoint was not saved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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

impl JobContext {
    pub(crate) fn new(
        candidate: &Candidate,
        info: RunInfo,
        state: Arc<StateMap>,
        stop: CancellationToken,
        lost: CancellationToken,
    ) -> Self {
        let (job, slot, trigger) = (
            Arc::clone(&candidate.job.name),
            candidate.slot,
            candidate.trigger,
        );
        let partition = (!candidate.partition.is_empty()).then(|| Arc::clone(&candidate.partition));
        // Scheduled slots fall on whole seconds; manual runs carry milliseconds so that their keys
        // cannot equal a scheduled slot's.
        let format = if slot.scheduled_at.timestamp_subsec_millis() == 0 {
            "%Y-%m-%dT%H:%M:%SZ"
        } else {
            "%Y-%m-%dT%H:%M:%S%.3fZ"
        };
        let mut idempotency_key = format!("{job}:{}", slot.scheduled_at.format(format));
        if let Some(partition) = &partition {
            idempotency_key.push(':');
            idempotency_key.push_str(partition);
        }
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

    /// The fencing token of this attempt, at the `slot` level. It rises with every claim, so a side
    /// effect written with it can refuse a late write from an attempt that lost the slot.
    pub fn fencing_token(&self) -> Option<i64> {
        self.info.fencing_token
    }

    /// `job:scheduled_at` (`daily_settlement:2026-03-08T17:00:00Z`), with `:partition` appended for a
    /// partitioned job: the same on every attempt and every replica, so an external system can
    /// deduplicate on it. A manual run ([`Admin::trigger`](crate::admin::Admin::trigger)) has a slot
    /// with milliseconds (`…T17:03:12.345Z`), so its key never equals a scheduled slot's.
    pub fn idempotency_key(&self) -> &str {
        &self.idempotency_key
    }

    /// State given to the scheduler with [`SchedulerBuilder::state`](crate::SchedulerBuilder::state),
    /// looked up by type.
    ///
    /// # Errors
    /// [`MissingState`] when no state of that type was given.
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
        self.stop.is_cancelled()
    }

    /// Completes when this run lost its ownership: its lock's session died or another process took
    /// the slot over after a missed heartbeat. Whatever the job writes afterwards with its fencing
    /// token must be refused by the store it writes to. Cancel safe.
    pub fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.lost.cancelled()
    }

    /// Whether this run lost its ownership.
    pub fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
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
        if saver
            .store
            .save_checkpoint(&saver.owner, &saver.lease, &data)
            .await?
        {
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
