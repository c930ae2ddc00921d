//! Operating slotguard: one Rust API that the axum router, the `slotguard` CLI and an application's
//! own code all go through.
//!
//! [`Admin`] holds the policy (validation, schedules, missed-slot arithmetic, limits); the store holds
//! the mechanism ([`AdminStore`](slotguard::store::AdminStore)). Every change is audited with an actor and a
//! reason. Nothing here authenticates anyone: put the router behind the application's own middleware.
//!
//! ```
//! # async fn demo() -> Result<(), slotguard_admin::AdminError> {
//! use slotguard_admin::{Admin, ChangeRequest};
//! use slotguard::MemoryBackend;
//!
//! let admin = Admin::new(MemoryBackend::new());
//! let by = ChangeRequest::new("ops@example.com", "bank API was down at 02:00");
//! // Unknown jobs are an error that names the job, never a silent no-op.
//! assert!(admin.pause("daily-settlement", &by).await.is_err());
//! # Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod answers;
mod calendars;
mod checks;
mod command;
#[cfg(feature = "dashboard")]
pub mod dashboard;
mod error;
mod follow;
mod glance;
#[cfg(feature = "http")]
pub mod http;
mod missed;
mod page;
pub mod parse;
mod planned;
mod reads;
mod request;
mod retry_range;
mod schedule_missed;
mod schedules;
mod skip;
mod writes;

pub use answers::{BackfillOptions, BackfillReport, JobStatus, Retried, Triggered};
pub use calendars::{MAX_OVERRIDES, parse_holiday_date, parse_override_kind};
pub use command::{Command, Outcome};
pub use error::AdminError;
pub use follow::{MAX_WAIT, check_wait, finished};
pub use glance::{MissedCount, MissedCounts};
pub use missed::{CHUNK, JobMissed, MissedCursor, MissedPage, MissedQuery, MissedSlot};
pub use page::{check_page, parse_page};
pub use request::{ChangeRequest, MAX_ACTOR_BYTES, MAX_REASON_BYTES};
pub use retry_range::{MAX_RETRY_RUNS, RangeRetry};
pub use schedule_missed::ScheduleMissed;
pub use schedules::{PREVIEW_SLOTS, ScheduleFields, StoredSchedule};
pub use slotguard::operate::{
    DEFAULT_PAGE, MAX_PAGE, MAX_PER_SECOND, MIN_PER_SECOND, rfc3339, shown,
};

use std::sync::Arc;
use std::time::Duration;

use slotguard::store::Backend;
use slotguard::{Clock, Scheduler, SystemClock};

/// The most schedule slots [`Admin::missed`] and [`Admin::backfill`] look at in one range, and
/// [`Admin::missed_page`] in one page.
pub const MAX_SCAN_SLOTS: usize = 100_000;
/// The most runs one [`Admin::backfill`] creates; a larger range is refused, to be split.
pub const MAX_BACKFILL_SLOTS: usize = 1_000;

/// The admin API. Cheap to clone.
#[derive(Clone)]
pub struct Admin {
    store: Arc<dyn Backend>,
    clock: Arc<dyn Clock>,
    stale_after: Duration,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("store", &self.store.name())
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// The admin API over `store`.
    pub fn new(store: impl Backend) -> Self {
        Admin::shared(Arc::new(store))
    }

    /// The admin API over a store shared with a scheduler.
    pub fn shared(store: Arc<dyn Backend>) -> Self {
        Admin {
            store,
            clock: Arc::new(SystemClock),
            stale_after: Duration::from_secs(30),
        }
    }

    /// Reads "now" from `clock` (for tests in paused time).
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The staleness threshold written on manual and backfill runs: use the scheduler's
    /// [`stale_after`](slotguard::SchedulerBuilder::stale_after) (default 30 s).
    #[must_use]
    pub fn with_stale_after(mut self, stale_after: Duration) -> Self {
        self.stale_after = stale_after;
        self
    }

    /// The admin API over `scheduler`'s store, on its clock and staleness threshold; `None` when the
    /// scheduler has no backend. Call it before [`Scheduler::try_start`], which consumes the
    /// scheduler.
    pub fn of(scheduler: &Scheduler) -> Option<Self> {
        let mut admin =
            Admin::shared(scheduler.backend()?).with_stale_after(scheduler.stale_after());
        admin.clock = scheduler.clock();
        Some(admin)
    }
}
