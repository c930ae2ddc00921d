//! What operators read and change: job definitions and pauses, runs and attempts, retries, manual and
//! backfill runs, cancellation, and the audit trail of every change.
//!
//! The [`AdminStore`] trait is mechanism only. Policy (validation, schedules, missed-slot arithmetic,
//! limits) lives in `Admin` (the `slotguard-admin` crate), which every front end (the axum router, the CLI, an
//! application's own code) goes through.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

use super::{ClaimRequest, RunStatus, SlotKey, StoreError, Trigger};

/// A job as a scheduler registered it in the store, so that operators and the CLI can see it and
/// compute its slots without the application's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDefinition {
    /// The job's name.
    pub name: String,
    /// The cron expression, as written.
    pub cron: String,
    /// The IANA zone.
    pub zone: String,
    /// The DST policy's name (`vixie`, `skip`, `shift`, `instant`).
    pub dst: String,
    /// The guard level's name (`none`, `local`, `lock`, `slot`).
    pub guard: String,
    /// The schedule's fingerprint (expression, zone, DST policy, calendar).
    pub fingerprint: u64,
    /// The job's business calendar, convention and shift, when it has one.
    pub calendar: Option<crate::CalendarDefinition>,
}

/// A registered job with its stored pause state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// The definition last registered.
    pub definition: JobDefinition,
    /// Whether the job is paused: no replica claims its slots or retries.
    pub paused: bool,
    /// Who paused it last. A resume keeps the pause on show (who resumed it, and why, is in the
    /// audit trail).
    pub paused_by: Option<String>,
    /// Why it was paused last.
    pub paused_reason: Option<String>,
    /// When it was paused last.
    pub paused_at: Option<DateTime<Utc>>,
    /// When a scheduler first registered the job (store clock): the first slot that can have been
    /// missed, and the earliest a backfill reaches unless it asks to go further back.
    pub registered_at: DateTime<Utc>,
    /// When a scheduler last registered the job.
    pub seen_at: DateTime<Utc>,
}

/// One run (`job_runs` row) with its attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// The run's id.
    pub id: i64,
    /// The slot: job, instant, partition.
    pub key: SlotKey,
    /// Its status.
    pub status: RunStatus,
    /// The number of its latest attempt (0 while none has started).
    pub attempt: u32,
    /// The owner of the latest attempt.
    pub owner: Option<String>,
    /// The fencing token of the latest attempt.
    pub token: i64,
    /// The latest heartbeat (store clock).
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// The staleness threshold of the latest attempt.
    pub stale_after: Duration,
    /// When the next attempt is due, if one is planned.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the row was created.
    pub created_at: DateTime<Utc>,
    /// When the row last changed (heartbeats excluded).
    pub updated_at: DateTime<Utc>,
    /// When the latest attempt started.
    pub started_at: Option<DateTime<Utc>>,
    /// When the run reached its status, if it is final.
    pub finished_at: Option<DateTime<Utc>>,
    /// `transient` or `permanent`, when the run failed.
    pub error_class: Option<String>,
    /// The error, or the reason it was skipped, abandoned or cancelled.
    pub error_message: Option<String>,
    /// The IANA zone of the schedule.
    pub zone: String,
    /// The slot's local wall time.
    pub wall_time: NaiveDateTime,
    /// The slot's business date.
    pub business_date: NaiveDate,
    /// Why the run exists.
    pub trigger: Trigger,
    /// The schedule's fingerprint.
    pub fingerprint: u64,
    /// The calendar the slot was planned on, when its job has one.
    pub calendar: Option<super::CalendarStamp>,
    /// Every attempt, in order.
    pub attempts: Vec<AttemptRecord>,
}

/// One attempt (`job_run_attempts` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    /// From 1.
    pub attempt: u32,
    /// The process that held it.
    pub owner: String,
    /// Its fencing token.
    pub token: i64,
    /// `running` until it ends; then `succeeded`, `failed` or `abandoned`.
    pub status: RunStatus,
    /// When it was claimed (store clock).
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// The error, or the reason it was abandoned.
    pub message: Option<String>,
}

/// Which runs [`AdminStore::runs`] returns: every field that is set must match. Newest slot first.
/// `RunFilter::default()` is every run, a page of
/// [`DEFAULT_PAGE`](crate::operate::DEFAULT_PAGE) (50).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFilter {
    /// Only this job.
    pub job: Option<String>,
    /// Only runs in this status.
    pub status: Option<RunStatus>,
    /// Only this partition (`""` for unpartitioned runs).
    pub partition: Option<String>,
    /// Only slots at or after this instant.
    pub from: Option<DateTime<Utc>>,
    /// Only slots before this instant.
    pub to: Option<DateTime<Utc>>,
    /// At most this many runs (a store may cap it further at 10,000; 0 is none). The admin API
    /// accepts 1 to [`MAX_PAGE`](crate::operate::MAX_PAGE) and refuses anything else.
    pub limit: usize,
}

/// How many runs of one job need a look: running now, queued, and failed since an instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// The job.
    pub job: String,
    /// Runs in `running`.
    pub running: u64,
    /// Runs in `pending`: due, waiting for a retry, for a free moment of the job, or for the
    /// resume of a paused job.
    pub queued: u64,
    /// Runs in `failed`, `dead` or `abandoned` whose slot is at or after the instant asked about.
    pub failed: u64,
}

impl RunCounts {
    /// The counts of `job` as a store's `count(*)` columns give them (never negative).
    pub fn from_counts(job: String, running: i64, queued: i64, failed: i64) -> Self {
        RunCounts {
            job,
            running: running.unsigned_abs(),
            queued: queued.unsigned_abs(),
            failed: failed.unsigned_abs(),
        }
    }

    /// Whether the status counts as failed in [`failed`](Self::failed).
    pub fn is_failure(status: RunStatus) -> bool {
        matches!(
            status,
            RunStatus::Failed | RunStatus::Dead | RunStatus::Abandoned
        )
    }
}

/// Who changes what, and why: written to the audit trail with the change, in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    /// The change: `retry`, `trigger`, `backfill`, `pause`, `resume`, `cancel`.
    pub action: String,
    /// The person or system asking.
    pub actor: String,
    /// Their reason.
    pub reason: String,
}

impl AuditEntry {
    /// `action` by `actor`, for `reason`.
    pub fn new(action: &str, actor: &str, reason: &str) -> Self {
        AuditEntry {
            action: action.to_owned(),
            actor: actor.to_owned(),
            reason: reason.to_owned(),
        }
    }
}

/// One change in the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    /// The record's id, rising.
    pub id: i64,
    /// The job changed.
    pub job: String,
    /// The run changed, for run-level actions.
    pub run_id: Option<i64>,
    /// The slot of that run.
    pub scheduled_at: Option<DateTime<Utc>>,
    /// What was done, who asked and why.
    pub entry: AuditEntry,
    /// When (store clock).
    pub at: DateTime<Utc>,
}

/// A run an operator asks for: a `pending` row that the replicas running the job claim once
/// `not_before` has passed (through [`SlotStore::claim_due`](super::SlotStore::claim_due)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueue {
    /// The row to create; its `trigger` is `manual` or `backfill`.
    pub request: ClaimRequest,
    /// When it becomes due.
    pub not_before: DateTime<Utc>,
}

/// The answer to a change of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunChange {
    /// Done, to this run.
    Done {
        /// The run changed.
        run_id: i64,
    },
    /// No run has that key.
    NotFound,
    /// The run's status does not allow the change; nothing was written.
    Refused {
        /// Its status at the time.
        status: RunStatus,
    },
}

/// What operators read and change. Every change is one transaction with its audit record.
#[async_trait]
pub trait AdminStore: Send + Sync + 'static {
    /// Records (inserts or updates) the definitions of the jobs a scheduler runs, refreshing their
    /// `seen_at`. The pause state of an existing job is kept.
    async fn register_jobs(&self, jobs: &[JobDefinition]) -> Result<(), StoreError>;

    /// Every registered job, by name.
    async fn jobs(&self) -> Result<Vec<JobRecord>, StoreError>;

    /// Pauses (`paused = true`) or resumes a registered job and audits it. A pause records who, why
    /// and when; a resume clears only `paused` and leaves them as the pause wrote them. `false`,
    /// with nothing written and nothing audited, when no job has that name or the job is already
    /// as asked (a second pause keeps the first one's operator and reason).
    async fn set_paused(
        &self,
        job: &str,
        paused: bool,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;

    /// Runs matching `filter`, newest slot first, each with its attempts.
    async fn runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError>;

    /// The distinct slot instants of `job` with a row (any status, trigger or partition) in
    /// `[from, to)`, ascending.
    async fn slot_times(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>, StoreError>;

    /// [`slot_times`](Self::slot_times) of several jobs over one range: one list per job, in the
    /// order asked (empty for a job with no row). The missed-slots page asks for every job, so a
    /// store that can answer in one statement should.
    async fn slot_times_of(
        &self,
        jobs: &[String],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Vec<DateTime<Utc>>>, StoreError>;

    /// The [`RunCounts`] of every job with a running, queued, or failed (slot at or after
    /// `failed_since`) run, in one read; a job with none is left out.
    async fn run_counts(&self, failed_since: DateTime<Utc>) -> Result<Vec<RunCounts>, StoreError>;

    /// For each job, in order, its newest run (by slot, with its attempts), or `None` for a job with
    /// no run. A store that can answer in one statement should.
    async fn latest_runs(&self, jobs: &[String]) -> Result<Vec<Option<RunRecord>>, StoreError>;

    /// For each job, the latest slot instant among its `schedule`, `catch_up` and `backfill` rows:
    /// the watermark catch-up starts from. `None` for a job with no such row.
    async fn latest_slots(&self, jobs: &[String])
    -> Result<Vec<Option<DateTime<Utc>>>, StoreError>;

    /// Makes a finished run due for another attempt now: a `failed`, `dead`, `abandoned` or `skipped`
    /// run becomes `pending` with `next_attempt_at = now`, its slot unchanged. Any other status is
    /// refused. Of concurrent retries of one run, exactly one is `Done`.
    async fn retry(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError>;

    /// Creates a `pending` row (attempt 0) per request, unless a row with its key exists; one answer
    /// per request, in order: the new run's id, or `None`. One audit record per created run. Each
    /// created run holds a fresh fencing token, above every token handed out before it.
    async fn enqueue(
        &self,
        runs: &[Enqueue],
        audit: &AuditEntry,
    ) -> Result<Vec<Option<i64>>, StoreError>;

    /// Cancels a `running` or `pending` run: it becomes `failed` with class `permanent`, message
    /// `cancelled by {actor}: {reason}` and no next attempt, and a running attempt is recorded
    /// `abandoned`. The process running it finds out at its next heartbeat (its token is no longer
    /// `running`), tells the job, and its completion is refused. Other statuses are refused.
    async fn cancel(&self, key: &SlotKey, audit: &AuditEntry) -> Result<RunChange, StoreError>;

    /// The audit trail, newest first, optionally for one job, from the record before id `before`
    /// (the id of the last record of the previous page) when given: the page after it.
    async fn audit_page(
        &self,
        job: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, StoreError>;
}
