//! Guards: layers of exclusion in front of a job body, chosen per job from cheap to irrevocable.
//!
//! ```text
//!            tick: slots due now, for every job
//!                          │
//!   ┌──────────────────────▼──────────────────────┐
//!   │ local: per-process running flag             │  no overlap inside this process
//!   │  ┌───────────────────────────────────────┐  │
//!   │  │ lock: advisory lock on a held session │  │  no concurrent run in the cluster
//!   │  │  ┌─────────────────────────────────┐  │  │
//!   │  │  │ slot: claim the slot row        │  │  │  once per slot, history, recovery
//!   │  │  │          job body               │  │  │
//!   │  │  └─────────────────────────────────┘  │  │
//!   │  └───────────────────────────────────────┘  │
//!   └─────────────────────────────────────────────┘
//! ```
//!
//! Layers are acquired outside in and released inside out. The cheapest layer runs first, so an overlap
//! inside one process never costs a database round trip, and the slot row is claimed last, so a process
//! never claims a slot it then cannot run. Each layer decides for the whole tick at once (one round trip
//! for all the slots due in it), and holds its permit for exactly as long as the body runs.

use std::fmt;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

pub(crate) use crate::context::RunInfo;
use crate::entry::{Candidate, RunSlot};
pub use crate::policy::{GuardLevel, UnknownGuardLevel};
use crate::trace::RunResult;

pub(crate) mod batch;
pub(crate) mod heartbeats;
pub(crate) mod local;
pub(crate) mod lock;
pub(crate) mod slot;

/// Why a guard did not let a slot run. Recorded (where a store exists) and logged as
/// `job_claim_skipped`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// The job's previous run in this process is still going (`local`).
    RunningHere,
    /// Another process holds the job's lock (`lock`).
    LockedElsewhere,
    /// The slot row exists already: another process claimed it, or it has finished (`slot`).
    AlreadyClaimed,
    /// The store decided by the job's overlap policy: recorded `skipped`, or waiting as `pending`.
    Overlap(crate::store::RunStatus),
    /// The store's clock says the slot is not due yet: this replica's clock is ahead of it by more
    /// than [`MAX_EARLY`](crate::store::MAX_EARLY) (`slot`).
    NotDue,
    /// Claimed ahead of its instant while another run of the job was going (`slot`): claimed again
    /// at the instant, where the overlap policy decides.
    Busy,
    /// Another claim of the job was in flight (`slot`, PostgreSQL): nothing was written; the slot
    /// is looked at again shortly, when that claim's row can be seen.
    Contended,
    /// The scheduler is shutting down and claims nothing new.
    ShuttingDown,
    /// The store could not be reached; nothing was claimed.
    StoreUnavailable(String),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::RunningHere => {
                f.write_str("previous run still in progress in this process")
            }
            SkipReason::LockedElsewhere => f.write_str("lock held by another process"),
            SkipReason::AlreadyClaimed => f.write_str("slot already claimed"),
            SkipReason::Overlap(crate::store::RunStatus::Pending) => {
                f.write_str("a previous run is still going; this slot waits for it (buffer_one)")
            }
            SkipReason::Overlap(_) => f.write_str("a previous run is still going; slot skipped"),
            SkipReason::NotDue => {
                f.write_str("not due yet by the store's clock: this replica's clock is ahead of it")
            }
            SkipReason::Busy => f.write_str(
                "a previous run is still going ahead of the slot's instant; claimed again at the instant",
            ),
            SkipReason::Contended => f.write_str(
                "another claim of the job was in flight; looked at again when it has committed",
            ),
            SkipReason::ShuttingDown => f.write_str("scheduler is shutting down"),
            SkipReason::StoreUnavailable(e) => write!(f, "store unavailable: {e}"),
        }
    }
}

impl SkipReason {
    /// A short, stable label for logs and metrics.
    pub const fn label(&self) -> &'static str {
        match self {
            SkipReason::RunningHere => "running_here",
            SkipReason::LockedElsewhere => "locked_elsewhere",
            SkipReason::AlreadyClaimed => "already_claimed",
            SkipReason::Overlap(_) => "overlap",
            SkipReason::NotDue => "not_due",
            SkipReason::Busy => "busy_ahead",
            SkipReason::Contended => "contended",
            SkipReason::ShuttingDown => "shutting_down",
            SkipReason::StoreUnavailable(_) => "store_unavailable",
        }
    }
}

/// A layer's answer for one candidate.
pub(crate) enum Decision {
    /// Admitted: the layer holds this permit for as long as the body runs.
    Admit(Box<dyn Permit>),
    /// Let through without holding anything (a second look whose lock is held elsewhere: the
    /// store's overlap policy decides, see `runtime::tick`).
    Pass,
    /// Due work the slot layer claimed: one run per claimed attempt, each with its permit. Empty
    /// when nothing was due after all.
    Claimed(Vec<(RunSlot, Box<dyn Permit>)>),
    /// Not admitted.
    Skip(SkipReason),
}

/// How a run ended, as the guards see it when they release.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// The body returned `Ok`.
    Succeeded,
    /// The body returned an error or panicked.
    Failed {
        /// Whether a retry may help.
        class: crate::ErrorClass,
        /// The error, as text.
        message: String,
    },
    /// The run was stopped before it finished (shutdown, lost ownership).
    Abandoned {
        /// Why.
        reason: String,
    },
}

impl RunOutcome {
    /// How a body that ended with this outcome ran, as `workflow.task.run.result` says it.
    pub(crate) fn run_result(&self, panicked: bool, timed_out: bool) -> RunResult {
        match self {
            RunOutcome::Succeeded => RunResult::Success,
            RunOutcome::Abandoned { .. } => RunResult::Cancellation,
            RunOutcome::Failed { .. } if timed_out => RunResult::Timeout,
            RunOutcome::Failed { .. } if panicked => RunResult::Error,
            RunOutcome::Failed { .. } => RunResult::Failure,
        }
    }

    /// A short, stable label for logs, metrics and stores.
    pub const fn label(&self) -> &'static str {
        match self {
            RunOutcome::Succeeded => "succeeded",
            RunOutcome::Failed { .. } => "failed",
            RunOutcome::Abandoned { .. } => "abandoned",
        }
    }
}

/// Held while the body runs; released inside out when it ends.
#[async_trait]
pub(crate) trait Permit: Send + Sync {
    /// Adds what the job may see (run id, attempt, fencing token).
    fn describe(&self, _info: &mut RunInfo) {}

    /// A token cancelled when this layer loses its hold while the body runs, so that the job must
    /// stop (`ctx.lost()`). `None` when losing this layer's hold does not end the run.
    fn loss(&self) -> Option<CancellationToken> {
        None
    }

    /// When the hold lapses unless renewed, for a layer whose [`loss`](Self::loss) ends the run
    /// and whose store renews a lease: from then on the run counts as lost.
    fn deadline(&self) -> Option<crate::store::LeaseDeadline> {
        None
    }

    /// Where the run's checkpoints are saved and read (the slot layer).
    fn checkpoints(&self) -> Option<std::sync::Arc<dyn crate::context::Checkpoints>> {
        None
    }

    /// Releases the layer. `Some(accepted)` from a layer that records the outcome (`false`: refused,
    /// ownership was lost), `None` from one that records nothing. Called exactly once on the normal
    /// path; `Drop` is the fallback.
    async fn release(self: Box<Self>, outcome: &RunOutcome) -> Option<bool>;
}

/// One layer of the chain.
#[async_trait]
pub(crate) trait Guard: Send + Sync {
    /// The lowest level that includes this layer.
    fn level(&self) -> GuardLevel;

    /// Decides for every candidate in one go; one decision per candidate, in order.
    async fn acquire(&self, batch: &[&Candidate]) -> Vec<Decision>;
}
