//! Lease locks: a row per held key with an expiry, taken with a fencing token and kept by renewal.
//!
//! Unlike a PostgreSQL session lock, nothing releases a lease when its holder dies except time, and
//! nothing keeps it while its holder lives except renewal. See the crate docs.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use slotguard::store::held::{warn_expired, warn_taken};
use slotguard::store::{LockLease, LockStore, StaleLock, StoreError};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::error::SqliteError;
use crate::values::ADVANCE_TOKEN;
use crate::{Shared, SqliteBackend, duration_ms, json_array, now_ms};

/// Takes a key that is free or whose lease has expired (by the host clock), with the next fencing
/// token. Nothing when another lease, or this owner's own, is still live.
const TAKE: &str = "
INSERT INTO slotguard_locks (lock_key, owner, token, acquired_at, renewed_at, expires_at)
VALUES (?1, ?2, (SELECT last_token + 1 FROM slotguard_fencing WHERE id = 1), ?3, ?3, ?4)
ON CONFLICT (lock_key) DO UPDATE SET
    owner = excluded.owner,
    token = excluded.token,
    acquired_at = excluded.acquired_at,
    renewed_at = excluded.renewed_at,
    expires_at = excluded.expires_at
WHERE slotguard_locks.expires_at <= excluded.acquired_at
RETURNING token";

const RELEASE: &str = "
DELETE FROM slotguard_locks
WHERE owner = ?1 AND lock_key IN (SELECT value FROM json_each(?2))";

const RELEASE_TOKENS: &str =
    "DELETE FROM slotguard_locks WHERE token IN (SELECT value FROM json_each(?1))";

/// Renews every lease of this backend in one statement. A lease is identified by its token, which
/// changes whenever another owner takes the key, so a lapsed-and-taken lease is not renewed.
const RENEW: &str = concat!(
    "UPDATE slotguard_locks SET renewed_at = ",
    now_ms!(),
    ", expires_at = ",
    now_ms!(),
    " + ?2 WHERE token IN (SELECT value FROM json_each(?1)) RETURNING token"
);

/// What is kept of a lease this backend holds. Its deadline (in the backend's `HeldLeases`) is
/// when it expires at the latest, measured locally from before the statement that last set its
/// expiry: past it, with no successful renewal, it cannot be vouched for.
pub(crate) struct Held {
    owner: String,
    token: i64,
}

impl Shared {
    async fn try_lock(
        &self,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, SqliteError> {
        let q = |e| self.query_error(e);
        let ttl = duration_ms(self.lease_ttl);
        let mut w = self.write().await?;
        let started = Instant::now();
        let now = self.now(&mut w).await?;
        let mut taken: Vec<Option<i64>> = Vec::with_capacity(keys.len());
        for &key in keys {
            let token: Option<i64> = sqlx::query_scalar(TAKE)
                .bind(key)
                .bind(owner)
                .bind(now)
                .bind(now.saturating_add(ttl))
                .fetch_optional(&mut *w.tx)
                .await
                .map_err(q)?;
            if let Some(token) = token {
                sqlx::query(ADVANCE_TOKEN)
                    .bind(token)
                    .execute(&mut *w.tx)
                    .await
                    .map_err(q)?;
            }
            taken.push(token);
        }
        w.tx.commit().await.map_err(q)?;
        // Registered while still holding the writer slot, so a renewal or an unlock never sees the
        // row without its registration.
        let until = started + self.lease_ttl;
        let answers = keys
            .iter()
            .zip(taken)
            .map(|(&key, token)| {
                let token = token?;
                let owner = owner.to_owned();
                // An earlier lease of this backend on the key had lapsed and was just taken over:
                // its holder is told it lost it.
                let (lost, deadline) = self.leases.hold(key, Held { owner, token }, until);
                Some(LockLease {
                    key,
                    lost,
                    token: Some(token),
                    deadline: Some(deadline),
                })
            })
            .collect();
        drop(w.writer);
        Ok(answers)
    }

    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        sqlx::query(RELEASE)
            .bind(owner)
            .bind(json_array(keys.iter().copied()))
            .execute(&mut *w.tx)
            .await
            .map_err(q)?;
        w.tx.commit().await.map_err(q)?;
        for &key in keys {
            self.leases.release(key, |held| held.owner == owner);
        }
        Ok(())
    }

    /// Renews every held lease; cancels the `lost` token of each one found gone or taken.
    async fn renew(&self) -> Result<(), SqliteError> {
        let q = |e| self.query_error(e);
        if self.leases.is_empty() {
            return Ok(());
        }
        let mut w = self.write().await?;
        // Under the writer slot: no try_lock or unlock can change the set while it is renewed.
        let held: Vec<(i64, i64)> = self.leases.snapshot(|key, held| (key, held.token));
        let started = Instant::now();
        let renewed: Result<Vec<i64>, sqlx::Error> = match sqlx::query_scalar(RENEW)
            .bind(json_array(held.iter().map(|&(_, token)| token)))
            .bind(duration_ms(self.lease_ttl))
            .fetch_all(&mut *w.tx)
            .await
        {
            Ok(renewed) => w.tx.commit().await.map(|()| renewed),
            Err(e) => Err(e),
        };
        match renewed {
            Ok(renewed) => {
                for (key, token) in held {
                    let until = renewed.contains(&token).then_some(started + self.lease_ttl);
                    self.leases.settle(
                        key,
                        |h| h.token == token,
                        until,
                        |key, lease| warn_taken("SQLite", key, &lease.owner, token),
                    );
                }
                Ok(())
            }
            Err(e) => {
                // Not renewed, and perhaps not for a while: a lease past its TTL may have been taken.
                self.leases.expire_overdue(|key, lease| {
                    warn_expired("SQLite", key, &lease.owner, lease.token)
                });
                Err(q(e))
            }
        }
    }

    /// Deletes every lease this backend holds and forgets them.
    pub(crate) async fn release_all(&self) -> Result<(), SqliteError> {
        let q = |e| self.query_error(e);
        let mut w = self.write().await?;
        let held: Vec<(i64, i64)> = self.leases.snapshot(|key, held| (key, held.token));
        let tokens: Vec<i64> = held.iter().map(|&(_, token)| token).collect();
        if tokens.is_empty() {
            return Ok(());
        }
        sqlx::query(RELEASE_TOKENS)
            .bind(json_array(tokens))
            .execute(&mut *w.tx)
            .await
            .map_err(q)?;
        w.tx.commit().await.map_err(q)?;
        for (key, token) in held {
            self.leases.release(key, |h| h.token == token);
        }
        Ok(())
    }
}

/// Renews this backend's leases every `every` until `stop`; idle (no statement) while none is held.
pub(crate) async fn renew_loop(shared: Arc<Shared>, every: Duration, stop: CancellationToken) {
    let mut ticks = tokio::time::interval_at(Instant::now() + every, every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if let Err(e) = shared.renew().await {
            tracing::warn!(path = %shared.path.display(), error = %e, "lease renewal failed");
        }
    }
}

/// Lease locks, renewed in the background while held.
///
/// # Cancel safety
///
/// Dropping a `try_lock` future before it completes rolls its transaction back, or, if it had
/// committed, leaves rows that lapse after the lease TTL.
#[async_trait]
impl LockStore for SqliteBackend {
    async fn try_lock(
        &self,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.shared().try_lock(owner, keys).await?)
    }

    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        Ok(self.shared().unlock(owner, keys).await?)
    }

    /// Frees nothing: a lease lapses by itself after its TTL once its holder stops renewing it.
    async fn break_stale_locks(
        &self,
        _owner: &str,
        _locks: &[StaleLock],
    ) -> Result<Vec<i64>, StoreError> {
        Ok(Vec::new())
    }

    /// Records nothing: a SQLite file has no table of lock keys (it serves the processes of one
    /// host, usually one binary's).
    async fn register_lock_keys(
        &self,
        _namespace: &str,
        _keys: &[(i64, String)],
    ) -> Result<(), StoreError> {
        Ok(())
    }
}
