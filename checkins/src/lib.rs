//! Check-ins of slotguard jobs over HTTP: [`SentryCrons`] reports each run to a Sentry Crons
//! monitor, [`Webhook`] posts each check-in as JSON to a URL of yours. Both are
//! [`Monitor`](slotguard::Monitor)s: attach one to a job with
//! [`Job::monitor`](slotguard::Job::monitor) or to every job with
//! [`SchedulerBuilder::monitor`](slotguard::SchedulerBuilder::monitor).
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use slotguard::{Job, JobContext, MemoryBackend, Scheduler};
//! use slotguard_checkins::{SentryCrons, Webhook};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let sentry = SentryCrons::from_dsn("https://public-key@o0.ingest.sentry.io/42")?
//!     .environment("production");
//! let settle = Job::new("daily_settlement", "0 2 * * *", |_ctx: JobContext| async {})
//!     .tz("Asia/Seoul")
//!     .monitor(Arc::new(sentry));
//! let hook = Webhook::new("https://ops.example.com/hooks/cron")?
//!     .header("authorization", "Bearer s3cret")?;
//! let scheduler = Scheduler::builder()
//!     .job(settle)
//!     .monitor(Arc::new(hook)) // every job without a monitor of its own
//!     .backend(MemoryBackend::new())
//!     .build()?;
//! # let _ = scheduler;
//! # Ok(())
//! # }
//! ```
//!
//! The scheduler calls them off the body's path, with a timeout and a bounded number of retries
//! ([`slotguard::monitor`]): an unreachable Sentry never delays or fails a run.

#![forbid(unsafe_code)]

mod post;
mod sentry;
mod webhook;

pub use post::CheckInError;
pub use sentry::SentryCrons;
pub use webhook::Webhook;
