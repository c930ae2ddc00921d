//! The runtime: one timer for all jobs, and one way to a job body. Every start of a body — the
//! scheduled tick, its second look, a retry after a store outage, recovery of a stale attempt, a
//! retry, a buffered slot, catch-up, a manual trigger, a backfill, a hand-over after shutdown —
//! walks the job's guard chain ([`chain::admit`]) and runs in [`run::execute`].

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) mod calendars;
pub(crate) mod catchup;
pub(crate) mod chain;
pub(crate) mod clock_sync;
pub(crate) mod control;
mod coverage;
mod deadline;
pub(crate) mod enqueue;
pub(crate) mod lead;
pub(crate) mod nominal;
pub(crate) mod recover;
pub(crate) mod registry;
mod removed;
pub(crate) mod retention;
pub(crate) mod run;
pub(crate) mod schedules;
mod tick;
pub(crate) mod timer;
pub(crate) mod window;
pub(crate) mod worker;

use crate::clock::SharedClock;
use crate::entry::JobEntry;
use crate::guard::Guard;
use crate::guard::slot::SlotGuard;
use crate::state::StateMap;

/// Everything the driver, the ticks and the runs share.
pub(crate) struct Runtime {
    pub(crate) jobs: Vec<Arc<JobEntry>>,
    /// Outside in: local, lock, slot (those the scheduler has). Each job walks those its
    /// [`Layers`](crate::entry::Layers) include.
    pub(crate) guards: Vec<Arc<dyn Guard>>,
    pub(crate) state: Arc<StateMap>,
    pub(crate) clock: SharedClock,
    pub(crate) owner: Arc<str>,
    /// Phase one of shutdown: claim nothing new.
    pub(crate) stop: CancellationToken,
    /// Phase two: tell running jobs to stop.
    pub(crate) cancel: CancellationToken,
    /// The work: timer, ticks, runs, recovery, the worker loop, catch-up and the store's watches.
    /// Shutdown closes it and waits for it (the grace period, then the stop).
    pub(crate) tracker: TaskTracker,
    /// The upkeep that outlives the work: heartbeats of the runs and the registry row. Shutdown
    /// ends it once `tracker` is drained, and waits for it (the row removed).
    pub(crate) upkeep: TaskTracker,
    pub(crate) grace: Duration,
    /// After `cancel`, how long a job body gets to return before it is dropped.
    pub(crate) kill_after: Duration,
    /// How long before a slot's instant its guard chain runs (the body still starts at the
    /// instant): `claim_ahead` as its base, longer in the timer for many slots due together when
    /// it is the default.
    pub(crate) lead: lead::Lead,
    /// The widest delay a replica adds before it offers a slot to the chain, so that the jobs of
    /// one tick spread over the replicas ([`SchedulerBuilder::load_spread`](crate::SchedulerBuilder::load_spread)).
    pub(crate) spread: Duration,
    pub(crate) running: AtomicUsize,
    pub(crate) abandoned: AtomicUsize,
    /// The slot layer: every write of a slot row goes through it.
    pub(crate) slots: Option<Arc<SlotGuard>>,
    /// `clock`, when it is measured against the store's ([`ClockSync`](crate::ClockSync)).
    pub(crate) synced: Option<Arc<clock_sync::SyncedClock>>,
    /// Woken when a run of a job with more due work ended (its `look_again` flag set): the
    /// recovery loop looks again at once.
    pub(crate) due_wake: tokio::sync::Notify,
    /// What this process does: enqueue, run, both or neither.
    pub(crate) role: crate::Role,
    /// Room for runs claimed from the store ([`SchedulerBuilder::max_concurrent_runs`](crate::SchedulerBuilder::max_concurrent_runs)).
    pub(crate) run_limit: Option<Arc<tokio::sync::Semaphore>>,
    /// How much room a full worker waits for before it claims again: half its limit, so that a
    /// queue of short runs is claimed in batches rather than one run per round trip.
    pub(crate) run_refill: u32,
    /// Operators' holiday overrides of the jobs' calendars, when the store keeps them and a job
    /// has a calendar.
    pub(crate) calendars: Option<Arc<calendars::Overrides>>,
}

impl Runtime {
    /// How old a slot may be and still be this replica's tick when it starts or replans, rather
    /// than catch-up's: 250 ms with a load spread (replicas start a few milliseconds apart; one that
    /// starts just after a slot offers it, and catch-up leaves it to the ticks), none without one.
    /// Shorter than any schedule's interval (1 s at least), so it never holds two slots of a job.
    pub(crate) fn settle(&self) -> chrono::Duration {
        if self.spread.is_zero() {
            chrono::Duration::zero()
        } else {
            chrono::Duration::milliseconds(250)
        }
    }
}

/// The reason recorded for a slot skipped because a run of its job was still going.
pub(crate) const OVERLAP_SKIPPED: &str = crate::store::rules::reason::SKIPPED_OVERLAP;

/// The reason recorded for a slot an external trigger asked for after its catch-up window closed.
pub(crate) const TOO_LATE: &str = "too late: older than the job's catch-up window";

/// The reason recorded for a slot of a paused job.
pub(crate) const PAUSED: &str = "paused";

/// The reason recorded for a slot whose claim met an unavailable store until its window closed.
pub(crate) const STORE_UNAVAILABLE: &str = "store unavailable at its tick";
