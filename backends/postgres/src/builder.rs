//! [`PgBackendBuilder`]: the backend's options, and the connect that validates the schema name,
//! migrates the schema, opens the pool and starts the lock connection's liveness check.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};
use tokio_util::sync::CancellationToken;

use crate::error::{PgError, redact_url};
use crate::locks::{self, LockConfig, Locks};
use crate::partitions::{self, HistoryPartitions};
use crate::presence::{self, Presence};
use crate::sql::{self, Statements};
use crate::{DEFAULT_SCHEMA, Inner, PgBackend, failover, migrate, queue};

/// Options for [`PgBackend`]; made by [`PgBackend::builder`].
#[derive(Clone)]
#[must_use = "a builder does nothing until `connect` is called"]
pub struct PgBackendBuilder {
    url: String,
    schema: String,
    pool_size: u32,
    connect_timeout: Duration,
    liveness_interval: Duration,
    liveness_timeout: Option<Duration>,
    pooler: bool,
    partitions: Option<HistoryPartitions>,
}

impl fmt::Debug for PgBackendBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgBackendBuilder")
            .field("url", &redact_url(&self.url))
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("liveness_interval", &self.liveness_interval)
            .field("liveness_timeout", &self.liveness_timeout)
            .field("transaction_pooler", &self.pooler)
            .field("partitioned_history", &self.partitions)
            .finish()
    }
}

impl PgBackendBuilder {
    /// The schema for the library's tables and its migrations table (default `slotguard`): 1 to 63
    /// characters of `a-z`, `0-9` and `_`, not starting with a digit. Created if missing.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The most connections the pool opens for slot rows (default 5). The lock connection comes on
    /// top of these, so does the presence connection once the backend claims (it tells the other
    /// replicas at once when this process dies; see `docs/guards.md`), and one short-lived
    /// connection for migrations at start-up.
    pub fn pool_size(mut self, connections: u32) -> Self {
        self.pool_size = connections.max(1);
        self
    }

    /// How long to wait for a connection: to connect at start-up, to connect the lock session, and
    /// to get one from the pool (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How often the lock connection is checked while locks are held (default 5 s). A dead session
    /// is noticed, and its locks' `lost` tokens cancelled, within about this long.
    pub fn lock_liveness_interval(mut self, interval: Duration) -> Self {
        self.liveness_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// How long one liveness check may take before the session is judged dead (default: the
    /// liveness interval, at most 5 s).
    pub fn lock_liveness_timeout(mut self, timeout: Duration) -> Self {
        self.liveness_timeout = Some(timeout);
        self
    }

    /// Whether the URL reaches PostgreSQL through a transaction-mode pooler (PgBouncer
    /// `pool_mode = transaction`, and the managed poolers built like it); default `false`.
    ///
    /// Through one, every statement runs unprepared in a transaction of its own, so that the
    /// pooler keeps it on one server session (a round trip more per statement), and the backend
    /// keeps no session of its own:
    /// - no `LISTEN`: workers poll the queue every 100 ms;
    /// - no presence key: the runs of a killed process wait out their stale threshold instead of
    ///   being taken over at once;
    /// - no session advisory locks: a job at the `lock` level is refused
    ///   ([`PgError::SessionLocksThroughPooler`]); give the store lease rows for it
    ///   ([`PgLeaseLocks`](crate::PgLeaseLocks)).
    ///
    /// Migrations run through it (one transaction under a transaction-level lock). See
    /// docs/poolers.md.
    pub fn transaction_pooler(mut self, through: bool) -> Self {
        self.pooler = through;
        self
    }

    /// Partitions the history (`job_runs` and `job_run_attempts`) by slot time, so that retention
    /// drops a whole partition instead of deleting its rows one by one (default: a plain table).
    ///
    /// The first backend that connects with this converts the schema, once. It first gives every
    /// old attempt its run's slot time, in batches, while the other replicas go on. Then, in one
    /// transaction, the rows already there stay in the old tables, which become the partition of
    /// every slot up to the end of the span after the latest one. Their indexes are kept; the two
    /// keys that must now hold the slot time are built under an exclusive lock, so plan a quiet
    /// moment for a large table. A schema partitioned once stays so,
    /// with the span it was given; backends that connect without this option work with it as it
    /// is, and so do their retention passes. See docs/scale.md, "Partitioned history".
    pub fn partitioned_history(mut self, partitions: HistoryPartitions) -> Self {
        self.partitions = Some(partitions);
        self
    }

    /// Connects, migrates the schema, and starts the lock liveness check.
    ///
    /// # Errors
    ///
    /// [`PgError::InvalidSchema`], [`PgError::InvalidUrl`], [`PgError::Connect`] when the database
    /// cannot be reached (the URL in the message has its password redacted), and
    /// [`PgError::Migrate`] when a migration fails (it is rolled back).
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub async fn connect(self) -> Result<PgBackend, PgError> {
        let url = redact_url(&self.url);
        let quoted = sql::quote_schema(&self.schema)
            .ok_or_else(|| PgError::InvalidSchema(self.schema.clone()))?;
        let mut options =
            PgConnectOptions::from_str(&self.url).map_err(|source| PgError::InvalidUrl {
                url: url.clone(),
                source,
            })?;
        let app = options
            .get_application_name()
            .unwrap_or("slotguard")
            .to_owned();
        options = options.application_name(&app);
        if self.pooler {
            options = options.statement_cache_capacity(0);
        }
        let lock_options = options
            .clone()
            .application_name(&format!("{app} (slotguard locks)"));
        let presence_options = options
            .clone()
            .application_name(&format!("{app} (slotguard presence)"));

        let connect_err = |source| PgError::Connect {
            url: url.clone(),
            source,
        };
        let mut conn =
            tokio::time::timeout(self.connect_timeout, PgConnection::connect_with(&options))
                .await
                .map_err(|_| connect_err(locks::timed_out("connecting")))?
                .map_err(connect_err)?;
        let applied = migrate::run(&mut conn, &self.schema, &quoted, !self.pooler)
            .await
            .map_err(|f| PgError::Migrate {
                url: url.clone(),
                schema: self.schema.clone(),
                version: f.version,
                description: f.description,
                source: f.source,
            })?;
        if !applied.is_empty() {
            tracing::info!(schema = %self.schema, versions = ?applied, "slotguard schema migrated");
        }
        self.partition(&mut conn, &quoted).await?;
        let _ = conn.close().await;

        let watch = Arc::new(failover::Watch::default());
        let pool = self.pool(&options, &watch, &quoted);
        let (statements, presence) = self.presence(&quoted, presence_options);
        let locks = Locks::new(LockConfig {
            options: lock_options,
            url: url.clone(),
            connect_timeout: self.connect_timeout,
            liveness_interval: self.liveness_interval,
            liveness_timeout: self
                .liveness_timeout
                .unwrap_or_else(|| self.liveness_interval.min(Duration::from_secs(5))),
        });
        let stop = CancellationToken::new();
        locks.spawn_liveness(stop.clone());
        Ok(PgBackend {
            inner: Arc::new(Inner {
                pool,
                statements,
                presence,
                ahead: self.ahead(),
                schema: self.schema,
                quoted,
                url,
                locks,
                stop,
                queue: queue::Signal::default(),
                watch,
                pooler: self.pooler,
            }),
        })
    }
}

impl PgBackendBuilder {
    /// How many spans ahead a partitioned history gets its partitions.
    fn ahead(&self) -> u32 {
        self.partitions.map_or(2, |p| p.ahead)
    }

    /// Converts the history if asked to, and makes the partitions ahead of a partitioned one.
    async fn partition(&self, conn: &mut PgConnection, quoted: &str) -> Result<(), PgError> {
        let (schema, prepared) = (&self.schema, !self.pooler);
        let failed = |step: &'static str| {
            move |source| PgError::Partition {
                schema: schema.clone(),
                step,
                source,
            }
        };
        let layout = match self.partitions {
            Some(wanted) => Some(
                partitions::convert(conn, schema, quoted, wanted, prepared)
                    .await
                    .map_err(|(step, source)| failed(step)(source))?,
            ),
            None => partitions::read_layout(conn, (schema, quoted), prepared)
                .await
                .map_err(failed("read the layout"))?,
        };
        let Some(layout) = layout else { return Ok(()) };
        let now = chrono::Utc::now();
        partitions::ensure(conn, (schema, quoted), layout, now, self.ahead(), prepared)
            .await
            .map_err(failed("make the partitions ahead"))?;
        Ok(())
    }

    /// The statements of the backend, with the presence key they write on the attempts they start
    /// and the presence that will hold it; neither through a transaction pooler (`presence.rs`).
    fn presence(
        &self,
        quoted: &str,
        options: PgConnectOptions,
    ) -> (Statements, Option<Arc<Presence>>) {
        let key = (!self.pooler).then(presence::random_key);
        let statements = Statements::new(quoted, key);
        let presence = key.map(|key| {
            let expire_gone = Arc::clone(&statements.expire_gone);
            Arc::new(Presence::new(
                key,
                options,
                self.connect_timeout,
                expire_gone,
            ))
        });
        (statements, presence)
    }

    /// The pool of slot-row connections, opened lazily; every new connection raises the token
    /// floor and looks for a failover (`watch`).
    fn pool(
        &self,
        options: &PgConnectOptions,
        watch: &Arc<failover::Watch>,
        quoted: &str,
    ) -> PgPool {
        // The claim and finish statements are large CTEs over array parameters: planning them anew
        // on every execution (PostgreSQL's custom plans) costs more than running them. One generic
        // plan per prepared statement and connection does not depend on the arrays' contents.
        // No JIT: once a table holds 100,000 queued rows the claim's estimated cost passes
        // `jit_above_cost`, and compiling it took 180 ms of each 260 ms claim (a drain of 100,000
        // slots fell from about 2,800 to about 30 a second). Every statement here is short.
        let pool_options = options
            .clone()
            .options([("plan_cache_mode", "force_generic_plan"), ("jit", "off")]);
        let (watch, schema): (_, Arc<str>) = (Arc::clone(watch), Arc::from(quoted));
        let prepared = !self.pooler;
        PgPoolOptions::new()
            .max_connections(self.pool_size)
            .acquire_timeout(self.connect_timeout)
            .after_connect(move |conn, _| {
                let (watch, schema) = (Arc::clone(&watch), Arc::clone(&schema));
                Box::pin(async move {
                    watch.on_connect(conn, &schema, prepared).await;
                    Ok(())
                })
            })
            .connect_lazy_with(pool_options)
    }
}

impl PgBackend {
    /// Connects with the default options and migrates the `slotguard` schema. See
    /// [`PgBackendBuilder::connect`].
    ///
    /// # Errors
    ///
    /// As [`PgBackendBuilder::connect`].
    pub async fn connect(url: &str) -> Result<PgBackend, PgError> {
        PgBackend::builder(url).connect().await
    }

    /// Options, starting from `url` (`postgres://user:password@host:port/database?...`).
    pub fn builder(url: &str) -> PgBackendBuilder {
        PgBackendBuilder {
            url: url.to_owned(),
            schema: DEFAULT_SCHEMA.to_owned(),
            pool_size: 5,
            connect_timeout: Duration::from_secs(10),
            liveness_interval: Duration::from_secs(5),
            liveness_timeout: None,
            pooler: false,
            partitions: None,
        }
    }
}
