//! Lock leases for processes that reach PostgreSQL through a transaction-mode pooler (PgBouncer
//! `pool_mode = transaction`): a row per held key with a fencing token and an expiry by the
//! database clock, kept by renewal ([`PgLeaseLocks`]).
//!
//! A session advisory lock belongs to a server session, which a transaction pooler hands to
//! another client as soon as a transaction ends. A row does not. Every statement here runs in a
//! transaction of its own, unprepared (`statement_cache_capacity(0)`: the driver's statements are
//! unnamed), so that the pooler keeps it on one server connection and no statement name can land
//! on a session that lacks it.
//!
//! The promises are the `lock` level's with a lease's terms, as with Redis: one holder per key;
//! a lease renewed every third of its TTL; a holder that cannot renew it is told (`lost`) by its
//! TTL at the latest, measured from before the statement that last extended it; a key whose lease
//! expired (by the database clock) can be taken by another process, with a higher fencing token.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use slotguard::store::held::{HeldLeases, warn_expired, warn_taken};
use slotguard::store::renewal::{RenewedLeases, renew_until_dropped};
use slotguard::store::{LockLease, LockStore, StaleLock, StoreError};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};
use tokio::time::Instant;

use crate::error::redact_url;
use crate::sql::{Statements, sql};
use crate::{DEFAULT_SCHEMA, PgError, keys, micros};

/// What is kept of a lease this process holds.
struct Held {
    owner: String,
    token: i64,
}

struct Inner {
    pool: PgPool,
    statements: Statements,
    ttl: Duration,
    held: HeldLeases<Held>,
}

/// Cluster-wide locks as leases in the library's schema, for processes behind a transaction-mode
/// pooler; a [`LockStore`] beside the store of slot rows (`Store::with_locks`).
///
/// ```no_run
/// # async fn f() -> Result<(), slotguard_postgres::PgError> {
/// use std::time::Duration;
/// use slotguard_postgres::PgLeaseLocks;
///
/// // Through PgBouncer in transaction mode; the schema was migrated by a direct connection.
/// let locks = PgLeaseLocks::builder("postgres://app@pgbouncer:6432/app")
///     .lease_ttl(Duration::from_secs(10))
///     .connect()
///     .await?;
/// # let _ = locks; Ok(()) }
/// ```
#[derive(Clone)]
pub struct PgLeaseLocks {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PgLeaseLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLeaseLocks")
            .field("lease_ttl", &self.inner.ttl)
            .finish_non_exhaustive()
    }
}

/// How to connect a [`PgLeaseLocks`]; see [`PgLeaseLocks::builder`].
#[derive(Debug, Clone)]
pub struct PgLeaseLocksBuilder {
    url: String,
    schema: String,
    ttl: Duration,
    pool_size: u32,
    connect_timeout: Duration,
}

impl PgLeaseLocksBuilder {
    /// The library's schema (default `slotguard`), as the slot store's.
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// How long a lease lasts unless renewed (default 30 s, at least 300 ms): how long a key stays
    /// taken after its holder died.
    #[must_use]
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_millis(300));
        self
    }

    /// The most connections to the pooler (default 4).
    #[must_use]
    pub fn pool_size(mut self, connections: u32) -> Self {
        self.pool_size = connections.max(1);
        self
    }

    /// How long connecting and acquiring a connection may take (default 10 s).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Connects, checks that the schema has the lease table, and starts renewing.
    ///
    /// # Errors
    /// [`PgError::InvalidSchema`], [`PgError::InvalidUrl`], [`PgError::Connect`], and
    /// [`PgError::NotMigrated`] when the schema lacks the table (this store does not migrate).
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub async fn connect(self) -> Result<PgLeaseLocks, PgError> {
        let url = redact_url(&self.url);
        let quoted = crate::sql::quote_schema(&self.schema)
            .ok_or_else(|| PgError::InvalidSchema(self.schema.clone()))?;
        let options = PgConnectOptions::from_str(&self.url)
            .map_err(|source| PgError::InvalidUrl {
                url: url.clone(),
                source,
            })?
            .statement_cache_capacity(0);
        let app = options.get_application_name().unwrap_or("slotguard");
        let options = options
            .clone()
            .application_name(&format!("{app} (slotguard leases)"));
        let pool = PgPoolOptions::new()
            .max_connections(self.pool_size)
            .acquire_timeout(self.connect_timeout)
            .connect_lazy_with(options);
        let connect_err = |source| PgError::Connect {
            url: url.clone(),
            source,
        };
        let mut tx = pool.begin().await.map_err(connect_err)?;
        let table = format!("{quoted}.lease_locks");
        let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .persistent(false)
            .bind(&table)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        if !exists {
            return Err(PgError::NotMigrated {
                url,
                schema: self.schema,
                table: "lease_locks",
            });
        }
        let inner = Arc::new(Inner {
            pool,
            statements: Statements::new(&quoted, None),
            ttl: self.ttl,
            held: HeldLeases::default(),
        });
        tokio::spawn(renew_until_dropped(Arc::downgrade(&inner), "postgres"));
        Ok(PgLeaseLocks { inner })
    }
}

impl PgLeaseLocks {
    /// A builder for `url` (a pooler's, or the database's), with the defaults.
    pub fn builder(url: &str) -> PgLeaseLocksBuilder {
        PgLeaseLocksBuilder {
            url: url.to_owned(),
            schema: DEFAULT_SCHEMA.to_owned(),
            ttl: Duration::from_secs(30),
            pool_size: 4,
            connect_timeout: Duration::from_secs(10),
        }
    }

    /// The keys this process holds a lease on.
    pub fn held_keys(&self) -> Vec<i64> {
        let mut keys: Vec<i64> = self.inner.held.keys();
        keys.sort_unstable();
        keys
    }
}

impl Inner {
    /// `TAKE` in a transaction of its own: the keys taken, with their tokens.
    async fn take(&self, owner: &str, keys: &[i64]) -> Result<Vec<(i64, i64)>, PgError> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(sql(&self.statements.lease_take))
            .persistent(false)
            .bind(keys)
            .bind(owner)
            .bind(micros(self.ttl))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| Ok((r.try_get("lock_key")?, r.try_get("token")?)))
            .collect()
    }

    /// Runs `statement` on `tokens` (`RELEASE`; `RENEW` with the TTL as well) in a transaction of
    /// its own; the tokens it answers.
    async fn on_tokens(
        &self,
        statement: &Arc<str>,
        tokens: &[i64],
        with_ttl: bool,
    ) -> Result<Vec<i64>, PgError> {
        let mut tx = self.pool.begin().await?;
        let query = sqlx::query(sql(statement)).persistent(false).bind(tokens);
        let query = match with_ttl {
            true => query.bind(micros(self.ttl)),
            false => query,
        };
        let rows = query.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| r.try_get("token").map_err(PgError::from))
            .collect()
    }
}

#[async_trait]
impl LockStore for PgLeaseLocks {
    async fn try_lock(
        &self,
        owner: &str,
        keys: &[i64],
    ) -> Result<Vec<Option<LockLease>>, StoreError> {
        let started = Instant::now();
        // Dropped after the commit, the leases taken are nobody's here: they expire by their TTL.
        let taken: HashMap<i64, i64> = self.inner.take(owner, keys).await?.into_iter().collect();
        let until = started + self.inner.ttl;
        Ok(keys
            .iter()
            .map(|&key| {
                let token = *taken.get(&key)?;
                let owner = owner.to_owned();
                let (lost, deadline) = self.inner.held.hold(key, Held { owner, token }, until);
                Some(LockLease {
                    key,
                    lost,
                    token: Some(token),
                    deadline: Some(deadline),
                })
            })
            .collect())
    }

    async fn unlock(&self, owner: &str, keys: &[i64]) -> Result<(), StoreError> {
        let tokens: Vec<i64> = keys
            .iter()
            .filter_map(|&k| self.inner.held.release(k, |h| h.owner == owner))
            .map(|h| h.token)
            .collect();
        if tokens.is_empty() {
            return Ok(());
        }
        let release = &self.inner.statements.lease_release;
        // A release that fails leaves the lease to expire by its TTL.
        self.inner.on_tokens(release, &tokens, false).await?;
        Ok(())
    }

    async fn break_stale_locks(
        &self,
        _owner: &str,
        _locks: &[StaleLock],
    ) -> Result<Vec<i64>, StoreError> {
        // A lease of a frozen or dead holder expires on its own.
        Ok(Vec::new())
    }

    async fn register_lock_keys(
        &self,
        namespace: &str,
        keys: &[(i64, String)],
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        keys::register(&inner.pool, &inner.statements, namespace, keys, false)
            .await
            .map_err(StoreError::from)
    }
}

#[async_trait]
impl RenewedLeases for Inner {
    fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    fn earliest_deadline(&self) -> Option<Instant> {
        self.held.earliest_deadline()
    }

    /// Renews every held lease in one statement; reports lost the ones found gone or another's.
    async fn renew(&self) -> Result<(), StoreError> {
        let snapshot: Vec<(i64, i64)> = self.held.snapshot(|k, h| (k, h.token));
        if snapshot.is_empty() {
            return Ok(());
        }
        let tokens: Vec<i64> = snapshot.iter().map(|(_, t)| *t).collect();
        let started = Instant::now();
        let renewed = (self.on_tokens(&self.statements.lease_renew, &tokens, true)).await?;
        for (key, token) in snapshot {
            // Only the same lease: it may have been released or taken again meanwhile.
            let until = renewed.contains(&token).then_some(started + self.ttl);
            self.held.settle(
                key,
                |h| h.token == token,
                until,
                |key, lease| warn_taken("PostgreSQL", key, &lease.owner, token),
            );
        }
        Ok(())
    }

    fn expire_overdue(&self) {
        self.held.expire_overdue(|key, lease| {
            warn_expired("PostgreSQL", key, &lease.owner, lease.token)
        });
    }
}
