//! Wall time, injectable so tests can run in paused tokio time.

use std::fmt;
use std::sync::Arc;

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
