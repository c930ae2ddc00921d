//! The renewal task: every TTL/3, one pipelined compare-and-`PEXPIRE` for every held lease; and,
//! between renewals, the deadline of each lease, so that a lease Redis could not renew is reported
//! lost when its TTL runs out, not at the next renewal.

use std::sync::{Arc, Weak};

use redis::Value;
use tokio::time::Instant;

use crate::Inner;

/// Renews `inner`'s leases until the last `RedisLocks` is dropped.
pub(crate) async fn renew_loop(inner: Weak<Inner>) {
    let Some(every) = inner.upgrade().map(|i| i.ttl / 3) else {
        return;
    };
    let mut next = Instant::now() + every;
    loop {
        let wake = match inner.upgrade() {
            Some(i) => i.earliest_deadline().map_or(next, |d| d.min(next)),
            None => return,
        };
        tokio::time::sleep_until(wake).await;
        let Some(inner) = inner.upgrade() else { return };
        if Instant::now() >= next {
            next = Instant::now() + every;
            let overdue = inner.earliest_deadline().unwrap_or(next);
            // A renewal that hangs past a lease's deadline must not delay telling its holder.
            tokio::select! {
                result = inner.renew() => {
                    if let Err(e) = result {
                        tracing::warn!(error = %e, "Redis lease renewal failed");
                    }
                }
                () = tokio::time::sleep_until(overdue) => {}
            }
        }
        inner.expire_overdue();
    }
}

impl Inner {
    fn earliest_deadline(&self) -> Option<Instant> {
        self.held().values().map(|h| h.deadline.at()).min()
    }

    /// Renews every held lease in one round trip; reports lost the ones found gone or another's.
    pub(crate) async fn renew(self: &Arc<Self>) -> Result<(), slotguard::store::StoreError> {
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

    /// Reports lost every lease past its deadline: not renewed within its TTL, so another may hold it.
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
