//! The arguments of the operations, as clap reads them: text, read by the admin crate's parsers
//! ([`slotguard_admin::parse`]) when the plan is made.

use clap::{Args, Subcommand};
use slotguard_admin::{ChangeRequest, DEFAULT_PAGE};

use super::EXAMPLES;
use super::failure::Failure;

mod holiday;
mod schedule;

pub(crate) use holiday::HolidayOp;
pub(crate) use schedule::{AddArgs, PreviewArgs, ScheduleOp, SetArgs, SpecArgs, UpcomingSlot};

/// Who asks, and why: stored in the audit trail.
#[derive(Debug, Args)]
pub(crate) struct Why {
    /// Why (stored with the change in the audit trail; 1 to 1,024 bytes).
    #[arg(long)]
    pub(super) reason: String,

    /// Who asks, 1 to 128 bytes [default: $USER, else `cli`].
    #[arg(long)]
    pub(super) actor: Option<String>,
}

impl Why {
    /// The change request, checked as the admin API checks it, so that a bad reason is bad input
    /// before the store is even opened.
    pub(super) fn request(self) -> Result<ChangeRequest, Failure> {
        let actor = self
            .actor
            .or_else(|| std::env::var("USER").ok().filter(|u| !u.trim().is_empty()))
            .unwrap_or_else(|| "cli".to_owned());
        let request = ChangeRequest::new(actor, self.reason);
        request.validate()?;
        Ok(request)
    }
}

/// One slot of a job.
#[derive(Debug, Args)]
pub(crate) struct SlotArgs {
    /// The job's name.
    pub(super) job: String,
    /// The slot, in RFC 3339 (`2026-03-08T17:00:00Z`), as `slotguard runs` prints it.
    pub(super) slot: String,
    /// The partition, for a partitioned job.
    #[arg(long, default_value = "")]
    pub(super) partition: String,
    #[command(flatten)]
    pub(super) why: Why,
}

/// `backfill`: the missing slots of a range.
#[derive(Debug, Args)]
pub(crate) struct BackfillArgs {
    /// The job's name.
    pub(super) job: String,
    /// From this instant (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    pub(super) from: String,
    /// Until this instant, excluded (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    pub(super) to: String,
    /// Create the runs; without it, only list them.
    #[arg(long)]
    pub(super) execute: bool,
    /// Allow a range that starts before the job was first registered (history from before the
    /// job existed); without it, such a range is refused.
    #[arg(long)]
    pub(super) before_first_seen: bool,
    /// Runs that become due per second, 0.001 to 1,000.
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        allow_negative_numbers = true
    )]
    pub(super) per_second: String,
    #[command(flatten)]
    pub(super) why: Why,
}

/// `retry`: one slot, or every failed slot of a range.
#[derive(Debug, Args)]
pub(crate) struct RetryArgs {
    /// The job's name.
    pub(super) job: String,
    /// The slot, in RFC 3339 (`2026-03-08T17:00:00Z`), as `slotguard runs` prints it.
    #[arg(required_unless_present = "failed")]
    pub(super) slot: Option<String>,
    /// Instead of one slot: every failed or dead run with a slot in [--from, --to), one audit entry
    /// each (at most 1,000).
    #[arg(long, conflicts_with = "slot", requires_all = ["from", "to"])]
    pub(super) failed: bool,
    /// With --failed: from this instant (RFC 3339).
    #[arg(long, value_name = "RFC3339", requires = "failed")]
    pub(super) from: Option<String>,
    /// With --failed: until this instant, excluded (RFC 3339).
    #[arg(long, value_name = "RFC3339", requires = "failed")]
    pub(super) to: Option<String>,
    /// The partition, for a partitioned job (with --failed and no --partition: every partition).
    #[arg(long)]
    pub(super) partition: Option<String>,
    #[command(flatten)]
    pub(super) why: Why,
}

/// The operations.
#[derive(Debug, Subcommand)]
pub(crate) enum Op {
    /// List the registered jobs: schedule, zone, next slot, last run, pause state.
    #[command(after_long_help = EXAMPLES)]
    Jobs {
        /// One JSON object per job and line, as the HTTP router's `GET /jobs` lists them.
        #[arg(long)]
        json: bool,
    },
    /// List a job's runs, newest slot first.
    #[command(after_long_help = EXAMPLES)]
    Runs {
        /// The job's name.
        job: String,
        /// Only runs in this status (pending, running, succeeded, failed, abandoned, skipped, dead).
        #[arg(long)]
        status: Option<String>,
        /// Only slots at or after this instant (RFC 3339).
        #[arg(long, value_name = "RFC3339")]
        from: Option<String>,
        /// Only slots before this instant (RFC 3339).
        #[arg(long, value_name = "RFC3339")]
        to: Option<String>,
        /// Only this partition.
        #[arg(long)]
        partition: Option<String>,
        /// At most this many runs, 1 to 1,000.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_PAGE.to_string(), allow_negative_numbers = true)]
        limit: String,
        /// One JSON object per run and line, with its attempts.
        #[arg(long)]
        json: bool,
    },
    /// Show one run of a job (the run of one slot) with its attempts.
    #[command(after_long_help = EXAMPLES)]
    Run {
        /// The job's name.
        job: String,
        /// The slot, in RFC 3339 (`2026-03-08T17:00:00Z`), as `slotguard runs` prints it.
        slot: String,
        /// The partition, for a partitioned job.
        #[arg(long, default_value = "")]
        partition: String,
        /// One JSON object, as the HTTP router's `GET /jobs/{job}/runs/{slot}` answers.
        #[arg(long)]
        json: bool,
    },
    /// List the slots of a job's schedule (or of every job's) that have no run at all in a range.
    #[command(after_long_help = EXAMPLES)]
    Missed {
        /// The job's name [default: every job, read at once].
        job: Option<String>,
        /// From this instant (RFC 3339).
        #[arg(long, value_name = "RFC3339")]
        from: String,
        /// Until this instant, excluded (RFC 3339) [default: now].
        #[arg(long, value_name = "RFC3339")]
        to: Option<String>,
        /// At most this many slots, 1 to 1,000; the last line says how to ask for the next page.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_PAGE.to_string(), allow_negative_numbers = true)]
        limit: String,
        /// Continue every job's listing where the previous page ended (its `next`).
        #[arg(long, value_name = "CURSOR")]
        cursor: Option<String>,
        /// One JSON object per slot and line; a last `{"next": …}` line when there is more.
        #[arg(long)]
        json: bool,
    },
    /// Run a finished slot again: a new attempt of the same run, same slot and idempotency key.
    #[command(after_long_help = EXAMPLES)]
    Retry(RetryArgs),
    /// Cancel a running or pending run: a running run's replica is told at its next heartbeat; a
    /// pending run never starts.
    #[command(after_long_help = EXAMPLES)]
    Cancel(SlotArgs),
    /// Run a job now, as a manual slot that cannot collide with a scheduled one.
    #[command(after_long_help = EXAMPLES)]
    Trigger {
        /// The job's name.
        job: String,
        #[command(flatten)]
        why: Why,
        /// Follow the run to its outcome; the exit code says it: 0 succeeded, 5 ended without
        /// success (failed, dead, skipped, abandoned), 6 not finished within --timeout.
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this many seconds (0 to 3,600).
        #[arg(long, value_name = "SECONDS", default_value = "600", requires = "wait")]
        timeout: String,
    },
    /// Create runs for the missing slots of a range (a dry run unless --execute).
    #[command(after_long_help = EXAMPLES)]
    Backfill(BackfillArgs),
    /// Pause a job on every replica (within one recovery poll).
    #[command(after_long_help = EXAMPLES)]
    Pause {
        /// The job's name.
        job: String,
        #[command(flatten)]
        why: Why,
    },
    /// Resume a paused job.
    #[command(after_long_help = EXAMPLES)]
    Resume {
        /// The job's name.
        job: String,
        #[command(flatten)]
        why: Why,
    },
    /// Show the audit trail, newest first.
    #[command(after_long_help = EXAMPLES)]
    Audit {
        /// Only this job.
        job: Option<String>,
        /// At most this many entries, 1 to 1,000.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_PAGE.to_string(), allow_negative_numbers = true)]
        limit: String,
        /// Only entries older than the one with this id (the last `id` of the previous page).
        #[arg(long, value_name = "ID")]
        before: Option<i64>,
        /// One JSON object per entry and line.
        #[arg(long)]
        json: bool,
    },
    /// Add, list, show, change (`set`), remove or preview the schedules kept in the store.
    ///
    /// A stored schedule runs a registered `slot`-level job's handler on slots of its own; it is
    /// changed at run time, with the version it was read at (a stale one is exit 7).
    #[command(subcommand)]
    Schedule(ScheduleOp),
    /// Skip one upcoming slot of a job: it is recorded `skipped` with the reason, so no replica
    /// runs it.
    #[command(after_long_help = super::SCHEDULE_EXAMPLES)]
    Skip(UpcomingSlot),
    /// Undo a skip, as long as no replica has claimed the slot: it runs as its schedule says.
    #[command(after_long_help = super::SCHEDULE_EXAMPLES)]
    Unskip(UpcomingSlot),
    /// Add or remove a holiday on a business calendar, or list the overrides, without a deploy.
    #[command(subcommand, after_long_help = super::HOLIDAY_EXAMPLES)]
    Holiday(HolidayOp),
    /// List the scheduler processes recorded in the store: host, pid, version, roles, jobs, runs
    /// held, last heartbeat, alive or gone.
    #[command(after_long_help = EXAMPLES)]
    Replicas {
        /// One JSON object per replica and line, as the HTTP router's `GET /replicas` lists them.
        #[arg(long)]
        json: bool,
    },
}
