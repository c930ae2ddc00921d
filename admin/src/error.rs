//! Why an admin operation did not happen.

use chrono::{DateTime, Utc};
use slotguard::store::{RunStatus, StoreError};

use crate::{rfc3339, shown};

/// Why an admin operation did not happen. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// No scheduler registered a job with that name.
    #[error("unknown job `{job}`: no scheduler has registered it")]
    UnknownJob {
        /// The name asked for, escaped and shortened.
        job: String,
    },
    /// The job has no run for that slot.
    #[error(
        "job `{job}` has no run for slot {}{}",
        rfc3339(slot),
        partition_note(partition)
    )]
    UnknownRun {
        /// The job.
        job: String,
        /// The slot asked for.
        slot: DateTime<Utc>,
        /// The partition asked for.
        partition: String,
    },
    /// The run's status does not allow the change.
    #[error(
        "{action} refused for job `{job}` slot {}: the run is {status}; {hint}",
        rfc3339(slot)
    )]
    Refused {
        /// The change asked for.
        action: &'static str,
        /// The job.
        job: String,
        /// The slot.
        slot: DateTime<Utc>,
        /// The run's status.
        status: RunStatus,
        /// What the operator can do instead.
        hint: &'static str,
    },
    /// The job is already in the pause state asked for: a second pause (which would replace who
    /// paused it and why) or the resume of an active job. Nothing was changed or audited.
    #[error("{action} refused for job `{job}`: {state}")]
    PauseState {
        /// `pause` or `resume`.
        action: &'static str,
        /// The job.
        job: String,
        /// How it stands: who paused it, when and why, or that it is not paused.
        state: String,
    },
    /// A field of the request is malformed or out of bounds.
    #[error("invalid {field}: {problem}")]
    Invalid {
        /// The field, named as the HTTP API's body key or query parameter is (`perSecond`,
        /// `scheduleSlot`, `partition`), or `range` for a `from`/`to` pair.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// No stored schedule has that id.
    #[error("unknown schedule `{id}`")]
    UnknownSchedule {
        /// The id asked for, escaped and shortened.
        id: String,
    },
    /// A schedule with that id exists already: change it instead (with its version).
    #[error(
        "schedule `{id}` exists already (version {version}); change it with that version, or remove it first"
    )]
    ScheduleExists {
        /// The id.
        id: String,
        /// Its latest version.
        version: i64,
    },
    /// The change was read at an older version of the schedule than the latest: someone changed it
    /// since. Nothing was changed; read it again and decide.
    #[error(
        "schedule `{id}` is at version {current}, not {asked}: it changed since it was read; read it again"
    )]
    StaleVersion {
        /// The id.
        id: String,
        /// The version the change was read at.
        asked: i64,
        /// The latest version.
        current: i64,
    },
    /// The store could not be asked; nothing was changed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn partition_note(partition: &str) -> String {
    if partition.is_empty() {
        String::new()
    } else {
        format!(" (partition `{}`)", shown(partition))
    }
}
