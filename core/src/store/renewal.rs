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
pub async fn renew_until_dropped<T: RenewedLeases>(leases: Weak<T>, store: &'static str) {
    let Some(every) = leases.upgrade().map(|l| l.renew_every()) else {
        return;
    };
    let mut next = Instant::now() + every;
    loop {
        let wake = match leases.upgrade() {
            Some(l) => l.earliest_deadline().map_or(next, |d| d.min(next)),
            None => return,
        };
        tokio::time::sleep_until(wake).await;
        let Some(leases) = leases.upgrade() else {
            return;
        };
        if Instant::now() >= next {
            next = Instant::now() + every;
            let overdue = leases.earliest_deadline().unwrap_or(next);
            // A renewal that hangs past a lease's deadline must not delay telling its holder.
            tokio::select! {
                result = leases.renew() => {
                    if let Err(e) = result {
                        tracing::warn!(error = %e, store, "lease renewal failed");
                    }
                }
                () = tokio::time::sleep_until(overdue) => {}
            }
        }
        leases.expire_overdue();
    }
}
