//! The arguments of the stored schedules (`schedule add|list|show|set|remove|preview`) and of
//! `skip` and `unskip`, as clap reads them: text, read when the plan is made.

use clap::{Args, Subcommand};
use slotguard_admin::DEFAULT_PAGE;

use super::Why;
use crate::ops::SCHEDULE_EXAMPLES;

/// What a schedule is: the fields of `schedule add` and `schedule preview`.
#[derive(Debug, Args)]
pub(crate) struct SpecArgs {
    /// The job whose handler runs the slots: a registered job at the `slot` level.
    #[arg(long)]
    pub(in crate::ops) job: String,
    /// The cron expression, as one quoted argument (`'0 2 * * *'`).
    #[arg(long, value_name = "EXPR")]
    pub(in crate::ops) cron: String,
    /// The IANA zone the expression is read in (`Asia/Seoul`).
    #[arg(long, value_name = "ZONE")]
    pub(in crate::ops) tz: String,
    /// The DST policy: vixie, skip, shift or instant [default: vixie].
    #[arg(long, value_name = "POLICY")]
    pub(in crate::ops) dst: Option<String>,
    /// The partition (tenant) of its slots [default: the job's own].
    #[arg(long, value_name = "KEY")]
    pub(in crate::ops) partition: Option<String>,
    /// No slot before this instant (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    pub(in crate::ops) start_at: Option<String>,
    /// No slot after this instant (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    pub(in crate::ops) end_at: Option<String>,
    /// At most this many slots from when it takes effect, 0 to 100,000.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub(in crate::ops) remaining_runs: Option<String>,
}

/// `schedule add`.
#[derive(Debug, Args)]
pub(crate) struct AddArgs {
    /// The schedule's id, unique in the store (1 to 200 characters, no `:`).
    pub(in crate::ops) id: String,
    #[command(flatten)]
    pub(in crate::ops) spec: SpecArgs,
    /// Add it paused: no slots until `schedule set ID --resumed`.
    #[arg(long)]
    pub(in crate::ops) paused: bool,
    /// A note, such as why it is paused (at most 1,024 bytes).
    #[arg(long, value_name = "TEXT")]
    pub(in crate::ops) note: Option<String>,
    /// Pause the schedule when a run of one of its slots fails for good (its retries spent, or a
    /// permanent error), with a note naming the slot and the error.
    #[arg(long)]
    pub(in crate::ops) pause_on_failure: bool,
    #[command(flatten)]
    pub(in crate::ops) why: Why,
}

/// `schedule set`: the fields to change; a field not given keeps its value.
#[derive(Debug, Args)]
pub(crate) struct SetArgs {
    /// The schedule's id.
    pub(in crate::ops) id: String,
    /// The version the change was read at, as `schedule show` prints it; a later one is exit 7.
    #[arg(long, value_name = "V", allow_negative_numbers = true)]
    pub(in crate::ops) version: String,
    /// A new cron expression.
    #[arg(long, value_name = "EXPR")]
    pub(in crate::ops) cron: Option<String>,
    /// A new zone.
    #[arg(long, value_name = "ZONE")]
    pub(in crate::ops) tz: Option<String>,
    /// A new DST policy: vixie, skip, shift or instant.
    #[arg(long, value_name = "POLICY")]
    pub(in crate::ops) dst: Option<String>,
    /// A new partition (empty: the job's own).
    #[arg(long, value_name = "KEY")]
    pub(in crate::ops) partition: Option<String>,
    /// No slot before this instant (RFC 3339).
    #[arg(long, value_name = "RFC3339", conflicts_with = "clear_start_at")]
    pub(in crate::ops) start_at: Option<String>,
    /// Remove the start.
    #[arg(long)]
    pub(in crate::ops) clear_start_at: bool,
    /// No slot after this instant (RFC 3339).
    #[arg(long, value_name = "RFC3339", conflicts_with = "clear_end_at")]
    pub(in crate::ops) end_at: Option<String>,
    /// Remove the end.
    #[arg(long)]
    pub(in crate::ops) clear_end_at: bool,
    /// At most this many slots from when the change takes effect, 0 to 100,000 [default: the
    /// runs left, when it has a count].
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        conflicts_with = "clear_remaining_runs"
    )]
    pub(in crate::ops) remaining_runs: Option<String>,
    /// Remove the count of remaining runs.
    #[arg(long)]
    pub(in crate::ops) clear_remaining_runs: bool,
    /// Pause it: no slots from when the change takes effect.
    #[arg(long, conflicts_with = "resumed")]
    pub(in crate::ops) paused: bool,
    /// Resume it.
    #[arg(long)]
    pub(in crate::ops) resumed: bool,
    /// A note, such as why it is paused (at most 1,024 bytes).
    #[arg(long, value_name = "TEXT", conflicts_with = "clear_note")]
    pub(in crate::ops) note: Option<String>,
    /// Remove the note.
    #[arg(long)]
    pub(in crate::ops) clear_note: bool,
    /// Pause the schedule when a run of one of its slots fails for good.
    #[arg(long, conflicts_with = "no_pause_on_failure")]
    pub(in crate::ops) pause_on_failure: bool,
    /// Do not pause it when a run fails for good.
    #[arg(long)]
    pub(in crate::ops) no_pause_on_failure: bool,
    #[command(flatten)]
    pub(in crate::ops) why: Why,
}

/// `schedule preview`.
#[derive(Debug, Args)]
pub(crate) struct PreviewArgs {
    #[command(flatten)]
    pub(in crate::ops) spec: SpecArgs,
    /// How many slots, 1 to 1,000.
    #[arg(long, value_name = "N", default_value_t = slotguard_admin::PREVIEW_SLOTS.to_string(), allow_negative_numbers = true)]
    pub(in crate::ops) count: String,
    /// One JSON object, `{"next": [...]}`, as the HTTP router's `POST /schedules/preview` answers.
    #[arg(long)]
    pub(in crate::ops) json: bool,
}

/// The stored schedules of a job's slots, kept in the store and changed at run time.
#[derive(Debug, Subcommand)]
pub(crate) enum ScheduleOp {
    /// Add a schedule of a registered `slot`-level job; prints it with its next slots.
    #[command(after_long_help = SCHEDULE_EXAMPLES)]
    Add(AddArgs),
    /// List the stored schedules (not removed), by id, with their next slot.
    #[command(after_long_help = SCHEDULE_EXAMPLES)]
    List {
        /// Only the schedules of this job.
        #[arg(long)]
        job: Option<String>,
        /// Only ids after this one (the last id of the previous page).
        #[arg(long, value_name = "ID")]
        after: Option<String>,
        /// At most this many schedules, 1 to 1,000.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_PAGE.to_string(), allow_negative_numbers = true)]
        limit: String,
        /// One JSON object per schedule and line, as the HTTP router's `GET /schedules` lists them.
        #[arg(long)]
        json: bool,
    },
    /// Show one schedule: its latest version and next slots.
    #[command(after_long_help = SCHEDULE_EXAMPLES)]
    Show {
        /// The schedule's id.
        id: String,
        /// One JSON object, as the HTTP router's `GET /schedules/{id}` answers.
        #[arg(long)]
        json: bool,
    },
    /// Change a schedule read at --version: slots from when the change takes effect follow it.
    #[command(after_long_help = SCHEDULE_EXAMPLES)]
    Set(SetArgs),
    /// Remove a schedule: no slots from when the removal takes effect; its history stays.
    #[command(after_long_help = SCHEDULE_EXAMPLES)]
    Remove {
        /// The schedule's id.
        id: String,
        /// The version the removal was read at [default: whatever the latest is].
        #[arg(long, value_name = "V", allow_negative_numbers = true)]
        version: Option<String>,
        #[command(flatten)]
        why: Why,
    },
    /// The next slots a schedule would have, without storing anything.
    #[command(after_long_help = SCHEDULE_EXAMPLES)]
    Preview(PreviewArgs),
}

/// `skip` and `unskip`: one upcoming slot of a job.
#[derive(Debug, Args)]
pub(crate) struct UpcomingSlot {
    /// The job's name.
    pub(in crate::ops) job: String,
    /// An upcoming slot of one of the job's schedules, in RFC 3339, as `slotguard jobs --json`
    /// (`nextSlots`) or `slotguard schedule show` print it.
    pub(in crate::ops) slot: String,
    /// The partition, for a stored schedule's slots of a partition.
    #[arg(long, default_value = "")]
    pub(in crate::ops) partition: String,
    #[command(flatten)]
    pub(in crate::ops) why: Why,
}
