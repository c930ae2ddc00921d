//! What `build()` answers when a job or a setting cannot work.

use std::fmt;

use slotguard_cron::{ScheduleError, UnknownZone};

use crate::guard::GuardLevel;
use crate::role::Role;
use crate::store::Capability;

/// One or more jobs or settings were rejected by [`SchedulerBuilder::build`](super::SchedulerBuilder::build)(super::SchedulerBuilder::build).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct BuildError {
    /// Every problem found, in the order the jobs were given.
    pub problems: Vec<ConfigError>,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problems.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                write!(
                    f,
                    "{} problems in the scheduler's configuration:",
                    many.len()
                )?;
                for p in many {
                    write!(f, "\n  - {p}")?;
                }
                Ok(())
            }
        }
    }
}

/// One problem found by [`SchedulerBuilder::build`](super::SchedulerBuilder::build)(super::SchedulerBuilder::build).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The job's expression or zone is invalid.
    #[error("job `{job}`: {source}")]
    Schedule {
        /// The job's name.
        job: String,
        /// What is wrong.
        source: ScheduleError,
    },
    /// The job's business calendar cannot be found, or its convention or shift cannot be used.
    #[error("job `{job}`: calendar: {source}")]
    Calendar {
        /// The job's name.
        job: String,
        /// What is wrong.
        source: crate::CalendarSettingError,
    },
    /// The job's name cannot be stored or shown safely.
    #[error("job `{job}`: invalid name: {reason}")]
    InvalidName {
        /// The name, shortened and escaped.
        job: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Two jobs share a name; names identify slots, so they must be unique.
    #[error("job `{job}`: registered twice (job names must be unique)")]
    DuplicateName {
        /// The name.
        job: String,
    },
    /// The job needs a store and the scheduler has none.
    #[error("job `{job}`: guard level `{level}` needs {}", needed(*.level))]
    NeedsBackend {
        /// The job's name.
        job: String,
        /// Its level.
        level: GuardLevel,
    },
    /// Two jobs would share a lock.
    #[error("jobs `{first}` and `{second}` both use lock key {key}; give one an explicit lock_key")]
    LockKeyCollision {
        /// The key.
        key: i64,
        /// The job registered first.
        first: String,
        /// The job registered second.
        second: String,
    },
    /// The job asks for something only the `slot` level can give.
    #[error("job `{job}`: {what} needs the `slot` guard level")]
    NeedsSlotLevel {
        /// The job's name.
        job: String,
        /// What it asked for.
        what: &'static str,
    },
    /// The store lacks a capability that a task of this process's role needs: a store given as a
    /// [`Store`](crate::store::Store) without that trait (a [`Backend`](crate::store::Backend) has
    /// every one).
    #[error(
        "store `{store}`: the `{role}` role's {task} needs {capability}, which this store does not have"
    )]
    MissingCapability {
        /// The store's name.
        store: &'static str,
        /// The role.
        role: Role,
        /// The task of the role that needs it (`timer`, `worker loop`, `catch-up`, …).
        task: &'static str,
        /// The capability.
        capability: Capability,
    },
    /// The default zone is invalid.
    #[error("default zone: {0}")]
    DefaultZone(UnknownZone),
    /// A scheduler setting is out of range.
    #[error("setting `{setting}`: {problem}")]
    Setting {
        /// The builder method.
        setting: &'static str,
        /// What is wrong.
        problem: String,
    },
}

/// What a level needs that the scheduler lacks, for [`ConfigError::NeedsBackend`].
fn needed(level: GuardLevel) -> &'static str {
    match level {
        GuardLevel::Lock => {
            "a backend or a lock store (SchedulerBuilder::backend or SchedulerBuilder::lock_store)"
        }
        _ => "a backend (SchedulerBuilder::backend)",
    }
}
