//! A lease's deadline, shared by the lock store that renews the lease and the run that holds it.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

/// When a lease lapses unless it is renewed first. The lock store moves it forward at each
/// renewal; the run holding the lease reads it, so that
/// [`JobContext::is_lost`](crate::JobContext::is_lost) is true from the deadline on, even in a
/// process that was frozen past it and whose renewal task has not run yet to say so.
#[derive(Debug, Clone)]
pub struct LeaseDeadline(Arc<Mutex<Instant>>);

impl LeaseDeadline {
    /// A deadline at `at`.
    pub fn new(at: Instant) -> Self {
        LeaseDeadline(Arc::new(Mutex::new(at)))
    }

    /// Moves the deadline to `at` (a renewal), for every holder of a clone.
    pub fn set(&self, at: Instant) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }

    /// The deadline.
    pub fn at(&self) -> Instant {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the deadline has come: the lease may be another's by now.
    pub fn has_passed(&self) -> bool {
        Instant::now() >= self.at()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn clones_share_the_deadline_and_see_it_pass() {
        let deadline = LeaseDeadline::new(Instant::now() + Duration::from_secs(3));
        let held = deadline.clone();
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!held.has_passed());
        deadline.set(Instant::now() + Duration::from_secs(3));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!held.has_passed(), "renewed");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(held.has_passed());
    }
}
