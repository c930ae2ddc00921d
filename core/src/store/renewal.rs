//! The renewal of lock leases kept by a background task (Redis, PostgreSQL lease rows): every
//! third of the TTL one renewal of every held lease, and between renewals each lease's deadline,
//! so that a lease that could not be renewed is reported lost when its TTL runs out, not at the
//! next renewal.

use std::sync::Weak;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::StoreError;

/// A lock store whose locks are leases it renews itself, as [`renew_until_dropped`] drives it.
#[async_trait]
pub trait RenewedLeases: Send + Sync + 'static {
    /// How often every lease is renewed (a third of the TTL).
    fn renew_every(&self) -> Duration;

    /// The earliest deadline of the leases held; `None` when none is.
    fn earliest_deadline(&self) -> Option<Instant>;

    /// Renews every held lease at once; reports lost (cancels) those found gone or another's.
    async fn renew(&self) -> Result<(), StoreError>;

    /// Reports lost every lease past its deadline: not renewed within its TTL.
    fn expire_overdue(&self);
}

/// Renews `leases` until the last strong reference to them is dropped. `store` names the store in
/// the log of a failed renewal.
///
/// The renewals and the deadline watch go side by side: a renewal that hangs never delays telling a
/// holder its lease ran out, and is never dropped in flight (a dropped query can cost the store
/// its connection; its answer, however late, is still the store's).
pub async fn renew_until_dropped<T: RenewedLeases>(leases: Weak<T>, store: &'static str) {
    let Some(every) = leases.upgrade().map(|l| l.renew_every()) else {
        return;
    };
    tokio::join!(
        renew_each(leases.clone(), every, store),
        expire_at_deadlines(leases, every)
    );
}

/// One renewal of every held lease each `every`, counted from its sending, so that a slow answer
/// does not stretch the cadence.
async fn renew_each<T: RenewedLeases>(leases: Weak<T>, every: Duration, store: &'static str) {
    let mut next = Instant::now() + every;
    loop {
        tokio::time::sleep_until(next).await;
        let Some(leases) = leases.upgrade() else {
            return;
        };
        next = Instant::now() + every;
        if let Err(e) = leases.renew().await {
            tracing::warn!(error = %e, store, "lease renewal failed");
        }
    }
}

/// Reports each lease lost at its deadline. It looks at least every `every`: a lease taken
/// meanwhile runs out a TTL (three of them) after its taking.
async fn expire_at_deadlines<T: RenewedLeases>(leases: Weak<T>, every: Duration) {
    loop {
        let look = Instant::now() + every;
        let wake = match leases.upgrade() {
            Some(l) => l.earliest_deadline().map_or(look, |d| d.min(look)),
            None => return,
        };
        tokio::time::sleep_until(wake).await;
        match leases.upgrade() {
            Some(l) => l.expire_overdue(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::store::held::HeldLeases;

    /// One lease whose every renewal takes `hang` and then extends it by `ttl` from its sending.
    struct Slow {
        held: HeldLeases<()>,
        ttl: Duration,
        hang: Duration,
        answered: AtomicUsize,
    }

    #[async_trait]
    impl RenewedLeases for Slow {
        fn renew_every(&self) -> Duration {
            self.ttl / 3
        }

        fn earliest_deadline(&self) -> Option<Instant> {
            self.held.earliest_deadline()
        }

        async fn renew(&self) -> Result<(), StoreError> {
            let sent = Instant::now();
            tokio::time::sleep(self.hang).await;
            self.answered.fetch_add(1, Ordering::SeqCst);
            self.held.extend(1, |()| true, sent + self.ttl);
            Ok(())
        }

        fn expire_overdue(&self) {
            self.held.expire_overdue(|_, ()| {});
        }
    }

    /// A lease of `ttl` renewed by renewals that each take `hang`: its loss token, and the store.
    fn slow(ttl: Duration, hang: Duration) -> (Arc<Slow>, CancellationToken) {
        let slow = Arc::new(Slow {
            held: HeldLeases::default(),
            ttl,
            hang,
            answered: AtomicUsize::new(0),
        });
        let (lost, _) = slow.held.hold(1, (), Instant::now() + ttl);
        tokio::spawn(renew_until_dropped(Arc::downgrade(&slow), "test"));
        (slow, lost)
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_renewal_is_told_at_the_deadline_and_still_answers() {
        let ttl = Duration::from_secs(3);
        let (slow, lost) = slow(ttl, Duration::from_secs(10));
        // The first renewal goes out at 1 s and hangs until 11 s; the lease runs out at 3 s.
        tokio::time::sleep(Duration::from_millis(3_001)).await;
        assert!(lost.is_cancelled(), "not told at the deadline");
        assert_eq!(slow.answered.load(Ordering::SeqCst), 0);
        // The renewal was not dropped: its answer comes.
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert_eq!(slow.answered.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_in_time_keep_the_lease() {
        let ttl = Duration::from_secs(3);
        let (slow, lost) = slow(ttl, Duration::from_millis(200));
        tokio::time::sleep(ttl * 4).await;
        assert!(!lost.is_cancelled(), "a renewed lease was reported lost");
        assert!(slow.answered.load(Ordering::SeqCst) >= 10);
        drop(slow);
    }
}
