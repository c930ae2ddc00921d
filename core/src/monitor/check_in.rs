//! [`CheckIn`]: one event of a run, as a monitor receives it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::store::Trigger;

use super::MonitorConfig;

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckInStatus {
    /// The body started.
    InProgress,
    /// The body succeeded.
    Ok,
    /// The body failed, panicked, timed out or was abandoned (shutdown, lost ownership).
    Error,
}

impl CheckInStatus {
    /// `in_progress`, `ok` or `error`: Sentry's words.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckInStatus::InProgress => "in_progress",
            CheckInStatus::Ok => "ok",
            CheckInStatus::Error => "error",
        }
    }
}

impl fmt::Display for CheckInStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One check-in: the start or the end of one attempt of a job.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CheckIn {
    /// The job's name.
    pub job: Arc<str>,
    /// The slot's instant.
    pub scheduled_at: DateTime<Utc>,
    /// The partition key; empty when the job is not partitioned.
    pub partition: Arc<str>,
    /// The attempt number (1 without a slot row).
    pub attempt: u32,
    /// The run's id in the store (`None` below the `slot` level).
    pub run_id: Option<i64>,
    /// Why the run exists.
    pub trigger: Trigger,
    /// Started, succeeded or failed.
    pub status: CheckInStatus,
    /// What went wrong, for [`CheckInStatus::Error`].
    pub error: Option<String>,
    /// How long the body ran; `None` for [`CheckInStatus::InProgress`].
    pub duration: Option<Duration>,
    /// The job's monitor settings.
    pub config: Arc<MonitorConfig>,
}

impl CheckIn {
    /// An id shared by the check-ins of one attempt, in UUID form (32 hex digits, dashed): Sentry's
    /// `check_in_id`. Derived from the job, slot, partition, attempt and run id, so every replica
    /// and every retry of a call names the attempt the same way.
    pub fn id(&self) -> String {
        let key = format!(
            "{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{:?}\u{1f}{}",
            self.job,
            self.scheduled_at.timestamp_micros(),
            self.partition,
            self.attempt,
            self.run_id,
            self.trigger
        );
        let high = crate::policy::fnv1a(key.bytes());
        let low = crate::policy::fnv1a(key.bytes().chain(*b"/low"));
        // A version-8 (custom) UUID: the version nibble and the variant bits set, the rest hashed.
        let high = (high & !0xf000) | 0x8000;
        let low = (low & !(0b11 << 62)) | (0b10 << 62);
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            high >> 32,
            (high >> 16) & 0xffff,
            high & 0xffff,
            low >> 48,
            low & 0xffff_ffff_ffff
        )
    }
}
