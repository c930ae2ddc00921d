//! Wall time, injectable so tests can run in paused tokio time.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// A source of wall time. Slots are computed from it; sleeping always uses the tokio timer.
///
/// Lease and heartbeat expiry are never judged by this clock: the store judges them by its own clock
/// (`now()` in SQL), so a replica with a skewed clock cannot steal or keep a lease.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current wall time.
    fn now(&self) -> DateTime<Utc>;
}

/// The system's wall clock (`Utc::now()`), the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A wall clock that starts at a chosen instant and advances with the tokio clock, so that under
/// `tokio::time::pause()` wall time moves exactly as far as paused time does.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use chrono::{TimeZone, Utc};
/// use slotguard::{Clock, TokioClock};
///
/// let clock = TokioClock::starting_at(Utc.with_ymd_and_hms(2026, 3, 8, 6, 59, 0).unwrap());
/// tokio::time::sleep(std::time::Duration::from_secs(60)).await;
/// assert_eq!(clock.now(), Utc.with_ymd_and_hms(2026, 3, 8, 7, 0, 0).unwrap());
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    wall: DateTime<Utc>,
    at: tokio::time::Instant,
}

impl TokioClock {
    /// A clock that reads `wall` now.
    pub fn starting_at(wall: DateTime<Utc>) -> Self {
        TokioClock {
            wall,
            at: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> DateTime<Utc> {
        let elapsed = tokio::time::Instant::now().duration_since(self.at);
        let elapsed = chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::MAX);
        self.wall
            .checked_add_signed(elapsed)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }
}

pub(crate) type SharedClock = Arc<dyn Clock>;

/// Whether the scheduler measures its clock against the store's clock, and follows the store's when
/// the two disagree. Set with [`SchedulerBuilder::clock_sync`](crate::SchedulerBuilder::clock_sync).
///
/// Every replica computes slots from its own clock. A replica whose clock is off by more than the
/// interval between two slots works on a different slot than the others at the same moment: it runs
/// slots early (or late) by its skew, and at the `slot` level with overlap `skip` its hold on the
/// job's lock makes the others' slots go unrecorded. The store's clock is the one every replica can
/// read, and the one leases are already judged by, so it is the cluster's reference.
///
/// The skew (this clock minus the store's, measured over a round trip and corrected by half of it)
/// is exported as the gauge `scheduler_clock_skew_seconds` in every mode but `Off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockSync {
    /// Measure, and compute slots from the store's clock while this clock is off by more than
    /// `tolerance` (back to this clock once the skew is under half of it). Between measurements the
    /// store's time is carried forward by the monotonic clock, so a jump of this clock is noticed at
    /// its next reading, not at the next measurement. The default with the system clock, with a
    /// tolerance of 100 ms.
    Follow {
        /// How far this clock may be from the store's before slots follow the store's.
        tolerance: Duration,
    },
    /// Measure and export the skew, log it when it is over 1 s, but compute slots from this clock.
    /// The default with an injected [`clock`](crate::SchedulerBuilder::clock), which tests use to be
    /// the truth.
    Observe,
    /// Neither measure nor follow.
    Off,
}

impl ClockSync {
    /// [`Follow`](Self::Follow) with the default tolerance of 100 ms.
    pub const FOLLOW: ClockSync = ClockSync::Follow {
        tolerance: Duration::from_millis(100),
    };
}
