//! The renewal of the held leases, driven by core's
//! [`renew_until_dropped`](slotguard::store::renewal::renew_until_dropped): every TTL/3, one
//! pipelined compare-and-`PEXPIRE` for every held lease; between renewals, each lease's deadline.

use std::time::Duration;

use redis::Value;
use slotguard::store::renewal::RenewedLeases;
use tokio::time::Instant;

use crate::Inner;

#[async_trait::async_trait]
impl RenewedLeases for Inner {
    fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    fn earliest_deadline(&self) -> Option<Instant> {
        self.held().values().map(|h| h.deadline.at()).min()
    }

    /// Renews every held lease in one round trip; reports lost the ones found gone or another's.
    async fn renew(&self) -> Result<(), slotguard::store::StoreError> {
        let snapshot: Vec<(i64, i64, String)> = self
            .held()
            .iter()
            .map(|(&key, h)| (key, h.token, h.value.clone()))
            .collect();
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
        let mut held = self.held();
        for ((key, token, _), answer) in snapshot.into_iter().zip(answers) {
            // Only the same lease: it may have been released or taken again meanwhile.
            let Some(lease) = held.get_mut(&key).filter(|h| h.token == token) else {
                continue;
            };
            if matches!(answer, Value::Int(1)) {
                lease.deadline.set(started + self.ttl);
            } else if let Some(lease) = held.remove(&key) {
                tracing::warn!(
                    event = "job_ownership_lost",
                    lock_key = key,
                    owner = %lease.owner,
                    token,
                    "Redis lease lapsed and was taken by another owner, or deleted"
                );
                lease.lost.cancel();
            }
        }
        Ok(())
    }

    fn expire_overdue(&self) {
        let now = Instant::now();
        self.held().retain(|&key, lease| {
            if lease.deadline.at() > now {
                return true;
            }
            tracing::warn!(
                event = "job_ownership_lost",
                lock_key = key,
                owner = %lease.owner,
                token = lease.token,
                "Redis lease could not be renewed before its TTL ran out"
            );
            lease.lost.cancel();
            false
        });
    }
}
