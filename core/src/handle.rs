//! The handle of a running scheduler, and its graceful shutdown.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use crate::runtime::Runtime;

/// Controls a started scheduler. Cheap to clone; every clone controls the same scheduler.
#[derive(Clone)]
pub struct SchedulerHandle {
    rt: Arc<Runtime>,
    heartbeat_done: CancellationToken,
    report: Arc<OnceCell<ShutdownReport>>,
    stopped: CancellationToken,
}

impl fmt::Debug for SchedulerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SchedulerHandle")
            .field("instance_id", &self.rt.owner)
            .field("running", &self.running())
            .field("stopped", &self.stopped.is_cancelled())
            .finish()
    }
}

/// What a shutdown did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Job bodies running when shutdown began.
    pub in_flight: usize,
    /// Whether they all finished within the grace period.
    pub finished_in_grace: bool,
    /// Runs recorded `abandoned` with reason `shutdown` (told to stop after the grace period).
    pub abandoned: usize,
    /// How long shutdown took.
    pub took: Duration,
}

impl SchedulerHandle {
    /// `heartbeat_done` ends the upkeep tasks (heartbeats, the registry row) once the runs have
    /// ended.
    pub(crate) fn new(rt: Arc<Runtime>, heartbeat_done: CancellationToken) -> Self {
        SchedulerHandle {
            rt,
            heartbeat_done,
            report: Arc::new(OnceCell::new()),
            stopped: CancellationToken::new(),
        }
    }

    /// This process's instance id.
    pub fn instance_id(&self) -> &str {
        &self.rt.owner
    }

    /// Job bodies running now.
    pub fn running(&self) -> usize {
        self.rt.running.load(Ordering::Acquire)
    }

    /// Shuts down in two phases and returns when done. Calling it again, from any clone, waits for the
    /// same shutdown and returns the same report.
    ///
    /// 1. Stop claiming: the timer stops and no tick claims anything after this call.
    /// 2. Wait up to the grace period for running jobs; then tell the rest to stop
    ///    ([`JobContext::cancelled`](crate::JobContext::cancelled)), give them
    ///    [`kill_after`](crate::SchedulerBuilder::kill_after) to return, and record whatever is left
    ///    `abandoned` with reason `shutdown`, releasing its locks so another replica recovers it at once.
    /// 3. Remove this process from the replica registry.
    ///
    /// # Cancel safety
    /// Dropping the future after it started does not undo phase 1; a later call completes the shutdown.
    pub async fn shutdown(&self) -> ShutdownReport {
        *self
            .report
            .get_or_init(|| async {
                let started = tokio::time::Instant::now();
                let in_flight = self.running();
                tracing::info!(in_flight, "scheduler shutting down: no new claims");
                self.rt.stop.cancel();
                self.rt.tracker.close();
                let finished_in_grace = tokio::time::timeout(self.rt.grace, self.rt.tracker.wait())
                    .await
                    .is_ok();
                if !finished_in_grace {
                    tracing::warn!(
                        running = self.running(),
                        "grace period over: telling running jobs to stop"
                    );
                    self.rt.cancel.cancel();
                    self.rt.tracker.wait().await;
                }
                // The runs have ended: their heartbeats stop, and the registry task removes this
                // replica, within its own time limit.
                self.heartbeat_done.cancel();
                self.rt.upkeep.close();
                self.rt.upkeep.wait().await;
                let report = ShutdownReport {
                    in_flight,
                    finished_in_grace,
                    abandoned: self.rt.abandoned.load(Ordering::Acquire),
                    took: started.elapsed(),
                };
                tracing::info!(?report, "scheduler stopped");
                self.stopped.cancel();
                report
            })
            .await
    }

    /// A future for a server's graceful-shutdown hook: it waits for `signal`, then shuts the scheduler
    /// down and completes, so the server stops accepting requests once the jobs are done.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let handle = slotguard::Scheduler::builder().build().unwrap().start();
    /// let (stop, signal) = tokio::sync::oneshot::channel::<()>();
    /// // With axum: axum::serve(listener, app).with_graceful_shutdown(on_signal).await
    /// let on_signal = handle.clone().shutdown_on(async { let _ = signal.await; });
    /// stop.send(()).unwrap();
    /// on_signal.await;
    /// handle.stopped().await; // already done
    /// # }
    /// ```
    // Written out so the signature promises `Send + 'static`, which servers' shutdown hooks require.
    #[allow(clippy::manual_async_fn)]
    pub fn shutdown_on<F>(self, signal: F) -> impl Future<Output = ()> + Send + 'static
    where
        F: Future + Send + 'static,
    {
        async move {
            signal.await;
            self.shutdown().await;
        }
    }

    /// Completes once a shutdown, started from anywhere, has finished.
    pub async fn stopped(&self) {
        self.stopped.cancelled().await;
    }
}
