//! slotguard runs scheduled jobs inside an application deployed as many replicas, and makes sure each
//! scheduled slot of a job runs once across all of them, is recovered when its runner dies, and is
//! recorded.
//!
//! ```no_run
//! use slotguard::{scheduled, JobContext, Scheduler};
//!
//! #[scheduled("0 2 * * *", tz = "Asia/Seoul")]
//! async fn daily_settlement(ctx: JobContext) -> Result<(), slotguard::JobError> {
//!     println!("settling {} with key {}", ctx.business_date(), ctx.idempotency_key());
//!     Ok(())
//! }
//!
//! #[scheduled("*/5 * * * *", guard = local)]
//! async fn expire_sessions() {}
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let scheduler = Scheduler::builder()
//!         .jobs(slotguard::jobs![daily_settlement, expire_sessions])
//!         .backend(slotguard::MemoryBackend::new())
//!         .build()?; // fails fast: bad cron, unknown zone, duplicate name, lock-key collision
//!     let handle = scheduler.start();
//!     tokio::signal::ctrl_c().await?;
//!     handle.shutdown().await;
//!     Ok(())
//! }
//! ```
//!
//! - **Time** is explicit: every job has an IANA zone, a business date per slot and a named DST policy
//!   ([`DstPolicy`]). Slots are computed from the schedule, never from "now", so every replica
//!   derives the same slot.
//! - **Guards** are chosen per job ([`GuardLevel`]): a per-process running flag, a cluster-wide lock,
//!   and slot rows with attempts, heartbeats and fencing tokens.
//! - **The runtime** keeps one timer for all jobs, never awaits a run in it, catches panics in job
//!   bodies, and shuts down in two phases ([`SchedulerHandle::shutdown`]).
//! - **Traces**: each run is a `job_run` span with the OpenTelemetry `workflow.*` attributes, its
//!   `job_claim` and its `job_body` (the body's own spans inside). With the `otel` feature, a worker's
//!   run links to the scheduler span that queued it; `docs/observability.md` wires an OTLP exporter.

#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets `#[scheduled]`, which names `::slotguard`, be used inside this crate's own tests and docs.
extern crate self as slotguard;

mod calendar;
pub mod calendar_timeline;
mod clock;
mod context;
mod entry;
pub mod guard;
mod handle;
mod job;
pub mod metrics;
pub mod monitor;
mod once;
pub mod operate;
mod policy;
mod role;
mod runtime;
mod scheduler;
mod state;
pub mod store;
pub mod timeline;
mod trace;

/// The `chrono` this crate's public signatures use ([`JobContext::business_date`] is a
/// [`chrono::NaiveDate`], slots are [`chrono::DateTime<Utc>`](chrono::DateTime)): name its types
/// through `slotguard::chrono` and an application needs no `chrono` dependency of its own, nor a
/// matching version.
/// The attribute [`Monitor`] implementations take.
#[doc(no_inline)]
pub use async_trait::async_trait;
pub use calendar::{CalendarDefinition, CalendarRef, CalendarSettingError};
pub use chrono;
pub use clock::{Clock, ClockSync, SystemClock, TokioClock};
pub use context::{CheckpointError, JobContext, MAX_CHECKPOINT_BYTES};
pub use guard::{GuardLevel, RunOutcome, SkipReason, UnknownGuardLevel};
pub use handle::{SchedulerHandle, ShutdownReport};
pub use job::{
    ErrorClass, IntoJobResult, Job, JobError, JobResult, ScheduledJob, UnknownErrorClass,
};
pub use monitor::{CheckIn, CheckInStatus, Monitor, MonitorConfig};
pub use once::{ANNOTATION, RunOnce, RunOnceError, SlotSource};
pub use policy::{CatchUp, Overlap, RetryPolicy, UnknownOverlap};
pub use role::{Role, UnknownRole};
pub use scheduler::{
    BuildError, ConfigError, DEFAULT_RETENTION, JobInfo, MAX_JOB_NAME_CHARS, Scheduler,
    SchedulerBuilder, derive_lock_key,
};
pub use slotguard_cron::{Adjust, BusinessRule, Calendar, CalendarError, UnknownAdjust, Weekend};
pub use slotguard_cron::{
    CronExpr, DstPolicy, Field, FieldError, ParseError, Schedule, ScheduleError, Slot, Tz,
    UnknownDstPolicy, UnknownZone, parse_zone,
};
pub use slotguard_cron::{NameProblem, check_job_name, check_partition};
pub use slotguard_macros::scheduled;
pub use state::MissingState;
pub use store::memory::MemoryBackend;

/// Re-exports for the code `#[scheduled]` generates. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::job::Registration;
    pub use futures::future::BoxFuture;
    pub use inventory;
}
