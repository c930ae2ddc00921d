//! The leases a process holds, each with the token that tells its holder it lost it and the
//! deadline it is trusted until: the bookkeeping shared by the slot layer's heartbeats, the
//! PostgreSQL lease locks and the Redis leases.
//!
//! A store that renews leases keeps them here, renews a snapshot, and then
//! [`extends`](HeldLeases::extend) those the store confirmed and [`loses`](HeldLeases::lose) those
//! it refused; [`expire_overdue`](HeldLeases::expire_overdue) reports those whose deadline passed
//! unrenewed. Each loss is reported once: the lease leaves the map as its token is cancelled.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::LeaseDeadline;

/// One held lease: what its store keeps of it (`value`), its loss token and its deadline.
#[derive(Debug)]
pub struct HeldLease<V> {
    /// What the store keeps of the lease: its owner, its fencing token, its value.
    pub value: V,
    /// Cancelled when the lease is lost.
    pub lost: CancellationToken,
    /// Until when it is trusted without another renewal; shared with the run that holds it.
    pub deadline: LeaseDeadline,
}

/// The leases this process holds, by key.
#[derive(Debug)]
pub struct HeldLeases<V> {
    held: Mutex<HashMap<i64, HeldLease<V>>>,
}

impl<V> Default for HeldLeases<V> {
    fn default() -> Self {
        HeldLeases {
            held: Mutex::default(),
        }
    }
}

impl<V> HeldLeases<V> {
    fn map(&self) -> MutexGuard<'_, HashMap<i64, HeldLease<V>>> {
        // Every change of the map is whole before the guard is dropped.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds `key` until `deadline`; answers its loss token and its deadline. A lease already held
    /// under `key` is replaced, and its holder told it lost it.
    pub fn hold(
        &self,
        key: i64,
        value: V,
        deadline: Instant,
    ) -> (CancellationToken, LeaseDeadline) {
        let lease = HeldLease {
            value,
            lost: CancellationToken::new(),
            deadline: LeaseDeadline::new(deadline),
        };
        let answer = (lease.lost.clone(), lease.deadline.clone());
        if let Some(previous) = self.map().insert(key, lease) {
            previous.lost.cancel();
        }
        answer
    }

    /// Stops holding `key` when `mine` says the lease is the caller's; answers what it kept.
    pub fn release(&self, key: i64, mine: impl FnOnce(&V) -> bool) -> Option<V> {
        let mut map = self.map();
        if !map.get(&key).is_some_and(|lease| mine(&lease.value)) {
            return None;
        }
        map.remove(&key).map(|lease| lease.value)
    }

    /// How many leases are held.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether no lease is held.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }

    /// The held keys, in no order.
    pub fn keys(&self) -> Vec<i64> {
        self.map().keys().copied().collect()
    }

    /// What `f` makes of each held lease: the snapshot a renewal sends.
    pub fn snapshot<T>(&self, f: impl Fn(i64, &V) -> T) -> Vec<T> {
        self.map()
            .iter()
            .map(|(&key, l)| f(key, &l.value))
            .collect()
    }

    /// The earliest deadline of the leases held; `None` when none is.
    pub fn earliest_deadline(&self) -> Option<Instant> {
        self.map().values().map(|l| l.deadline.at()).min()
    }

    /// Trusts `key` until `until` (never less than before), when `same` says it is still the
    /// lease that was renewed: it may have been released or taken again meanwhile.
    pub fn extend(&self, key: i64, same: impl FnOnce(&V) -> bool, until: Instant) {
        if let Some(lease) = self.map().get(&key).filter(|l| same(&l.value)) {
            lease.deadline.set(lease.deadline.at().max(until));
        }
    }

    /// Reports `key` lost (its store refused it), when `same` says it is still the lease that was
    /// renewed: `log` says why, then its holder is told.
    pub fn lose(&self, key: i64, same: impl FnOnce(&V) -> bool, log: impl FnOnce(i64, &V)) {
        let mut map = self.map();
        if !map.get(&key).is_some_and(|l| same(&l.value)) {
            return;
        }
        if let Some(lease) = map.remove(&key) {
            log(key, &lease.value);
            lease.lost.cancel();
        }
    }

    /// What a renewal of `key` found, when `same` says it is still the lease that was renewed:
    /// renewed (`Some`), trusted until then; refused (`None`), reported lost with `log`.
    pub fn settle(
        &self,
        key: i64,
        same: impl FnOnce(&V) -> bool,
        renewed_until: Option<Instant>,
        log: impl FnOnce(i64, &V),
    ) {
        match renewed_until {
            Some(until) => self.extend(key, same, until),
            None => self.lose(key, same, log),
        }
    }

    /// Reports lost every lease whose deadline has passed unrenewed: `log` says which.
    pub fn expire_overdue(&self, mut log: impl FnMut(i64, &V)) {
        self.map().retain(|&key, lease| {
            if !lease.deadline.has_passed() {
                return true;
            }
            log(key, &lease.value);
            lease.lost.cancel();
            false
        });
    }
}

/// Logs a lock lease that `store` (`"Redis"`, `"PostgreSQL"`, `"SQLite"`) found gone or another's
/// at a renewal.
pub fn warn_taken(store: &str, lock_key: i64, owner: &str, token: i64) {
    tracing::warn!(
        event = "job_ownership_lost",
        lock_key,
        owner,
        token,
        "{store} lease lapsed and was taken by another owner, or deleted"
    );
}

/// Logs a lock lease of `store` that could not be renewed before its TTL ran out.
pub fn warn_expired(store: &str, lock_key: i64, owner: &str, token: i64) {
    tracing::warn!(
        event = "job_ownership_lost",
        lock_key,
        owner,
        token,
        "{store} lease could not be renewed before its TTL ran out"
    );
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_lease_is_lost_once_at_its_deadline_unless_extended() {
        let leases = HeldLeases::default();
        let start = Instant::now();
        let (a, _) = leases.hold(1, 10, start + Duration::from_secs(3));
        let (b, b_deadline) = leases.hold(2, 20, start + Duration::from_secs(3));
        leases.extend(2, |&v| v == 20, start + Duration::from_secs(6));
        // An extension never shortens, and one for another lease under the key does nothing.
        leases.extend(2, |&v| v == 20, start + Duration::from_secs(1));
        leases.extend(1, |&v| v == 99, start + Duration::from_secs(6));
        tokio::time::advance(Duration::from_secs(3)).await;
        let mut logged = Vec::new();
        leases.expire_overdue(|key, _| logged.push(key));
        leases.expire_overdue(|key, _| logged.push(key));
        assert_eq!(logged, [1], "reported once");
        assert!(a.is_cancelled() && !b.is_cancelled());
        assert_eq!(b_deadline.at(), start + Duration::from_secs(6));
        assert_eq!(leases.keys(), [2]);
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_same_lease_is_lost_or_released() {
        let leases = HeldLeases::default();
        let until = Instant::now() + Duration::from_secs(3);
        let (first, _) = leases.hold(1, "first", until);
        let (second, _) = leases.hold(1, "second", until);
        assert!(first.is_cancelled(), "replaced");
        leases.lose(1, |v| *v == "first", |_, _| panic!("not that lease"));
        assert_eq!(leases.release(1, |v| *v == "first"), None);
        assert!(!second.is_cancelled());
        let mut logged = None;
        leases.lose(1, |v| *v == "second", |key, v| logged = Some((key, *v)));
        assert_eq!(logged, Some((1, "second")));
        assert!(second.is_cancelled() && leases.is_empty());
    }
}
