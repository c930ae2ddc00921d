//! Outbound check-ins: a job with a [`Monitor`] reports the start and the end of each run to it
//! (Sentry Crons, a webhook, a dead man's switch), so that a run that never started or never ended
//! raises an alert somewhere the scheduler itself is not.
//!
//! The monitor is called off the body's path: each run's check-ins go out on a task of their own,
//! with [`CALL_TIMEOUT`] per call and at most [`TRIES`] calls per check-in, and the run never waits
//! for them. A slow, failing or unreachable monitor costs a warning in the log, never a run or its
//! start time. Skipped slots send nothing.
//!
//! ```
//! use std::sync::Arc;
//!
//! use slotguard::monitor::{CheckIn, Monitor, MonitorError};
//! use slotguard::{Job, JobContext};
//!
//! struct PrintCheckIns;
//!
//! #[slotguard::async_trait]
//! impl Monitor for PrintCheckIns {
//!     async fn check_in(&self, event: &CheckIn) -> Result<(), MonitorError> {
//!         println!("{} {} {}", event.job, event.scheduled_at, event.status);
//!         Ok(())
//!     }
//! }
//!
//! let job = Job::new("nightly_report", "0 3 * * *", |_ctx: JobContext| async {})
//!     .monitor(Arc::new(PrintCheckIns));
//! # let _ = job;
//! ```
//!
//! The `slotguard-checkins` crate has two HTTP monitors: `SentryCrons` and `Webhook`.

pub(crate) mod attached;
mod check_in;
mod config;
pub(crate) mod deliver;

pub use check_in::{CheckIn, CheckInStatus};
pub use config::{DEFAULT_MARGIN, MonitorConfig};
pub use deliver::{BACKOFF, CALL_TIMEOUT, TRIES};

/// What a [`Monitor`] returns when a check-in did not go through; the scheduler logs it and tries
/// again, up to [`TRIES`] calls.
pub type MonitorError = Box<dyn std::error::Error + Send + Sync>;

/// Where a job's check-ins go.
///
/// Attach one to a job with [`Job::monitor`](crate::Job::monitor), or to every job with
/// [`SchedulerBuilder::monitor`](crate::SchedulerBuilder::monitor). Each call gets
/// [`CALL_TIMEOUT`]; an error or a timeout is retried after [`BACKOFF`] (doubled each time), up to
/// [`TRIES`] calls in all. The check-ins of one run arrive in order (`in_progress`, then `ok` or
/// `error`), each run's on a task of its own; the run never waits for them.
#[async_trait::async_trait]
pub trait Monitor: Send + Sync + 'static {
    /// Sends one check-in.
    ///
    /// # Errors
    /// Whatever kept the check-in from being taken; the scheduler retries it.
    ///
    /// # Cancel safety
    /// The future is dropped when it outlives [`CALL_TIMEOUT`]; the call is then tried again, so a
    /// receiver may see a check-in twice.
    async fn check_in(&self, event: &CheckIn) -> Result<(), MonitorError>;
}
