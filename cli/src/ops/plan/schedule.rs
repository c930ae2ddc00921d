//! The plans of the stored schedules, `skip` and `unskip`: every argument read before the store is
//! opened, the fields of a schedule as the admin crate's [`ScheduleFields`], as the HTTP router
//! reads a body into them. The expression, zone and DST policy are the admin API's to check, with
//! the job they run (its level, its calendar), when the plan is carried out.

use chrono::{DateTime, Utc};
use slotguard::timeline::MAX_REMAINING_RUNS;
use slotguard_admin::{ChangeRequest, ScheduleFields, parse_page};

use super::super::args::{AddArgs, PreviewArgs, ScheduleOp, SetArgs, SpecArgs, UpcomingSlot};
use super::super::failure::{Failure, argument, usage};
use super::super::show::shown;
use super::{Plan, at};

/// A plan of `schedule add|list|show|set|remove|preview`.
#[derive(Debug)]
pub(in crate::ops) enum SchedulePlan {
    /// A new schedule.
    Add {
        id: String,
        fields: ScheduleFields,
        by: ChangeRequest,
    },
    /// A page of the stored schedules.
    List {
        job: Option<String>,
        after: Option<String>,
        limit: usize,
        json: bool,
    },
    /// One schedule.
    Show { id: String, json: bool },
    /// A change, read at `version`.
    Set {
        id: String,
        version: i64,
        fields: ScheduleFields,
        by: ChangeRequest,
    },
    /// A removal, read at `version` (`None`: the latest).
    Remove {
        id: String,
        version: Option<i64>,
        by: ChangeRequest,
    },
    /// The next `count` slots of a schedule not stored.
    Preview {
        fields: ScheduleFields,
        count: usize,
        json: bool,
    },
}

impl SchedulePlan {
    /// Checks every argument that can be checked without the store.
    pub(in crate::ops) fn new(op: ScheduleOp) -> Result<SchedulePlan, Failure> {
        Ok(match op {
            ScheduleOp::Add(args) => add(args)?,
            ScheduleOp::List {
                job,
                after,
                limit,
                json,
            } => SchedulePlan::List {
                job,
                after,
                limit: parse_page(&limit).map_err(argument("--limit"))?,
                json,
            },
            ScheduleOp::Show { id, json } => SchedulePlan::Show { id, json },
            ScheduleOp::Set(args) => set(args)?,
            ScheduleOp::Remove { id, version, why } => SchedulePlan::Remove {
                version: version.as_deref().map(read_version).transpose()?,
                by: why.request()?,
                id,
            },
            ScheduleOp::Preview(PreviewArgs { spec, count, json }) => SchedulePlan::Preview {
                fields: spec_fields(spec)?,
                count: parse_page(&count).map_err(argument("--count"))?,
                json,
            },
        })
    }
}

/// `skip` (or with `undo`, `unskip`), every argument checked.
pub(super) fn skip(args: UpcomingSlot, undo: bool) -> Result<Plan, Failure> {
    Ok(Plan::Skip {
        slot: at("SLOT", &args.slot)?,
        job: args.job,
        partition: args.partition,
        by: args.why.request()?,
        undo,
    })
}

/// `schedule add`, every argument checked.
fn add(args: AddArgs) -> Result<SchedulePlan, Failure> {
    let AddArgs {
        id,
        spec,
        paused,
        note,
        pause_on_failure,
        why,
    } = args;
    let mut fields = spec_fields(spec)?;
    fields.paused = paused.then_some(true);
    fields.note = note.map(Some);
    fields.pause_on_failure = pause_on_failure.then_some(true);
    Ok(SchedulePlan::Add {
        by: why.request()?,
        id,
        fields,
    })
}

/// The fields of a new schedule.
fn spec_fields(spec: SpecArgs) -> Result<ScheduleFields, Failure> {
    let start_at = spec.start_at.map(|v| at("--start-at", &v)).transpose()?;
    let end_at = spec.end_at.map(|v| at("--end-at", &v)).transpose()?;
    bounds(start_at, end_at)?;
    Ok(ScheduleFields {
        job: Some(spec.job),
        cron: Some(spec.cron),
        tz: Some(spec.tz),
        dst: spec.dst,
        partition: spec.partition,
        start_at: start_at.map(Some),
        end_at: end_at.map(Some),
        remaining_runs: spec.remaining_runs.map(|n| runs(&n)).transpose()?.map(Some),
        paused: None,
        note: None,
        pause_on_failure: None,
    })
}

/// `schedule set`, every argument checked; at least one field must change.
fn set(args: SetArgs) -> Result<SchedulePlan, Failure> {
    let start_at = args.start_at.map(|v| at("--start-at", &v)).transpose()?;
    let end_at = args.end_at.map(|v| at("--end-at", &v)).transpose()?;
    bounds(start_at, end_at)?;
    let remaining_runs = args.remaining_runs.map(|n| runs(&n)).transpose()?;
    let fields = ScheduleFields {
        job: None,
        cron: args.cron,
        tz: args.tz,
        dst: args.dst,
        partition: args.partition,
        start_at: cleared(args.clear_start_at, start_at),
        end_at: cleared(args.clear_end_at, end_at),
        remaining_runs: cleared(args.clear_remaining_runs, remaining_runs),
        paused: flag(args.paused, args.resumed),
        note: cleared(args.clear_note, args.note),
        pause_on_failure: flag(args.pause_on_failure, args.no_pause_on_failure),
    };
    if fields == ScheduleFields::default() {
        return Err(usage(
            "nothing to change: give a field (--cron, --tz, --dst, --partition, --start-at, \
             --end-at, --remaining-runs, --paused, --resumed, --note, --pause-on-failure, \
             --no-pause-on-failure) or a --clear-... flag",
        ));
    }
    Ok(SchedulePlan::Set {
        version: read_version(&args.version)?,
        by: args.why.request()?,
        id: args.id,
        fields,
    })
}

/// A switch to turn on (`on`), off (`off`) or leave as it is (neither; clap refuses both).
fn flag(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// A field to change: `Some(None)` clears it, `None` keeps it.
fn cleared<T>(clear: bool, value: Option<T>) -> Option<Option<T>> {
    if clear { Some(None) } else { value.map(Some) }
}

/// A start before the end, when both are given.
fn bounds(start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>) -> Result<(), Failure> {
    match (start, end) {
        (Some(start), Some(end)) if start >= end => {
            Err(usage("--end-at: must be after --start-at"))
        }
        _ => Ok(()),
    }
}

/// A version, as `schedule show` prints it: a whole number from 1.
fn read_version(text: &str) -> Result<i64, Failure> {
    match text.trim().parse::<i64>() {
        Ok(version) if version >= 1 => Ok(version),
        _ => Err(usage(format!(
            "--version: `{}` is not a version: expected a whole number from 1, as `slotguard schedule show` prints it",
            shown(text)
        ))),
    }
}

/// A count of remaining runs: 0 to [`MAX_REMAINING_RUNS`].
fn runs(text: &str) -> Result<u32, Failure> {
    match text.trim().parse::<u32>() {
        Ok(n) if n <= MAX_REMAINING_RUNS => Ok(n),
        _ => Err(usage(format!(
            "--remaining-runs: `{}` is not a whole number from 0 to {MAX_REMAINING_RUNS}",
            shown(text)
        ))),
    }
}
