//! The durable queue between schedulers and workers: slots enqueued as `pending` rows (`CLAIM` in
//! its enqueue mode), the next instant one falls due, and `LISTEN`/`NOTIFY` so that workers wake
//! when something is queued instead of polling.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{Claim, ClaimRequest, DueSpec, StoreError};
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::PgBackend;
use crate::error::PgError;
use crate::sql::sql;

/// How long the listener waits before listening again after its connection failed.
const RELISTEN: Duration = Duration::from_millis(500);

/// The workers' wake-up counter, fed by one `LISTEN` connection per backend once a worker asks.
#[derive(Debug)]
pub(crate) struct Signal {
    sender: Arc<watch::Sender<u64>>,
    started: AtomicBool,
}

impl Default for Signal {
    fn default() -> Self {
        Signal {
            sender: Arc::new(watch::Sender::new(0)),
            started: AtomicBool::new(false),
        }
    }
}

/// The `NOTIFY` channel of a schema: fixed length whatever the schema's (channel names are
/// identifiers, at most 63 bytes).
pub(crate) fn channel(schema: &str) -> String {
    let hash = slotguard::derive_lock_key("slotguard_due", schema) as u64;
    format!("slotguard_due_{hash:016x}")
}

impl PgBackend {
    /// Enqueues `requests`, keeps the trace context of those queued, and, when something was
    /// queued, notifies the schema's channel.
    pub(crate) async fn enqueue_rows(
        &self,
        requests: &[ClaimRequest],
        traces: &[Option<String>],
    ) -> Result<Vec<Claim>, StoreError> {
        let answers = self.claim_rows("", requests, true).await?;
        if answers.contains(&Claim::Queued) {
            // Before the `NOTIFY`, so that a woken worker finds the context.
            self.keep_traces(requests, traces, &answers).await?;
            self.notify_due().await?;
        }
        Ok(answers)
    }

    /// `KEEP_TRACES` for the requests answered `queued` that carry a trace context.
    async fn keep_traces(
        &self,
        requests: &[ClaimRequest],
        traces: &[Option<String>],
        answers: &[Claim],
    ) -> Result<(), StoreError> {
        let kept: Vec<(&ClaimRequest, &String)> = requests
            .iter()
            .zip(traces)
            .zip(answers)
            .filter_map(|((r, t), a)| t.as_ref().filter(|_| *a == Claim::Queued).map(|t| (r, t)))
            .collect();
        if kept.is_empty() {
            return Ok(());
        }
        let jobs: Vec<&str> = kept.iter().map(|(r, _)| r.key.job.as_str()).collect();
        let slots: Vec<DateTime<Utc>> = kept.iter().map(|(r, _)| r.key.scheduled_at).collect();
        let partitions: Vec<&str> = kept.iter().map(|(r, _)| r.key.partition.as_str()).collect();
        let parents: Vec<&str> = kept.iter().map(|(_, t)| t.as_str()).collect();
        self.execute(
            sqlx::query(sql(&self.inner.statements.keep_traces))
                .bind(&jobs)
                .bind(&slots)
                .bind(&partitions)
                .bind(&parents),
        )
        .await
        .map_err(PgError::from)?;
        Ok(())
    }

    /// Wakes every listening worker (delivered when the statement commits).
    pub(crate) async fn notify_due(&self) -> Result<(), StoreError> {
        self.execute(sqlx::query("SELECT pg_notify($1, '')").bind(channel(&self.inner.schema)))
            .await
            .map_err(PgError::from)?;
        Ok(())
    }

    /// See `NEXT_DUE`.
    pub(crate) async fn next_due_at(
        &self,
        specs: &[DueSpec],
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        if specs.is_empty() {
            return Ok(None);
        }
        let jobs: Vec<&str> = specs.iter().map(|s| s.job.as_str()).collect();
        let at: Option<DateTime<Utc>> = self
            .fetch_optional(sqlx::query_scalar(sql(&self.inner.statements.next_due)).bind(&jobs))
            .await
            .map_err(PgError::from)?;
        Ok(at)
    }

    /// A receiver of the wake-up counter; the first call starts the listener.
    pub(crate) fn queue_signal(&self) -> watch::Receiver<u64> {
        let signal = &self.inner.queue;
        if !signal.started.swap(true, Ordering::AcqRel) {
            let (pool, channel) = (self.inner.pool.clone(), channel(&self.inner.schema));
            let (sender, stop) = (Arc::clone(&signal.sender), self.inner.stop.clone());
            tokio::spawn(listen(pool, channel, sender, stop));
        }
        signal.sender.subscribe()
    }
}

/// Listens until the backend is dropped or closed. Every notification, and every reconnection (a
/// notification may have been lost meanwhile), moves the counter.
async fn listen(
    pool: PgPool,
    channel: String,
    sender: Arc<watch::Sender<u64>>,
    stop: CancellationToken,
) {
    let bump = || sender.send_modify(|n| *n = n.wrapping_add(1));
    loop {
        let listener = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(&channel).await?;
            // Anything queued while nobody listened is due now.
            bump();
            loop {
                listener.recv().await?;
                bump();
            }
        };
        let failed: Result<(), sqlx::Error> = tokio::select! {
            () = stop.cancelled() => return,
            r = listener => r,
        };
        if let Err(e) = failed {
            tracing::debug!(error = %e, "LISTEN connection failed; listening again");
        }
        bump();
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(RELISTEN) => {}
        }
    }
}
