//! A dead owner noticed at once: every backend that claims holds a presence key on a connection of
//! its own, and looks for the runs of backends whose key nobody holds any more.
//!
//! A process killed with `kill -9` leaves its runs `running` with a fresh heartbeat; without more,
//! the other replicas wait out the stale threshold, and a job at overlap `skip` skips every tick
//! until then. PostgreSQL knows sooner: the moment the process's sessions end, their advisory locks
//! are released. So each backend draws a random presence key, writes it on every attempt it starts
//! (`job_runs.presence`), and holds it as a shared advisory lock on its presence connection for as
//! long as it lives. Every [`EXPIRE_GONE_EVERY`] that connection runs
//! [`EXPIRE_GONE`](crate::sql::presence::EXPIRE_GONE): a `running` attempt whose key no session
//! holds and whose heartbeat is older than half its threshold is made stale now, and taken over
//! with the usual fencing and one attempt more.
//!
//! What keeps a live owner from being judged dead:
//! - a process that is alive but silent (stopped, frozen, cut off from the network while its socket
//!   stays open) still holds its key: it waits out the stale threshold as before;
//! - a process whose presence session alone was cut (`pg_terminate_backend`, a pooler restart)
//!   goes on beating every third of the threshold through its pool, and connects the presence
//!   session again within [`RECONNECT_MAX`];
//! - after its presence session was made again, a backend does not judge others for [`SETTLE`]:
//!   after a failover or a server restart every replica is connecting again at once, each within
//!   [`RECONNECT_MAX`] of the server taking connections. (Its first session judges at once: a new
//!   process has seen no outage.)
//!
//! The connection is made on the first claim, so a backend that only reads (the command line, an
//! admin server) holds none.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

use crate::sql::presence::{PRESENCE_CLASS, TAKE};
use crate::sql::sql;

/// How often the presence connection looks for runs of gone backends (and proves itself alive).
pub(crate) const EXPIRE_GONE_EVERY: Duration = Duration::from_millis(250);

/// How long a backend whose presence session was made again waits before judging others: longer
/// than [`RECONNECT_MAX`] and a liveness check, so that every replica cut off by the same outage
/// holds its key again first.
pub(crate) const SETTLE: Duration = Duration::from_secs(3);

/// The first wait after a failed connection attempt, doubled up to [`RECONNECT_MAX`].
const RECONNECT_MIN: Duration = Duration::from_millis(100);

/// The longest wait between connection attempts.
const RECONNECT_MAX: Duration = Duration::from_secs(1);

/// A backend's presence: its key and the task that holds it.
#[derive(Debug)]
pub(crate) struct Presence {
    key: i32,
    options: PgConnectOptions,
    connect_timeout: Duration,
    expire_gone: Arc<str>,
    started: AtomicBool,
}

/// One run made stale because its backend is gone: job, slot, partition, owner, attempt, token
/// (the columns `EXPIRE_GONE` returns).
type Gone = (String, DateTime<Utc>, String, Option<String>, i32, i64);

impl Presence {
    /// The presence of key `key` (from [`random_key`]); nothing is connected until
    /// [`Presence::ensure`].
    pub(crate) fn new(
        key: i32,
        options: PgConnectOptions,
        connect_timeout: Duration,
        expire_gone: Arc<str>,
    ) -> Self {
        Presence {
            key,
            options,
            connect_timeout,
            expire_gone,
            started: AtomicBool::new(false),
        }
    }

    /// Starts holding the key, once, until `stop`; cheap after the first call.
    pub(crate) fn ensure(self: &Arc<Self>, stop: &CancellationToken) {
        if !self.started.swap(true, Ordering::AcqRel) {
            tokio::spawn(Arc::clone(self).hold(stop.clone()));
        }
    }

    /// Connects, takes the key and looks for gone backends until `stop`; connects again whenever
    /// the session fails.
    async fn hold(self: Arc<Self>, stop: CancellationToken) {
        let mut wait = RECONNECT_MIN;
        let mut failing = false;
        while !stop.is_cancelled() {
            match self.connect().await {
                Ok(conn) => {
                    if failing {
                        tracing::info!(event = "presence_restored", "presence session made again");
                    }
                    wait = RECONNECT_MIN;
                    let settle = if failing { SETTLE } else { Duration::ZERO };
                    let error = tokio::select! {
                        () = stop.cancelled() => return,
                        error = self.watch(conn, settle) => error,
                    };
                    tracing::warn!(
                        event = "presence_lost",
                        error = %error,
                        "the presence session failed; connecting it again"
                    );
                    failing = true;
                }
                Err(error) => {
                    if !failing {
                        tracing::warn!(
                            event = "presence_lost",
                            error = %error,
                            "could not make the presence session; trying again"
                        );
                    }
                    failing = true;
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = sleep(wait) => wait = (wait * 2).min(RECONNECT_MAX),
            }
        }
    }

    /// A presence session holding the key.
    async fn connect(&self) -> Result<PgConnection, sqlx::Error> {
        let mut conn = timeout(
            self.connect_timeout,
            PgConnection::connect_with(&self.options),
        )
        .await
        .map_err(|_| timed_out("connecting"))??;
        let held: bool = timeout(
            self.connect_timeout,
            sqlx::query_scalar(TAKE)
                .bind(PRESENCE_CLASS)
                .bind(self.key)
                .fetch_one(&mut conn),
        )
        .await
        .map_err(|_| timed_out("taking the presence key"))??;
        if held {
            Ok(conn)
        } else {
            Err(sqlx::Error::Protocol(
                "the presence key is held exclusively by another session".into(),
            ))
        }
    }

    /// Every [`EXPIRE_GONE_EVERY`], once `settle` has passed, makes the runs of gone backends
    /// stale; returns the error that ended the session.
    async fn watch(&self, mut conn: PgConnection, settle: Duration) -> sqlx::Error {
        let settled = Instant::now() + settle;
        loop {
            sleep(EXPIRE_GONE_EVERY).await;
            let step = async {
                if Instant::now() < settled {
                    return conn.ping().await;
                }
                let gone: Vec<Gone> = sqlx::query_as(sql(&self.expire_gone))
                    .fetch_all(&mut conn)
                    .await?;
                gone.iter().for_each(report);
                Ok(())
            };
            match timeout(self.connect_timeout, step).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return error,
                Err(_) => return timed_out("looking for gone owners"),
            }
        }
    }
}

impl crate::PgBackend {
    /// Starts holding this backend's presence key, once; none is held through a transaction
    /// pooler.
    pub(crate) fn hold_presence(&self) {
        if let Some(presence) = &self.inner.presence {
            presence.ensure(&self.inner.stop);
        }
    }
}

/// The warning and the counter for one run whose backend is gone.
fn report((job, slot, partition, owner, attempt, token): &Gone) {
    tracing::warn!(
        event = "owner_gone",
        %job,
        %slot,
        %partition,
        owner = owner.as_deref().unwrap_or(""),
        attempt,
        token,
        "the process running this attempt is gone (its database sessions ended): the run is stale now and will be taken over"
    );
    metrics::counter!("job_owner_gone_total", "job_name" => job.clone()).increment(1);
}

fn timed_out(what: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("presence session: {what} timed out"),
    ))
}

/// A random presence key (a collision with a live backend's only makes a dead one look alive).
pub(crate) fn random_key() -> i32 {
    use std::hash::{BuildHasher, RandomState};
    let bits = RandomState::new().hash_one((std::process::id(), std::time::Instant::now()));
    i32::from_ne_bytes(u32::to_ne_bytes(bits as u32))
}
