//! Jobs: a name, a schedule, a guard level and an async body.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use slotguard_cron::DstPolicy;

use crate::calendar::{CalendarRef, CalendarSettings};
use crate::context::JobContext;
use crate::monitor::Monitor;
use crate::policy::{CatchUp, GuardLevel, Overlap, RetryPolicy};

/// The body of a job, type-erased.
pub(crate) type Handler = Arc<dyn Fn(JobContext) -> BoxFuture<'static, JobResult> + Send + Sync>;

/// Lists a job's partition keys for one slot.
pub(crate) type PartitionProvider =
    Arc<dyn Fn() -> BoxFuture<'static, Result<Vec<String>, JobError>> + Send + Sync>;

/// What a job body returns, after conversion by [`IntoJobResult`].
pub type JobResult = Result<(), JobError>;

/// A job definition: what `#[scheduled]` produces, and what [`Job::new`] builds by hand.
///
/// Nothing is validated here; [`SchedulerBuilder::build`](crate::SchedulerBuilder::build) checks every
/// job at start-up and names the job in its error.
///
/// ```
/// use slotguard::{GuardLevel, Job, JobContext};
///
/// let job = Job::new("nightly_report", "0 3 * * *", |ctx: JobContext| async move {
///     println!("report for {}", ctx.business_date());
/// })
/// .tz("Europe/Berlin")
/// .guard(GuardLevel::Local);
/// assert_eq!(job.name(), "nightly_report");
/// ```
#[derive(Clone)]
pub struct Job {
    pub(crate) name: String,
    pub(crate) cron: String,
    pub(crate) tz: Option<String>,
    pub(crate) guard: Option<GuardLevel>,
    pub(crate) dst: Option<DstPolicy>,
    pub(crate) calendar: CalendarSettings,
    pub(crate) lock_key: Option<i64>,
    pub(crate) retry: Option<RetryPolicy>,
    pub(crate) overlap: Option<Overlap>,
    pub(crate) catch_up: Option<CatchUp>,
    pub(crate) deadline: Option<std::time::Duration>,
    pub(crate) retention: Option<std::time::Duration>,
    pub(crate) partitions: Option<PartitionProvider>,
    /// Per process (`.0`) and cluster-wide (`.1`) limits on the job's bodies claimed from the store.
    pub(crate) limits: (Option<u32>, Option<u32>),
    /// Where the job's check-ins go; `None`: the scheduler's monitor, if any.
    pub(crate) monitor: Option<Arc<dyn Monitor>>,
    pub(crate) handler: Handler,
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("name", &self.name)
            .field("cron", &self.cron)
            .field("tz", &self.tz)
            .field("guard", &self.guard)
            .field("dst", &self.dst)
            .field("calendar", &self.calendar)
            .field("lock_key", &self.lock_key)
            .field("retry", &self.retry)
            .field("overlap", &self.overlap)
            .field("catch_up", &self.catch_up)
            .field("deadline", &self.deadline)
            .field("retention", &self.retention)
            .field("monitor", &self.monitor.is_some())
            .finish_non_exhaustive()
    }
}

impl Job {
    /// A job that runs `body` on the cron expression `cron`.
    ///
    /// `body` takes the [`JobContext`] and returns anything that implements [`IntoJobResult`]: `()`, or a
    /// `Result<(), E>` whose error converts into a [`JobError`] (any `std::error::Error`, `anyhow::Error`,
    /// a `String`).
    pub fn new<F, Fut>(name: impl Into<String>, cron: impl Into<String>, body: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: IntoJobResult,
    {
        let handler: Handler = Arc::new(move |ctx| {
            let fut = body(ctx);
            Box::pin(async move { fut.await.into_job_result() })
        });
        Job {
            name: name.into(),
            cron: cron.into(),
            tz: None,
            guard: None,
            dst: None,
            calendar: CalendarSettings::default(),
            lock_key: None,
            retry: None,
            overlap: None,
            catch_up: None,
            deadline: None,
            retention: None,
            partitions: None,
            limits: (None, None),
            monitor: None,
            handler,
        }
    }

    /// The IANA zone the expression is read in (default: the scheduler's default zone, UTC unless set).
    #[must_use]
    pub fn tz(mut self, zone: impl Into<String>) -> Self {
        self.tz = Some(zone.into());
        self
    }

    /// The guard level (default: the scheduler's default level).
    #[must_use]
    pub fn guard(mut self, level: GuardLevel) -> Self {
        self.guard = Some(level);
        self
    }

    /// The DST policy (default: [`DstPolicy::Vixie`]).
    #[must_use]
    pub fn dst(mut self, policy: DstPolicy) -> Self {
        self.dst = Some(policy);
        self
    }

    /// The business calendar the job's dates are adjusted on: a builtin's country code (`"KR"`,
    /// `"US"`, …) or a [`Calendar`](crate::Calendar) built in code. Without [`Job::adjust`], the
    /// dates that are not business days have no slot (each is recorded `skipped`, reason
    /// `calendar`).
    ///
    /// ```
    /// use slotguard::{Adjust, Job, JobContext};
    ///
    /// // Payday: the 25th at 02:00 Seoul time, or the business day before.
    /// let payday = Job::new("payday", "0 2 25 * *", |_ctx: JobContext| async {})
    ///     .tz("Asia/Seoul")
    ///     .calendar("KR")
    ///     .adjust(Adjust::Preceding);
    /// # let _ = payday;
    /// ```
    #[must_use]
    pub fn calendar(mut self, calendar: impl Into<CalendarRef>) -> Self {
        self.calendar.calendar = Some(calendar.into());
        self
    }

    /// What becomes of a date that is not a business day on the job's [calendar](Job::calendar)
    /// (default [`Adjust::Skip`](crate::Adjust::Skip)); see docs/time.md.
    #[must_use]
    pub fn adjust(mut self, convention: crate::Adjust) -> Self {
        self.calendar.adjust = Some(convention);
        self
    }

    /// Moves each date by `days` business days after the convention (back when negative; at most
    /// ±[`MAX_SHIFT`](slotguard_cron::MAX_SHIFT)): "the second business day of the month" is
    /// `0 2 1 * *` with `adjust(Following)` and `shift(1)`.
    #[must_use]
    pub fn shift(mut self, days: i32) -> Self {
        self.calendar.shift = Some(days);
        self
    }

    /// An explicit advisory-lock key for the `lock` and `slot` levels, instead of the one derived from
    /// the namespace and the job name.
    #[must_use]
    pub fn lock_key(mut self, key: i64) -> Self {
        self.lock_key = Some(key);
        self
    }

    /// How failed runs are retried (default: [`RetryPolicy::default`]). Retries need the `slot` level.
    #[must_use]
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// At most `runs` bodies of this job claimed from the store (queued slots on a worker, retries,
    /// recovery, catch-up, manual runs) run at once in one process. Matters for jobs that can run
    /// more than once at a time (partitioned, or overlap `allow`). Needs the `slot` level.
    #[must_use]
    pub fn process_limit(mut self, runs: u32) -> Self {
        self.limits.0 = Some(runs);
        self
    }

    /// At most `runs` bodies of this job run at once across the whole cluster: a worker is handed a
    /// run only while fewer are `running` with a fresh heartbeat in the store (a rate-limited API, a
    /// database that takes N writers). Needs the `slot` level.
    #[must_use]
    pub fn cluster_limit(mut self, runs: u32) -> Self {
        self.limits.1 = Some(runs);
        self
    }

    /// What happens when a slot falls due while a run of this job is still going (default
    /// [`Overlap::Skip`]). Policies other than `skip` need the `slot` level.
    #[must_use]
    pub fn overlap(mut self, policy: Overlap) -> Self {
        self.overlap = Some(policy);
        self
    }

    /// What to do with slots missed while no replica ran (default [`CatchUp::Skip`]). Needs the
    /// `slot` level.
    #[must_use]
    pub fn catch_up(mut self, policy: CatchUp) -> Self {
        self.catch_up = Some(policy);
        self
    }

    /// A slot that has not succeeded this long after it was due is *overdue*: the scheduler logs
    /// `job_overdue` and sets the `job_overdue` gauge, for alerting. Needs the `slot` level.
    #[must_use]
    pub fn deadline(mut self, after: std::time::Duration) -> Self {
        self.deadline = Some(after);
        self
    }

    /// How long the job's finished runs are kept, with their attempts and audit records (default:
    /// the scheduler's [`retention`](crate::SchedulerBuilder::retention), 30 days). From 1 s to
    /// 100 years. Needs the `slot` level (only it keeps history).
    #[must_use]
    pub fn retention(mut self, keep: std::time::Duration) -> Self {
        self.retention = Some(keep);
        self
    }

    /// Runs the job once per partition key (for example, per tenant) on every slot: `provider` lists
    /// the keys when the slot falls due, and each partition claims its own slot row, so partitions run
    /// in parallel (on any replicas) and each once. The context's
    /// [`partition`](JobContext::partition) names the key, and the idempotency key ends with it.
    /// Needs the `slot` level; the flag and lock layers step aside (the rows exclude per partition).
    ///
    /// Keys must be non-empty, at most 200 characters and free of control characters; others are
    /// logged and left out. If the provider fails, the slot is logged and not run.
    #[must_use]
    pub fn partitions<F, Fut, I>(mut self, provider: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<I, JobError>> + Send + 'static,
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.partitions = Some(Arc::new(move || {
            let fut = provider();
            Box::pin(async move { Ok(fut.await?.into_iter().map(Into::into).collect()) })
        }));
        self
    }

    /// A limit on each attempt: an attempt that runs longer is stopped and fails with a transient
    /// error (and is retried by the retry policy).
    #[must_use]
    pub fn timeout(mut self, limit: std::time::Duration) -> Self {
        let retry = self.retry.unwrap_or_default();
        self.retry = Some(retry.with_timeout(limit));
        self
    }

    /// Sends the job's check-ins to `monitor`: `in_progress` when a body starts, `ok` or `error`
    /// when it ends, off the body's path (see [`monitor`](crate::monitor)). Replaces the
    /// scheduler's [`monitor`](crate::SchedulerBuilder::monitor) for this job.
    #[must_use]
    pub fn monitor(mut self, monitor: Arc<dyn Monitor>) -> Self {
        self.monitor = Some(monitor);
        self
    }

    /// The job's name: stable across deploys, it identifies the job's slots in every store.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cron expression as given.
    pub fn cron(&self) -> &str {
        &self.cron
    }
}

/// Implemented by the type `#[scheduled]` generates next to each function, so that `jobs![f]` can name
/// the job by the function's path.
pub trait ScheduledJob {
    /// The job definition.
    fn job() -> Job;
}

/// Builds a `Vec<Job>` from `#[scheduled]` functions; the explicit alternative to
/// [`SchedulerBuilder::discover`](crate::SchedulerBuilder::discover), and it always works.
///
/// ```
/// use slotguard::{jobs, scheduled, Scheduler};
///
/// #[scheduled("0 3 * * *", tz = "Europe/Berlin")]
/// async fn nightly_report() {}
///
/// let scheduler = Scheduler::builder().jobs(jobs![nightly_report]).build()?;
/// assert_eq!(scheduler.jobs().next().unwrap().name, "nightly_report");
/// # Ok::<(), slotguard::BuildError>(())
/// ```
#[macro_export]
macro_rules! jobs {
    ($($job:path),* $(,)?) => {
        ::std::vec![$(<$job as $crate::ScheduledJob>::job()),*]
    };
}

/// Whether a failed run may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Worth another attempt (the default).
    Transient,
    /// Configuration, authentication, validation: another attempt would fail the same way, so the run
    /// goes straight to `dead` and waits for a person.
    Permanent,
}

crate::store::vocab::vocabulary!(ErrorClass, UnknownErrorClass, "error class" {
    Transient => "transient",
    Permanent => "permanent",
});

/// The error a job body ends with. Any error type converts into it with `?`; use
/// [`JobError::permanent`] for failures a retry cannot fix.
pub struct JobError {
    class: ErrorClass,
    source: Box<dyn StdError + Send + Sync>,
}

impl JobError {
    /// A failure a retry may fix.
    pub fn transient(err: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        JobError {
            class: ErrorClass::Transient,
            source: err.into(),
        }
    }

    /// A failure a retry cannot fix: the run goes to `dead`.
    pub fn permanent(err: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        JobError {
            class: ErrorClass::Permanent,
            source: err.into(),
        }
    }

    /// Transient or permanent.
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// The underlying error.
    pub fn source_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.source
    }
}

impl<E: Into<Box<dyn StdError + Send + Sync>>> From<E> for JobError {
    /// Transient, except [`MissingState`](crate::MissingState): no retry can give a job state the
    /// scheduler was never given, so `ctx.state::<T>()?` fails the run for good (`dead`).
    fn from(err: E) -> Self {
        let source = err.into();
        let class = if source.is::<crate::MissingState>() {
            ErrorClass::Permanent
        } else {
            ErrorClass::Transient
        };
        JobError { class, source }
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobError")
            .field("class", &self.class)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.source, f)
    }
}

/// What a job body may return: `()` or `Result<(), E>` with `E: Into<JobError>`.
pub trait IntoJobResult {
    /// Converts into the runtime's result.
    fn into_job_result(self) -> JobResult;
}

impl IntoJobResult for () {
    fn into_job_result(self) -> JobResult {
        Ok(())
    }
}

impl<E: Into<JobError>> IntoJobResult for Result<(), E> {
    fn into_job_result(self) -> JobResult {
        self.map_err(Into::into)
    }
}

/// A job found by [`SchedulerBuilder::discover`](crate::SchedulerBuilder::discover): submitted by
/// `#[scheduled]` through `inventory`.
#[doc(hidden)]
pub struct Registration(pub fn() -> Job);

inventory::collect!(Registration);

pub(crate) fn discovered() -> impl Iterator<Item = Job> {
    inventory::iter::<Registration>.into_iter().map(|r| (r.0)())
}
