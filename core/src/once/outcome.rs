//! What a run-once process did, and the exit code that tells Kubernetes or systemd.

use std::fmt;
use std::process::ExitCode;

use chrono::{DateTime, Utc};

use crate::operate::rfc3339;
use crate::store::RunStatus;

/// How [`Scheduler::run_once`](crate::Scheduler::run_once) ended. [`exit_code`](Self::exit_code)
/// is what the process should exit with:
///
/// | outcome | exit | Kubernetes Job | systemd |
/// |---|---|---|---|
/// | `Succeeded` | 0 | complete | success |
/// | `Suppressed` (another process ran or runs the slot, or the job is paused) | 0 | complete | success |
/// | `Failed`, `Abandoned`, `Unfinished` (the slot's run waits for an attempt this process could not start) | 1 | retried up to `backoffLimit`; the retry is the slot's next attempt | failed (`Restart=on-failure` retries) |
/// | [`RunOnceError`]: bad input (unknown job, not a slot of its schedule, not due, a configuration that cannot work) | 2 | fail the Job (`podFailurePolicy` `FailJob` on 2) | failed |
/// | `TooLate` (older than the job's catch-up window; recorded `skipped`) | 3 | fail the Job (`FailJob` on 3) | failed |
/// | [`RunOnceError::Store`] (store unreachable, or its file or database cannot be opened) | 4 | retried | failed (`Restart=on-failure` retries) |
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOnce {
    /// This process ran the body and it succeeded.
    Succeeded {
        /// The attempt it was.
        attempt: u32,
    },
    /// This process ran the body and it failed.
    Failed {
        /// The attempt it was.
        attempt: u32,
        /// The error.
        message: String,
    },
    /// This process ran the body and it stopped without an outcome (shutdown, lost ownership).
    Abandoned {
        /// The attempt it was.
        attempt: u32,
        /// Why.
        reason: String,
    },
    /// Another process ran the slot or runs it now, or the job is paused: this one did nothing.
    Suppressed {
        /// The process that holds or held the slot's latest attempt.
        owner: Option<String>,
        /// The slot row's status when this process gave up following it.
        status: Option<RunStatus>,
        /// The row's message, or why nothing ran.
        reason: String,
    },
    /// The slot's run waits for another attempt (an earlier one failed, was handed over or was
    /// fenced) that this process could not start in time: the job stayed busy, or the attempt is
    /// due too late to wait for. Exits 1, so that the trigger starts the slot again.
    Unfinished {
        /// The slot row's status.
        status: Option<RunStatus>,
        /// The row's message.
        reason: String,
    },
    /// The slot is older than the job's catch-up window: refused, and recorded `skipped`.
    TooLate {
        /// The slot.
        slot: DateTime<Utc>,
    },
}

impl RunOnce {
    /// The exit code for this outcome (see the table above).
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code())
    }

    /// The exit code as a number.
    pub fn code(&self) -> u8 {
        match self {
            RunOnce::Succeeded { .. } | RunOnce::Suppressed { .. } => 0,
            RunOnce::Failed { .. } | RunOnce::Abandoned { .. } | RunOnce::Unfinished { .. } => 1,
            RunOnce::TooLate { .. } => 3,
        }
    }
}

impl fmt::Display for RunOnce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunOnce::Succeeded { attempt } => write!(f, "succeeded (attempt {attempt})"),
            RunOnce::Failed { attempt, message } => {
                write!(f, "failed (attempt {attempt}): {message}")
            }
            RunOnce::Abandoned { attempt, reason } => {
                write!(f, "abandoned (attempt {attempt}): {reason}")
            }
            RunOnce::Suppressed {
                owner,
                status,
                reason,
            } => {
                write!(f, "suppressed: ")?;
                match (owner, status) {
                    (Some(owner), Some(status)) => write!(f, "{owner} has it, {status}")?,
                    (None, Some(status)) => write!(f, "the slot is {status}")?,
                    _ => write!(f, "nothing ran here")?,
                }
                if !reason.is_empty() {
                    write!(f, " ({reason})")?;
                }
                Ok(())
            }
            RunOnce::Unfinished { status, reason } => {
                write!(
                    f,
                    "not run: the slot's run waits for an attempt this process could not start"
                )?;
                if let Some(status) = status {
                    write!(f, " (it is {status}")?;
                    if !reason.is_empty() {
                        write!(f, ": {reason}")?;
                    }
                    write!(f, ")")?;
                }
                write!(f, "; start it again")
            }
            RunOnce::TooLate { slot } => write!(
                f,
                "refused: slot {} is older than the job's catch-up window (recorded skipped)",
                rfc3339(slot)
            ),
        }
    }
}

/// Why [`Scheduler::run_once`](crate::Scheduler::run_once) could not run a slot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunOnceError {
    /// No job of that name is linked into this binary.
    #[error("unknown job `{0}`")]
    UnknownJob(String),
    /// The instant is not a slot of the job's schedule (check the trigger's schedule and zone).
    #[error("{} is not a slot of the job's schedule", rfc3339(slot))]
    NotASlot {
        /// The instant asked for.
        slot: DateTime<Utc>,
    },
    /// The slot is in the future.
    #[error("slot {} is not due yet (now {})", rfc3339(slot), rfc3339(now))]
    NotDue {
        /// The slot.
        slot: DateTime<Utc>,
        /// The scheduler's time.
        now: DateTime<Utc>,
    },
    /// The job is partitioned: run-once runs unpartitioned jobs only (use workers for partitions).
    #[error("the job is partitioned; run-once runs unpartitioned jobs only")]
    Partitioned,
    /// Where the slot should come from gave none, or an unreadable one.
    #[error("no slot: {0}")]
    NoSlot(String),
    /// The store could not be asked: unreachable (PostgreSQL down, a connection refused or timed
    /// out), or its file or database could not be opened or migrated. Worth retrying: exit 4.
    #[error("store: {0}")]
    Store(#[source] crate::store::StoreError),
    /// The program's configuration cannot work, whenever it is retried: a store URL or schema name
    /// that is invalid, a job that [`SchedulerBuilder::build`](crate::SchedulerBuilder::build)
    /// refuses, a setting missing. Exit 2.
    #[error("configuration: {0}")]
    Config(String),
}

impl From<crate::BuildError> for RunOnceError {
    /// A job or setting `build()` refused: bad input, exit 2.
    fn from(e: crate::BuildError) -> Self {
        RunOnceError::Config(e.to_string())
    }
}

impl RunOnceError {
    /// 4 when the store could not be asked or opened (worth retrying), 2 for bad input or a
    /// configuration that cannot work.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code())
    }

    /// The exit code as a number.
    pub fn code(&self) -> u8 {
        match self {
            RunOnceError::Store(_) => 4,
            _ => 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    /// Issue 21, point 8: instants are printed in RFC 3339, without nanoseconds.
    #[test]
    fn instants_are_rfc3339_without_nanoseconds() {
        let slot = at("2026-12-02T02:00:00Z");
        let now = at("2026-12-02T01:59:58.123456789Z");
        let texts = [
            RunOnce::TooLate { slot }.to_string(),
            RunOnceError::NotDue { slot, now }.to_string(),
            RunOnceError::NotASlot { slot: now }.to_string(),
        ];
        assert!(
            texts[0].contains("slot 2026-12-02T02:00:00Z "),
            "{}",
            texts[0]
        );
        assert_eq!(
            texts[1],
            "slot 2026-12-02T02:00:00Z is not due yet (now 2026-12-02T01:59:58.123Z)"
        );
        assert!(
            texts[2].starts_with("2026-12-02T01:59:58.123Z "),
            "{}",
            texts[2]
        );
        for text in texts {
            assert!(!text.contains("UTC") && !text.contains("456789"), "{text}");
        }
    }
}
