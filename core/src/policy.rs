//! Per-job policies: what happens on overlap, and how failed runs are retried.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What happens when a slot falls due while a run of the same job (and partition) is still going
/// anywhere in the cluster. Decided by the store at claim time, and recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Overlap {
    /// The new slot is recorded `skipped` with the reason, and does not run (default).
    #[default]
    Skip,
    /// The new slot waits (`pending`) and runs once the running one ends; a newer slot that falls due
    /// meanwhile replaces it (the older waiting one is recorded `skipped`). At most one waits.
    BufferOne,
    /// The new slot runs alongside.
    Allow,
    /// The running one is told to stop (it loses ownership and is recorded `abandoned`, reason
    /// `replaced`), and the new slot runs.
    Replace,
}

impl Overlap {
    /// The policy's name as written in attributes and stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer_one",
            Overlap::Allow => "allow",
            Overlap::Replace => "replace",
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An overlap policy name that is not one of `skip`, `buffer_one`, `allow`, `replace`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown overlap policy `{0}`: expected skip, buffer_one, allow or replace")]
pub struct UnknownOverlap(pub String);

impl FromStr for Overlap {
    type Err = UnknownOverlap;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            Overlap::Skip,
            Overlap::BufferOne,
            Overlap::Allow,
            Overlap::Replace,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
        .ok_or_else(|| UnknownOverlap(s.chars().take(64).collect()))
    }
}

/// How a failed run is retried: a new attempt of the same run (same slot, same idempotency key), after a
/// capped exponential backoff with jitter.
///
/// The default follows the seed article: at most 3 attempts, waiting `min(3600, 2^attempt × 30)`
/// seconds, jittered down by up to a fifth so that replicas do not retry in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included. `1` means never retry.
    pub max_attempts: u32,
    /// The wait after the first failed attempt, doubled after each further one.
    pub base: Duration,
    /// The longest wait.
    pub cap: Duration,
    /// Whether to shorten each wait by a random amount up to a fifth.
    pub jitter: bool,
    /// A limit on each attempt; an attempt that runs longer fails with a transient error.
    pub timeout: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base: Duration::from_secs(60),
            cap: Duration::from_secs(3600),
            jitter: true,
            timeout: None,
        }
    }
}

impl RetryPolicy {
    /// Never retry.
    pub fn never() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// `max_attempts` attempts, waiting `base`, `2 × base`, ... up to `cap` in between.
    pub fn exponential(max_attempts: u32, base: Duration, cap: Duration) -> Self {
        RetryPolicy {
            max_attempts: max_attempts.max(1),
            base,
            cap,
            ..RetryPolicy::default()
        }
    }

    /// The same policy without jitter (for tests and predictable schedules).
    #[must_use]
    pub fn without_jitter(mut self) -> Self {
        self.jitter = false;
        self
    }

    /// The same policy with a limit on each attempt.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The wait before the attempt after `attempt` (1-based) failed, or `None` when `attempt` was the
    /// last one allowed.
    pub fn delay_after(&self, attempt: u32) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let doublings = attempt.saturating_sub(1).min(32);
        let wait = self
            .base
            .checked_mul(1 << doublings)
            .unwrap_or(self.cap)
            .min(self.cap);
        Some(if self.jitter {
            wait.mul_f64(1.0 - 0.2 * random_fraction())
        } else {
            wait
        })
    }
}

/// What happens to a run after a failed attempt, by [`RetryPolicy::after_failure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AfterFailure {
    /// Another attempt, this long from now.
    Retry(Duration),
    /// Transient, but the attempts are used up: a person has to look (`dead`).
    Exhausted,
    /// No retry was configured (`failed`), or the error is permanent (`dead`).
    Final,
}

impl RetryPolicy {
    /// The decision after attempt number `attempt` failed with an error of `class`.
    pub(crate) fn after_failure(&self, class: crate::ErrorClass, attempt: u32) -> AfterFailure {
        match (class, self.delay_after(attempt)) {
            (crate::ErrorClass::Permanent, _) => AfterFailure::Final,
            (crate::ErrorClass::Transient, Some(wait)) => AfterFailure::Retry(wait),
            (crate::ErrorClass::Transient, None) if self.max_attempts > 1 => {
                AfterFailure::Exhausted
            }
            (crate::ErrorClass::Transient, None) => AfterFailure::Final,
        }
    }
}

fn random_fraction() -> f64 {
    use std::hash::{BuildHasher, RandomState};
    (RandomState::new().hash_one(std::time::SystemTime::now()) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = RetryPolicy::exponential(10, Duration::from_secs(30), Duration::from_secs(3600))
            .without_jitter();
        let waits: Vec<_> = (1..10)
            .map(|a| p.delay_after(a).unwrap().as_secs())
            .collect();
        assert_eq!(waits, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert_eq!(p.delay_after(10), None);
        assert_eq!(RetryPolicy::never().delay_after(1), None);
    }

    #[test]
    fn jitter_only_shortens_by_up_to_a_fifth() {
        let p = RetryPolicy::exponential(5, Duration::from_secs(100), Duration::from_secs(1000));
        for _ in 0..200 {
            let d = p.delay_after(2).unwrap();
            assert!(
                d <= Duration::from_secs(200) && d >= Duration::from_secs(160),
                "{d:?}"
            );
        }
    }

    #[test]
    fn overlap_names_round_trip() {
        for o in [
            Overlap::Skip,
            Overlap::BufferOne,
            Overlap::Allow,
            Overlap::Replace,
        ] {
            assert_eq!(o.as_str().parse::<Overlap>().unwrap(), o);
        }
        assert!("queue".parse::<Overlap>().is_err());
    }
}

/// What to do, at start-up, with the slots of a job that fell due while no replica was running.
///
/// Missed slots are those of the schedule after the job's latest row (its watermark) up to now, with
/// no row. A job that has no row at all (a new job) catches up nothing. Catch-up runs are created once
/// for the whole cluster (`UNIQUE(job, slot)`), marked `catch_up`, and become due at the scheduler's
/// [`catch_up_rate`](crate::SchedulerBuilder::catch_up_rate) with a jitter that every replica computes
/// the same for a given `(job, slot)`, so a long outage never turns into a storm. Needs the `slot`
/// guard level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CatchUp {
    /// Run nothing that was missed (the default, as cron does). The gap stays visible to
    /// `Admin::missed` of the `slotguard-admin` crate.
    #[default]
    Skip,
    /// Run only the most recent missed slot (a report that should reflect the latest state).
    Latest,
    /// Run every missed slot no older than `within`, at most the `max_slots` most recent ones (a
    /// settlement that must run for every business date).
    All {
        /// How far back to look.
        within: Duration,
        /// The most runs to create.
        max_slots: usize,
    },
}

impl CatchUp {
    /// The policy's name: `skip`, `latest` or `all`.
    pub const fn as_str(self) -> &'static str {
        match self {
            CatchUp::Skip => "skip",
            CatchUp::Latest => "latest",
            CatchUp::All { .. } => "all",
        }
    }
}

/// A deterministic offset in `[0, spread)` for `(job, slot)`: every replica computes the same one.
pub(crate) fn slot_jitter(job: &str, slot_ms: i64, spread: Duration) -> Duration {
    let hash = fnv1a(job.bytes().chain(slot_ms.to_le_bytes()));
    let nanos = spread.as_nanos();
    if nanos == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos((u128::from(hash) % nanos) as u64)
}

/// FNV-1a 64 of `bytes`: stable across builds, platforms and Rust versions, so that every replica
/// derives the same value.
pub(crate) fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// How much exclusion a job gets. Levels are cumulative: each includes the ones before it.
///
/// | level | chain | guarantee |
/// |---|---|---|
/// | `none` | job | nothing |
/// | `local` | running flag | no overlap inside one process |
/// | `lock` | flag → advisory lock | no concurrent run across the cluster; no history |
/// | `slot` | flag → lock → slot row | each slot claimed once across the cluster, with history, recovery and retries |
///
/// The default is `slot` when the scheduler has a backend and `local` when it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GuardLevel {
    /// No exclusion at all.
    None,
    /// A per-process running flag.
    Local,
    /// The flag and a cluster-wide lock.
    Lock,
    /// The flag, the lock and a slot row.
    Slot,
}

impl GuardLevel {
    /// The level's name as written in attributes and logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            GuardLevel::None => "none",
            GuardLevel::Local => "local",
            GuardLevel::Lock => "lock",
            GuardLevel::Slot => "slot",
        }
    }
}

impl fmt::Display for GuardLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A guard level name that is not one of `none`, `local`, `lock`, `slot`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown guard level `{0}`: expected none, local, lock or slot")]
pub struct UnknownGuardLevel(pub String);

impl FromStr for GuardLevel {
    type Err = UnknownGuardLevel;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            GuardLevel::None,
            GuardLevel::Local,
            GuardLevel::Lock,
            GuardLevel::Slot,
        ]
        .into_iter()
        .find(|l| l.as_str() == s)
        .ok_or_else(|| UnknownGuardLevel(s.chars().take(64).collect()))
    }
}
