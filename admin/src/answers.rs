//! What the admin API answers: a job as operators see it, and what each change did.

use chrono::{DateTime, Utc};
use slotguard::store::{JobRecord, RunRecord};

use crate::{AdminError, MissedSlot, shown};

/// A job as operators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStatus {
    /// The stored definition and pause state.
    pub record: JobRecord,
    /// The next slots, from now (empty if the stored schedule cannot be read by this version).
    pub next_slots: Vec<DateTime<Utc>>,
    /// The newest run, if any.
    pub last_run: Option<RunRecord>,
    /// The live replicas that run the job's bodies (role `all` or `worker`), by id: none means no
    /// process runs it now (every replica that had it is gone, only a `scheduler` queues it, or it
    /// was removed from the code).
    pub replicas: Vec<String>,
}

impl JobStatus {
    /// Whether a live replica runs the job.
    pub fn active(&self) -> bool {
        !self.replicas.is_empty()
    }
}

/// A run [`Admin::retry`](crate::Admin::retry) made due again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retried {
    /// The run, `pending` and due now.
    pub run: RunRecord,
    /// Whether the job was paused when the retry was accepted: then the attempt waits (`pending`)
    /// and starts after the job is resumed.
    pub job_paused: bool,
}

impl Retried {
    /// What happens to the run next, in one sentence, as the HTTP router answers it (`message`).
    pub fn outlook(&self) -> &'static str {
        if self.job_paused {
            "the job is paused, so the attempt waits (pending) and starts after the job is resumed"
        } else {
            "a replica running the job starts the next attempt within one recovery poll (10 s by \
             default), or, while none is up, when one starts"
        }
    }
}

/// A manual run, created by [`Admin::trigger`](crate::Admin::trigger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Triggered {
    /// The new run.
    pub run_id: i64,
    /// Its slot: now, to the millisecond, never on a whole second, so it cannot collide with a
    /// scheduled slot.
    pub scheduled_at: DateTime<Utc>,
    /// Whether the job was paused when the run was created: then the run stays `pending` and no
    /// replica starts it until the job is resumed.
    pub paused: bool,
    /// The live replicas that run the job's bodies, by id, as the replica registry listed them
    /// when the run was created ([`JobStatus::replicas`]): none means that no process will start
    /// the run until one that runs the job starts.
    pub replicas: Vec<String>,
}

impl Triggered {
    /// What happens to the run next, in one sentence, as the CLI prints it and the HTTP router
    /// answers it (`message`): it waits for the resume of a paused job, is started by one of the
    /// live replicas running the job, or waits for one to start when the registry lists none.
    pub fn outlook(&self) -> String {
        if self.paused {
            return "queued; the job is paused, so the run waits (pending) and runs after it is \
                    resumed"
                .to_owned();
        }
        match self.replicas.as_slice() {
            [] => "queued; no live replica runs the job (the replica registry lists none), so the \
                   run waits (pending) until a process that runs the job starts"
                .to_owned(),
            [one] => format!(
                "queued; the live replica {} runs the job and starts it within one recovery poll \
                 (10 s by default)",
                shown(one)
            ),
            [first, rest @ ..] => format!(
                "queued; one of the {} live replicas running the job ({} and {} more) starts it \
                 within one recovery poll (10 s by default)",
                rest.len() + 1,
                shown(first),
                rest.len()
            ),
        }
    }
}

/// How a backfill runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackfillOptions {
    /// Only report what would be created.
    pub dry_run: bool,
    /// Runs that become due per second (spread by `next_attempt_at`), so a backfill never storms.
    pub per_second: f64,
    /// Whether the range may reach before the job was first registered
    /// ([`JobRecord::registered_at`]): backfilling history from before the job existed is
    /// legitimate, but must be asked for (HTTP `beforeFirstSeen`, CLI `--before-first-seen`).
    pub before_first_seen: bool,
}

impl BackfillOptions {
    /// Checks the rate: a number from [`MIN_PER_SECOND`](crate::MIN_PER_SECOND) to
    /// [`MAX_PER_SECOND`](crate::MAX_PER_SECOND).
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for the field `perSecond`.
    pub fn validate(&self) -> Result<(), AdminError> {
        crate::parse::check_rate("perSecond", self.per_second).map(drop)
    }

    /// When the `index`th run of a backfill started at `now` becomes due.
    pub(crate) fn due(
        &self,
        now: DateTime<Utc>,
        index: usize,
    ) -> Result<DateTime<Utc>, AdminError> {
        // Bounded by the checks: at most MAX_BACKFILL_SLOTS / MIN_PER_SECOND seconds, 1e12 µs.
        let micros = (index as f64 * 1e6 / self.per_second).round() as i64;
        now.checked_add_signed(chrono::Duration::microseconds(micros))
            .ok_or_else(|| AdminError::Invalid {
                field: "perSecond",
                problem: "the runs would be due after the last instant this version can store"
                    .into(),
            })
    }
}

impl Default for BackfillOptions {
    fn default() -> Self {
        BackfillOptions {
            dry_run: true,
            per_second: 1.0,
            before_first_seen: false,
        }
    }
}

/// What a backfill created, or would create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillReport {
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// The missing slots in the range, oldest first.
    pub slots: Vec<MissedSlot>,
    /// Runs created (0 for a dry run).
    pub created: usize,
    /// Slots of the range that have a row already (a run, or a record of why not), before or while
    /// the backfill looked, and were left alone.
    pub existing: usize,
    /// When the last created run becomes due.
    pub last_due: Option<DateTime<Utc>>,
}
