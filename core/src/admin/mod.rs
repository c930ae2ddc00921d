//! Operating slotguard: one Rust API that the axum router, the `slotguard` CLI and an application's
//! own code all go through.
//!
//! [`Admin`] holds the policy (validation, schedules, missed-slot arithmetic, limits); the store holds
//! the mechanism ([`AdminStore`](crate::store::AdminStore)). Every change is audited with an actor and a
//! reason. Nothing here authenticates anyone: put the router behind the application's own middleware.
//!
//! ```
//! # async fn demo() -> Result<(), slotguard::admin::AdminError> {
//! use slotguard::admin::{Admin, ChangeRequest};
//! use slotguard::MemoryBackend;
//!
//! let admin = Admin::new(MemoryBackend::new());
//! let by = ChangeRequest::new("ops@example.com", "bank API was down at 02:00");
//! // Unknown jobs are an error that names the job, never a silent no-op.
//! assert!(admin.pause("daily-settlement", &by).await.is_err());
//! # Ok(()) }
//! ```

#[cfg(feature = "dashboard")]
pub mod dashboard;
mod follow;
#[cfg(feature = "axum")]
pub mod http;
mod missed;
mod page;
mod retry_range;

pub use follow::{MAX_WAIT, check_wait, finished};
pub use missed::{CHUNK, JobMissed, MissedCursor, MissedPage, MissedQuery, MissedSlot};
pub use page::{DEFAULT_PAGE, MAX_PAGE, check_page, parse_page};
pub use retry_range::{MAX_RETRY_RUNS, RangeRetry};

use missed::schedule_of;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, SubsecRound, Utc};
use slotguard_cron::parse_zone;

use crate::clock::{Clock, SharedClock, SystemClock};
use crate::policy::Overlap;
use crate::store::{
    AuditEntry, AuditRecord, Backend, ClaimRequest, Enqueue, JobRecord, ReplicaRecord, RunChange,
    RunFilter, RunRecord, RunStatus, SlotKey, StoreError, Trigger,
};
use crate::{check_job_name, check_partition};

/// The longest reason accepted, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;
/// The longest actor accepted, in bytes.
pub const MAX_ACTOR_BYTES: usize = 128;
/// The most schedule slots [`Admin::missed`] and [`Admin::backfill`] look at in one range, and
/// [`Admin::missed_page`] in one page.
pub const MAX_SCAN_SLOTS: usize = 100_000;
/// The most runs one [`Admin::backfill`] creates; a larger range is refused, to be split.
pub const MAX_BACKFILL_SLOTS: usize = 1_000;
/// How many milliseconds [`Admin::trigger`] tries, from now on, for one free of other manual runs.
const MAX_TRIGGER_TRIES: usize = 1_000;
/// The slowest backfill accepted, in runs per second: one run every 1,000 s, so that the
/// [`MAX_BACKFILL_SLOTS`] runs of the largest backfill are all due within 12 days.
pub const MIN_PER_SECOND: f64 = 0.001;
/// The fastest backfill accepted, in runs per second: one run every millisecond.
pub const MAX_PER_SECOND: f64 = 1_000.0;

/// Who asks for a change, and why. Both are stored in the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRequest {
    /// The person or system asking (1 to 128 bytes).
    pub actor: String,
    /// Why (1 to 1,024 bytes).
    pub reason: String,
}

impl ChangeRequest {
    /// A request by `actor` for `reason`.
    pub fn new(actor: impl Into<String>, reason: impl Into<String>) -> Self {
        ChangeRequest {
            actor: actor.into(),
            reason: reason.into(),
        }
    }

    /// Checks the actor and the reason against the limits every front end applies.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] naming the field.
    pub fn validate(&self) -> Result<(), AdminError> {
        check_text("actor", &self.actor, MAX_ACTOR_BYTES)?;
        check_text("reason", &self.reason, MAX_REASON_BYTES)
    }

    fn entry(&self, action: &str) -> Result<AuditEntry, AdminError> {
        self.validate()?;
        Ok(AuditEntry {
            action: action.to_owned(),
            actor: self.actor.clone(),
            reason: self.reason.clone(),
        })
    }
}

fn check_text(field: &'static str, value: &str, max: usize) -> Result<(), AdminError> {
    if value.trim().is_empty() {
        return Err(AdminError::Invalid {
            field,
            problem: "must not be empty".into(),
        });
    }
    if value.len() > max {
        return Err(AdminError::Invalid {
            field,
            problem: format!("is {} bytes; at most {max} are accepted", value.len()),
        });
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(AdminError::Invalid {
            field,
            problem: "contains control characters".into(),
        });
    }
    Ok(())
}

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
    /// The store could not be asked; nothing was changed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An instant as the API takes it back: RFC 3339, UTC, with milliseconds only when it has them.
pub fn rfc3339(at: &DateTime<Utc>) -> String {
    let format = if at.timestamp_subsec_millis() == 0 {
        chrono::SecondsFormat::Secs
    } else {
        chrono::SecondsFormat::Millis
    };
    at.to_rfc3339_opts(format, true)
}

fn partition_note(partition: &str) -> String {
    if partition.is_empty() {
        String::new()
    } else {
        format!(" (partition `{}`)", shown(partition))
    }
}

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

/// A run [`Admin::retry`] made due again.
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

/// A manual run, created by [`Admin::trigger`].
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
    /// Checks the rate: a number from [`MIN_PER_SECOND`] to [`MAX_PER_SECOND`].
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for the field `perSecond`.
    pub fn validate(&self) -> Result<(), AdminError> {
        if (MIN_PER_SECOND..=MAX_PER_SECOND).contains(&self.per_second) {
            return Ok(());
        }
        Err(AdminError::Invalid {
            field: "perSecond",
            problem: format!(
                "{} is out of range: expected {MIN_PER_SECOND} to {MAX_PER_SECOND} runs per second",
                self.per_second
            ),
        })
    }

    /// When the `index`th run of a backfill started at `now` becomes due.
    fn due(&self, now: DateTime<Utc>, index: usize) -> Result<DateTime<Utc>, AdminError> {
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

/// The admin API. Cheap to clone.
#[derive(Clone)]
pub struct Admin {
    store: Arc<dyn Backend>,
    clock: SharedClock,
    stale_after: Duration,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("store", &self.store.name())
            .finish_non_exhaustive()
    }
}

impl Admin {
    /// The admin API over `store`.
    pub fn new(store: impl Backend) -> Self {
        Admin::shared(Arc::new(store))
    }

    /// The admin API over a store shared with a scheduler.
    pub fn shared(store: Arc<dyn Backend>) -> Self {
        Admin {
            store,
            clock: Arc::new(SystemClock),
            stale_after: Duration::from_secs(30),
        }
    }

    /// Reads "now" from `clock` (for tests in paused time).
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The staleness threshold written on manual and backfill runs: use the scheduler's
    /// [`stale_after`](crate::SchedulerBuilder::stale_after) (default 30 s).
    #[must_use]
    pub fn with_stale_after(mut self, stale_after: Duration) -> Self {
        self.stale_after = stale_after;
        self
    }

    pub(crate) fn set_clock(&mut self, clock: SharedClock) {
        self.clock = clock;
    }

    /// Every registered job with its next slots, last run and pause state.
    pub async fn jobs(&self) -> Result<Vec<JobStatus>, AdminError> {
        let records = self.store.jobs().await?;
        let live: Vec<ReplicaRecord> = self
            .store
            .replicas()
            .await?
            .into_iter()
            .filter(|r| r.alive)
            .collect();
        let now = self.clock.now();
        let names: Vec<String> = records.iter().map(|r| r.definition.name.clone()).collect();
        // One read for every job's newest run (one statement on PostgreSQL), not one per job.
        let latest = self.store.latest_runs(&names).await?;
        let mut out = Vec::with_capacity(records.len());
        for (record, last_run) in records.into_iter().zip(latest) {
            let next_slots = schedule_of(&record)
                .map(|s| s.slots_after(now).take(3).map(|s| s.scheduled_at).collect())
                .unwrap_or_default();
            let replicas = runners(&live, &record.definition.name);
            out.push(JobStatus {
                record,
                next_slots,
                last_run,
                replicas,
            });
        }
        Ok(out)
    }

    /// Every scheduler process recorded in the store, by id, alive or gone (by the store's clock).
    /// A process removes itself on a graceful shutdown; one that died stays, shown gone, for a day.
    pub async fn replicas(&self) -> Result<Vec<ReplicaRecord>, AdminError> {
        Ok(self.store.replicas().await?)
    }

    /// One registered job.
    pub async fn job(&self, name: &str) -> Result<JobRecord, AdminError> {
        named(name)?;
        self.store
            .jobs()
            .await?
            .into_iter()
            .find(|j| j.definition.name == name)
            .ok_or_else(|| AdminError::UnknownJob { job: shown(name) })
    }

    /// Runs matching `filter`, newest slot first, at most `filter.limit`: 1 to [`MAX_PAGE`]
    /// ([`check_page`]); `RunFilter::default()` asks for [`DEFAULT_PAGE`].
    pub async fn runs(&self, filter: RunFilter) -> Result<Vec<RunRecord>, AdminError> {
        check_page(filter.limit)?;
        if let Some(job) = &filter.job {
            self.job(job).await?;
        }
        if let Some(partition) = &filter.partition {
            partition_key(partition)?;
        }
        if let (Some(from), Some(to)) = (filter.from, filter.to) {
            ordered(from, to)?;
        }
        Ok(self.store.runs(&filter).await?)
    }

    /// The run of one slot.
    pub async fn run(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
    ) -> Result<RunRecord, AdminError> {
        self.job(job).await?;
        partition_key(partition)?;
        self.find_run(job, slot, partition).await
    }

    async fn find_run(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
    ) -> Result<RunRecord, AdminError> {
        let filter = RunFilter {
            job: Some(job.to_owned()),
            partition: Some(partition.to_owned()),
            from: Some(slot),
            to: Some(slot + chrono::Duration::milliseconds(1)),
            limit: 1,
            ..RunFilter::default()
        };
        self.store
            .runs(&filter)
            .await?
            .pop()
            .ok_or_else(|| AdminError::UnknownRun {
                job: shown(job),
                slot,
                partition: partition.to_owned(),
            })
    }

    /// Makes a finished slot run again: a new attempt of the same run (same slot, same idempotency
    /// key), claimed by a replica running the job within one recovery poll, or after the resume
    /// while the job is paused ([`Retried::outlook`]). Refused while the run is `running` or
    /// `pending`, and for a `succeeded` run. Of concurrent retries, exactly one is accepted.
    pub async fn retry(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
        by: &ChangeRequest,
    ) -> Result<Retried, AdminError> {
        let audit = by.entry("retry")?;
        let job_paused = self.job(job).await?.paused;
        partition_key(partition)?;
        let key = SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: partition.to_owned(),
        };
        let change = self.store.retry(&key, &audit).await?;
        let run = self.changed("retry", &key, change).await?;
        Ok(Retried { run, job_paused })
    }

    /// Cancels a `running` or `pending` run: it ends `failed` (permanent, with the reason); the
    /// replica running it finds out at its next heartbeat, tells the job through
    /// [`JobContext::lost`](crate::JobContext::lost), and its completion is refused.
    pub async fn cancel(
        &self,
        job: &str,
        slot: DateTime<Utc>,
        partition: &str,
        by: &ChangeRequest,
    ) -> Result<RunRecord, AdminError> {
        let audit = by.entry("cancel")?;
        self.job(job).await?;
        partition_key(partition)?;
        let key = SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: partition.to_owned(),
        };
        let change = self.store.cancel(&key, &audit).await?;
        self.changed("cancel", &key, change).await
    }

    async fn changed(
        &self,
        action: &'static str,
        key: &SlotKey,
        change: RunChange,
    ) -> Result<RunRecord, AdminError> {
        match change {
            RunChange::Done { .. } => {
                self.find_run(&key.job, key.scheduled_at, &key.partition)
                    .await
            }
            RunChange::NotFound => Err(AdminError::UnknownRun {
                job: shown(&key.job),
                slot: key.scheduled_at,
                partition: key.partition.clone(),
            }),
            RunChange::Refused { status } => Err(AdminError::Refused {
                action,
                job: shown(&key.job),
                slot: key.scheduled_at,
                status,
                hint: match (action, status) {
                    ("retry", RunStatus::Running) => "wait for it to end, or cancel it first",
                    ("retry", RunStatus::Pending) => "an attempt is already waiting",
                    ("retry", RunStatus::Succeeded) => {
                        "it already succeeded; trigger a manual run if it must run again"
                    }
                    _ => "only running or pending runs can be cancelled",
                },
            }),
        }
    }

    /// Runs the job now, on whichever replica running it polls first: a `manual` slot at the current
    /// millisecond, which cannot collide with a scheduled (whole-second) slot. Concurrent triggers
    /// each get a run: when the millisecond is taken, the next free one is used. A paused job's run
    /// waits for the resume ([`Triggered::paused`], [`Triggered::outlook`]); follow it with
    /// [`Admin::wait`].
    pub async fn trigger(&self, job: &str, by: &ChangeRequest) -> Result<Triggered, AdminError> {
        let audit = by.entry("trigger")?;
        let record = self.job(job).await?;
        // Read before anything is written: a registry that cannot be read fails the trigger whole.
        let live = self.store.replicas().await?;
        let zone = parse_zone(&record.definition.zone).unwrap_or(chrono_tz::UTC);
        let mut at = self.clock.now().trunc_subsecs(3);
        for _ in 0..MAX_TRIGGER_TRIES {
            at = manual_slot(at);
            let wall = at.with_timezone(&zone).naive_local();
            let request = self.request(&record, at, wall, Trigger::Manual);
            let run = Enqueue {
                request,
                not_before: at,
            };
            let created = self.store.enqueue(&[run], &audit).await?;
            if let Some(run_id) = created.first().copied().flatten() {
                return Ok(Triggered {
                    run_id,
                    scheduled_at: at,
                    paused: record.paused,
                    replicas: runners(&live, job),
                });
            }
            at += chrono::Duration::milliseconds(1);
        }
        Err(AdminError::Invalid {
            field: "trigger",
            problem: format!(
                "{MAX_TRIGGER_TRIES} manual runs in a row exist already from {}; try again",
                rfc3339(&at)
            ),
        })
    }

    /// Creates runs for the slots of `[from, to)` that have no row, spread at `per_second`. A dry run
    /// (the default) only reports them. A range with more than 1,000 missing slots is refused, to be
    /// split: a backfill never turns into a storm. Instants before 1970 are refused, and so is a
    /// range that starts before the job was first registered unless
    /// [`BackfillOptions::before_first_seen`] says so; both refusals name the first slot accepted.
    pub async fn backfill(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        options: BackfillOptions,
        by: &ChangeRequest,
    ) -> Result<BackfillReport, AdminError> {
        let audit = by.entry("backfill")?;
        options.validate()?;
        let record = self.job(job).await?;
        since_epoch(&record, from, to)?;
        if !options.before_first_seen {
            since_first_seen(&record, from)?;
        }
        let to = self.settled_end(from, to)?;
        let (total, slots) = self.scan(&record, from, to).await?;
        // Slots that had a row before the backfill looked; those that got one meanwhile are added
        // below.
        let had_rows = total - slots.len();
        if slots.len() > MAX_BACKFILL_SLOTS {
            return Err(AdminError::Invalid {
                field: "range",
                problem: format!(
                    "{} slots are missing in it, more than {MAX_BACKFILL_SLOTS} per backfill; split the range",
                    slots.len()
                ),
            });
        }
        if options.dry_run || slots.is_empty() {
            return Ok(BackfillReport {
                dry_run: options.dry_run,
                slots,
                created: 0,
                existing: had_rows,
                last_due: None,
            });
        }
        let now = self.clock.now();
        let runs = slots
            .iter()
            .enumerate()
            .map(|(i, slot)| {
                Ok(Enqueue {
                    request: self.request(&record, slot.scheduled_at, slot.wall, Trigger::Backfill),
                    not_before: options.due(now, i)?,
                })
            })
            .collect::<Result<Vec<Enqueue>, AdminError>>()?;
        let answers = self.store.enqueue(&runs, &audit).await?;
        let created = answers.iter().filter(|a| a.is_some()).count();
        let last_due = runs
            .iter()
            .zip(&answers)
            .filter(|(_, a)| a.is_some())
            .map(|(r, _)| r.not_before)
            .max();
        Ok(BackfillReport {
            dry_run: false,
            existing: had_rows + slots.len() - created,
            slots,
            created,
            last_due,
        })
    }

    /// Pauses a job: every replica stops claiming its slots and retries within one recovery poll,
    /// recording the slots `skipped` with reason `paused`. Runs already going are not stopped (cancel
    /// them). A job already paused is refused ([`AdminError::PauseState`], naming who paused it):
    /// the first pause keeps its operator and reason until a resume.
    pub async fn pause(&self, job: &str, by: &ChangeRequest) -> Result<JobRecord, AdminError> {
        self.set_paused(job, true, by).await
    }

    /// Resumes a paused job. Refused ([`AdminError::PauseState`]) when the job is not paused:
    /// nothing is written to the audit trail then.
    pub async fn resume(&self, job: &str, by: &ChangeRequest) -> Result<JobRecord, AdminError> {
        self.set_paused(job, false, by).await
    }

    async fn set_paused(
        &self,
        job: &str,
        paused: bool,
        by: &ChangeRequest,
    ) -> Result<JobRecord, AdminError> {
        let action = if paused { "pause" } else { "resume" };
        let audit = by.entry(action)?;
        named(job)?;
        if self.store.set_paused(job, paused, &audit).await? {
            return self.job(job).await;
        }
        // Nothing was written: the job is unknown, or already as asked.
        let record = self.job(job).await?;
        let state = if record.paused {
            format!(
                "it is already paused by {}{}: {}; resume it first to pause it again",
                shown(record.paused_by.as_deref().unwrap_or("?")),
                record
                    .paused_at
                    .map(|at| format!(" since {}", rfc3339(&at)))
                    .unwrap_or_default(),
                shown(record.paused_reason.as_deref().unwrap_or(""))
            )
        } else {
            "it is not paused".to_owned()
        };
        Err(AdminError::PauseState {
            action,
            job: shown(job),
            state,
        })
    }

    /// The audit trail, newest first, at most `limit` records: 1 to [`MAX_PAGE`] ([`check_page`]).
    pub async fn audit(
        &self,
        job: Option<&str>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, AdminError> {
        self.audit_page(job, None, limit).await
    }

    /// The page of the audit trail after the record with id `before` (the last `id` of the previous
    /// page), newest first, at most `limit` records; the first page when `before` is `None`.
    pub async fn audit_page(
        &self,
        job: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<AuditRecord>, AdminError> {
        check_page(limit)?;
        if let Some(job) = job {
            self.job(job).await?;
        }
        Ok(self.store.audit_page(job, before, limit).await?)
    }

    fn request(
        &self,
        record: &JobRecord,
        at: DateTime<Utc>,
        wall: NaiveDateTime,
        trigger: Trigger,
    ) -> ClaimRequest {
        ClaimRequest {
            key: SlotKey {
                job: record.definition.name.clone(),
                scheduled_at: at,
                partition: String::new(),
            },
            trigger,
            zone: record.definition.zone.clone(),
            wall,
            business_date: wall.date(),
            fingerprint: record.definition.fingerprint,
            stale_after: self.stale_after,
            overlap: Overlap::Allow,
        }
    }
}

/// The ids of the live replicas in `live` that run `job`'s bodies.
fn runners(live: &[ReplicaRecord], job: &str) -> Vec<String> {
    live.iter()
        .filter(|r| r.alive && runs_jobs(r) && r.info.jobs.iter().any(|j| j == job))
        .map(|r| r.info.id.clone())
        .collect()
}

/// Whether a replica runs job bodies (role `all` or `worker`): a `scheduler` only queues slots,
/// and an `admin` process does neither.
fn runs_jobs(replica: &ReplicaRecord) -> bool {
    replica
        .info
        .roles
        .iter()
        .any(|role| role.parse::<crate::Role>().is_ok_and(crate::Role::executes))
}

/// The first slot of the job's schedule at or after `at`, as a message names it.
fn first_slot_from(record: &JobRecord, at: DateTime<Utc>) -> String {
    let first = schedule_of(record).and_then(|s| {
        s.slots_after(at - chrono::Duration::seconds(1))
            .find(|slot| slot.scheduled_at >= at)
    });
    match first {
        Some(slot) => format!(
            "the first slot that would be accepted is {}",
            rfc3339(&slot.scheduled_at)
        ),
        None => "the schedule has no slot after it".to_owned(),
    }
}

/// Refuses a range that names an instant before 1970: a typo (year 0), never history to run.
fn since_epoch(
    record: &JobRecord,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<(), AdminError> {
    let epoch = DateTime::<Utc>::UNIX_EPOCH;
    let (field, at) = match (from < epoch, to < epoch) {
        (true, _) => ("from", from),
        (false, true) => ("to", to),
        (false, false) => return Ok(()),
    };
    Err(AdminError::Invalid {
        field,
        problem: format!(
            "{} is before 1970-01-01T00:00:00Z, and instants before 1970 are refused; {}",
            rfc3339(&at),
            first_slot_from(record, epoch)
        ),
    })
}

/// Refuses a backfill that reaches before the job was first registered, unless asked for.
fn since_first_seen(record: &JobRecord, from: DateTime<Utc>) -> Result<(), AdminError> {
    if from >= record.registered_at {
        return Ok(());
    }
    Err(AdminError::Invalid {
        field: "from",
        problem: format!(
            "{} is before `{}` was first registered ({}); {}; to backfill history from before the \
             job existed, say so (beforeFirstSeen: true, --before-first-seen)",
            rfc3339(&from),
            shown(&record.definition.name),
            rfc3339(&record.registered_at),
            first_slot_from(record, record.registered_at)
        ),
    })
}

/// Checks that a range `[from, to)` is not empty.
fn ordered(from: DateTime<Utc>, to: DateTime<Utc>) -> Result<(), AdminError> {
    if from < to {
        return Ok(());
    }
    Err(AdminError::Invalid {
        field: "range",
        problem: format!(
            "`from` ({}) must be before `to` ({})",
            rfc3339(&from),
            rfc3339(&to)
        ),
    })
}

/// `at`, or the next millisecond if `at` is on a whole second (a scheduled slot's instant).
fn manual_slot(at: DateTime<Utc>) -> DateTime<Utc> {
    if at.timestamp_subsec_millis() == 0 {
        at + chrono::Duration::milliseconds(1)
    } else {
        at
    }
}

/// A job name by the rule every job is registered under ([`check_job_name`]): a name that breaks it
/// names no job, on every store, and is not sent to one (PostgreSQL refuses a NUL in a query).
fn named(job: &str) -> Result<(), AdminError> {
    check_job_name(job).map_err(|_| AdminError::UnknownJob { job: shown(job) })
}

/// A partition key by the rule of [`check_partition`], or the empty key of unpartitioned runs.
fn partition_key(partition: &str) -> Result<(), AdminError> {
    if partition.is_empty() {
        return Ok(());
    }
    check_partition(partition).map_err(|problem| AdminError::Invalid {
        field: "partition",
        problem: format!("`{}`: {problem}", shown(partition)),
    })
}

/// User input for messages: escaped and shortened.
pub(crate) fn shown(input: &str) -> String {
    slotguard_cron::shown_within(input, 64)
}
