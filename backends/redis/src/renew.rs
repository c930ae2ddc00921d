//! The renewal of the held leases, driven by core's
//! [`renew_until_dropped`](slotguard::store::renewal::renew_until_dropped): every TTL/3, one
//! pipelined compare-and-`PEXPIRE` for every held lease; between renewals, each lease's deadline.

use std::time::Duration;

use redis::Value;
use slotguard::store::held::{warn_expired, warn_taken};
use slotguard::store::renewal::RenewedLeases;
use tokio::time::Instant;

use crate::Inner;

#[async_trait::async_trait]
impl RenewedLeases for Inner {
    fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    fn earliest_deadline(&self) -> Option<Instant> {
        self.held.earliest_deadline()
    }

    /// Renews every held lease in one round trip; reports lost the ones found gone or another's.
    async fn renew(&self) -> Result<(), slotguard::store::StoreError> {
        let snapshot: Vec<(i64, i64, String)> =
            self.held.snapshot(|key, h| (key, h.token, h.value.clone()));
        if snapshot.is_empty() {
            return Ok(());
        }
        let ttl = self.ttl.as_millis().to_string();
        let calls: Vec<_> = snapshot
            .iter()
            .map(|(key, _, value)| (vec![self.keys(*key).0], vec![value.clone(), ttl.clone()]))
            .collect();
        let started = Instant::now();
        let answers = self.eval_many(&self.scripts.renew, &calls).await?;
        for ((key, token, _), answer) in snapshot.into_iter().zip(answers) {
            // Only the same lease: it may have been released or taken again meanwhile.
            let renewed = matches!(answer, Value::Int(1)).then_some(started + self.ttl);
            self.held.settle(
                key,
                |h| h.token == token,
                renewed,
                |key, lease| warn_taken("Redis", key, &lease.owner, token),
            );
        }
        Ok(())
    }

    fn expire_overdue(&self) {
        self.held
            .expire_overdue(|key, lease| warn_expired("Redis", key, &lease.owner, lease.token));
    }
}
