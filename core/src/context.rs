//! What a running job sees of its run.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use slotguard_cron::Slot;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::guard::RunInfo;
use crate::runtime::Candidate;
use crate::state::{MissingState, StateMap};
use crate::store::Trigger;

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

    /// A token cancelled together with [`cancelled`](Self::cancelled), to hand to other tasks.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.stop.clone()
    }
}
