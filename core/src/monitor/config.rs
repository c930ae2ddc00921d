//! [`MonitorConfig`]: what a monitor is told about the job, derived from its definition.

use std::time::Duration;

/// The check-in margin of a job without a [deadline](crate::Job::deadline): one minute, the
/// smallest Sentry takes.
pub const DEFAULT_MARGIN: Duration = Duration::from_secs(60);

/// A job's monitor settings, derived from the job at `build()`: monitors that create or update the
/// monitor on their side (Sentry's `monitor_config`) send them along.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MonitorConfig {
    /// The cron expression as given (five or six fields, or a macro such as `@daily`).
    pub cron: String,
    /// The IANA zone the expression is read in.
    pub zone: String,
    /// How late a start may be before the monitor counts it missed: the job's
    /// [deadline](crate::Job::deadline), else [`DEFAULT_MARGIN`].
    pub margin: Duration,
    /// How long a run may take before the monitor counts it timed out: the job's
    /// [timeout](crate::Job::timeout), if it has one.
    pub max_runtime: Option<Duration>,
}

impl MonitorConfig {
    /// Settings for `cron` in `zone` with the [`DEFAULT_MARGIN`] and no maximum runtime: what a
    /// monitor's own tests build; the scheduler derives them from each job.
    pub fn new(cron: impl Into<String>, zone: impl Into<String>) -> Self {
        MonitorConfig {
            cron: cron.into(),
            zone: zone.into(),
            margin: DEFAULT_MARGIN,
            max_runtime: None,
        }
    }

    /// The same settings with `margin`.
    #[must_use]
    pub fn with_margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// The same settings with a maximum runtime.
    #[must_use]
    pub fn with_max_runtime(mut self, limit: Duration) -> Self {
        self.max_runtime = Some(limit);
        self
    }

    /// The settings of a job on `cron` in `zone`, with its deadline and timeout, if any.
    pub(crate) fn for_job(
        cron: &str,
        zone: &str,
        deadline: Option<Duration>,
        timeout: Option<Duration>,
    ) -> Self {
        MonitorConfig {
            cron: cron.to_owned(),
            zone: zone.to_owned(),
            margin: deadline.unwrap_or(DEFAULT_MARGIN),
            max_runtime: timeout,
        }
    }
}
