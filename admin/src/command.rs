//! Every change an operator can make, as one type: the HTTP router, the dashboard and the CLI each
//! read their own input into a [`Command`] and hand it to [`Admin::execute`], so a change means the
//! same, is checked the same and is audited the same whichever front end asked for it.

use chrono::{DateTime, Utc};
use slotguard::store::{JobRecord, RunRecord};

use crate::{
    Admin, AdminError, BackfillOptions, BackfillReport, ChangeRequest, RangeRetry, Retried,
    Triggered,
};

/// A change to a job or a run. Reads (listings, one run, missed slots, the audit trail) are
/// [`Admin`]'s methods; every write is a `Command`.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Stop claiming the job's slots ([`Admin::pause`]).
    Pause {
        /// The job.
        job: String,
    },
    /// Claim the job's slots again ([`Admin::resume`]).
    Resume {
        /// The job.
        job: String,
    },
    /// A new attempt of a finished run ([`Admin::retry`]).
    Retry {
        /// The job.
        job: String,
        /// The run's slot.
        slot: DateTime<Utc>,
        /// The run's partition key; empty for an unpartitioned run.
        partition: String,
    },
    /// A new attempt of every `failed` or `dead` run of a range ([`Admin::retry_failed`]).
    RetryFailed {
        /// The job.
        job: String,
        /// The first slot of the range.
        from: DateTime<Utc>,
        /// The end of the range, excluded.
        to: DateTime<Utc>,
        /// One partition; `None` is every partition.
        partition: Option<String>,
    },
    /// End a `running` or `pending` run `failed` ([`Admin::cancel`]).
    Cancel {
        /// The job.
        job: String,
        /// The run's slot.
        slot: DateTime<Utc>,
        /// The run's partition key; empty for an unpartitioned run.
        partition: String,
    },
    /// A manual run now ([`Admin::trigger`]).
    Trigger {
        /// The job.
        job: String,
    },
    /// Runs for the slots of a range that have none ([`Admin::backfill`]).
    Backfill {
        /// The job.
        job: String,
        /// The first slot of the range.
        from: DateTime<Utc>,
        /// The end of the range, excluded.
        to: DateTime<Utc>,
        /// Dry run, rate, and whether the range may reach before the job was first registered.
        options: BackfillOptions,
    },
}

impl Command {
    /// The job the command changes.
    pub fn job(&self) -> &str {
        match self {
            Command::Pause { job }
            | Command::Resume { job }
            | Command::Retry { job, .. }
            | Command::RetryFailed { job, .. }
            | Command::Cancel { job, .. }
            | Command::Trigger { job }
            | Command::Backfill { job, .. } => job,
        }
    }

    /// The command's name, as the HTTP routes and the dashboard's forms name it (`pause`,
    /// `retry-failed`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Pause { .. } => "pause",
            Command::Resume { .. } => "resume",
            Command::Retry { .. } => "retry",
            Command::RetryFailed { .. } => "retry-failed",
            Command::Cancel { .. } => "cancel",
            Command::Trigger { .. } => "trigger",
            Command::Backfill { .. } => "backfill",
        }
    }
}

/// What a [`Command`] did: one variant per command.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The job, paused.
    Paused(JobRecord),
    /// The job, resumed.
    Resumed(JobRecord),
    /// The run, due again.
    Retried(Retried),
    /// The runs retried, and those that changed before their turn.
    RetriedRange(RangeRetry),
    /// The run, ended `failed`.
    Cancelled(RunRecord),
    /// The manual run.
    Triggered(Triggered),
    /// What the backfill created, or would create.
    Backfilled(BackfillReport),
}

impl Admin {
    /// Carries out `command` for `by`, who is audited with the reason. The one door of every
    /// front end's writes: see each command's method for what it does and when it is refused.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for a malformed field, actor or reason; [`AdminError::UnknownJob`]
    /// and [`AdminError::UnknownRun`]; [`AdminError::Refused`] when the run's status does not
    /// allow the change, [`AdminError::PauseState`] when the job already is as asked;
    /// [`AdminError::Store`] when the store could not be asked. Nothing was changed, except by a
    /// range retry that failed on the store part-way ([`Admin::retry_failed`]).
    pub async fn execute(
        &self,
        command: Command,
        by: &ChangeRequest,
    ) -> Result<Outcome, AdminError> {
        Ok(match command {
            Command::Pause { job } => Outcome::Paused(self.pause(&job, by).await?),
            Command::Resume { job } => Outcome::Resumed(self.resume(&job, by).await?),
            Command::Retry {
                job,
                slot,
                partition,
            } => Outcome::Retried(self.retry(&job, slot, &partition, by).await?),
            Command::RetryFailed {
                job,
                from,
                to,
                partition,
            } => Outcome::RetriedRange(
                self.retry_failed(&job, (from, to), partition.as_deref(), by)
                    .await?,
            ),
            Command::Cancel {
                job,
                slot,
                partition,
            } => Outcome::Cancelled(self.cancel(&job, slot, &partition, by).await?),
            Command::Trigger { job } => Outcome::Triggered(self.trigger(&job, by).await?),
            Command::Backfill {
                job,
                from,
                to,
                options,
            } => Outcome::Backfilled(self.backfill(&job, from, to, options, by).await?),
        })
    }
}
