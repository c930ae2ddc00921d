//! An operation with its arguments checked, before the store is opened: reads as they are, every
//! change as the admin crate's [`Command`], the one type the HTTP router and the dashboard build
//! too. Arguments are read by [`slotguard_admin::parse`], the one reading of every front end.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use slotguard::store::{OverrideKind, RunFilter};
use slotguard_admin::parse::{instant, rate, seconds, status};
use slotguard_admin::{
    BackfillOptions, ChangeRequest, Command, MissedCursor, MissedQuery, parse_holiday_date,
    parse_page,
};

use super::args::{BackfillArgs, HolidayOp, Op, RetryArgs, SlotArgs};
use super::failure::{Failure, argument, usage};
use super::show;

mod schedule;

pub(super) use schedule::SchedulePlan;

/// An operation with its arguments checked.
#[derive(Debug)]
pub(super) enum Plan {
    Jobs {
        json: bool,
    },
    Runs {
        filter: RunFilter,
        json: bool,
    },
    Missed {
        /// `job: None` is every job; no `--to` is the end of time, which the API reads as now.
        query: MissedQuery,
        json: bool,
    },
    Run {
        job: String,
        at: DateTime<Utc>,
        partition: String,
        json: bool,
    },
    /// A change, by whom and why; `wait` is `trigger --wait`'s: how long to follow the run.
    Change {
        command: Command,
        by: ChangeRequest,
        wait: Option<Duration>,
    },
    Audit {
        job: Option<String>,
        before: Option<i64>,
        limit: usize,
        json: bool,
    },
    Replicas {
        json: bool,
    },
    /// A stored schedule's operation.
    Schedule(SchedulePlan),
    /// `holiday add` or `holiday remove`.
    Holiday {
        calendar: String,
        date: NaiveDate,
        kind: OverrideKind,
        name: Option<String>,
        by: ChangeRequest,
    },
    /// `holiday list`.
    Holidays {
        calendar: Option<String>,
        json: bool,
    },
    /// `skip` of an upcoming slot, or with `undo` its `unskip`.
    Skip {
        job: String,
        slot: DateTime<Utc>,
        partition: String,
        by: ChangeRequest,
        undo: bool,
    },
}

impl Plan {
    /// Checks every argument that can be checked without the store.
    pub(super) fn new(op: Op) -> Result<Plan, Failure> {
        Ok(match op {
            Op::Jobs { json } => Plan::Jobs { json },
            Op::Runs {
                job,
                status: wanted,
                from,
                to,
                partition,
                limit,
                json,
            } => Plan::Runs {
                filter: filter(job, wanted, (from, to), partition, &limit)?,
                json,
            },
            Op::Missed {
                job,
                from,
                to,
                limit,
                cursor,
                json,
            } => Plan::Missed {
                query: missed_query(job, (&from, to.as_deref()), &limit, cursor.as_deref())?,
                json,
            },
            Op::Run {
                job,
                slot,
                partition,
                json,
            } => Plan::Run {
                at: instant("SLOT", &slot).map_err(argument("SLOT"))?,
                job,
                partition,
                json,
            },
            Op::Retry(args) => retry(args)?,
            Op::Cancel(args) => cancel(args)?,
            Op::Trigger {
                job,
                why,
                wait,
                timeout,
            } => Plan::Change {
                command: Command::Trigger { job },
                by: why.request()?,
                wait: wait
                    .then(|| seconds("--timeout", &timeout).map_err(argument("--timeout")))
                    .transpose()?,
            },
            Op::Backfill(args) => backfill(args)?,
            Op::Pause { job, why } => change(Command::Pause { job }, why.request()?),
            Op::Resume { job, why } => change(Command::Resume { job }, why.request()?),
            Op::Audit {
                job,
                limit,
                before,
                json,
            } => Plan::Audit {
                job,
                before,
                limit: parse_page(&limit).map_err(argument("--limit"))?,
                json,
            },
            Op::Replicas { json } => Plan::Replicas { json },
            Op::Schedule(op) => Plan::Schedule(SchedulePlan::new(op)?),
            Op::Holiday(op) => holiday(op)?,
            Op::Skip(args) => schedule::skip(args, false)?,
            Op::Unskip(args) => schedule::skip(args, true)?,
        })
    }
}

/// `holiday`, every argument checked.
fn holiday(op: HolidayOp) -> Result<Plan, Failure> {
    let (calendar, date, kind, name, why) = match op {
        HolidayOp::List { calendar, json } => return Ok(Plan::Holidays { calendar, json }),
        HolidayOp::Add {
            calendar,
            date,
            name,
            why,
        } => (calendar, date, OverrideKind::Add, Some(name), why),
        HolidayOp::Remove {
            calendar,
            date,
            why,
        } => (calendar, date, OverrideKind::Remove, None, why),
    };
    Ok(Plan::Holiday {
        date: parse_holiday_date(&date).map_err(argument("DATE"))?,
        calendar,
        kind,
        name,
        by: why.request()?,
    })
}

/// A change that is not followed.
fn change(command: Command, by: ChangeRequest) -> Plan {
    Plan::Change {
        command,
        by,
        wait: None,
    }
}

/// An instant argument.
pub(super) fn at(name: &'static str, value: &str) -> Result<DateTime<Utc>, Failure> {
    instant(name, value).map_err(argument(name))
}

/// `cancel`, every argument checked.
fn cancel(args: SlotArgs) -> Result<Plan, Failure> {
    let command = Command::Cancel {
        slot: at("SLOT", &args.slot)?,
        job: args.job,
        partition: args.partition,
    };
    Ok(change(command, args.why.request()?))
}

/// `backfill`, every argument checked.
fn backfill(args: BackfillArgs) -> Result<Plan, Failure> {
    let BackfillArgs {
        job,
        from,
        to,
        execute,
        before_first_seen,
        per_second,
        why,
    } = args;
    let (from, to) = (at("--from", &from)?, at("--to", &to)?);
    range(Some(from), Some(to))?;
    let options = BackfillOptions {
        dry_run: !execute,
        per_second: rate("--per-second", &per_second).map_err(argument("--per-second"))?,
        before_first_seen,
    };
    let command = Command::Backfill {
        job,
        from,
        to,
        options,
    };
    Ok(change(command, why.request()?))
}

/// The filter of `runs`, every argument checked.
fn filter(
    job: String,
    wanted: Option<String>,
    (from, to): (Option<String>, Option<String>),
    partition: Option<String>,
    limit: &str,
) -> Result<RunFilter, Failure> {
    let from = from.as_deref().map(|v| at("--from", v)).transpose()?;
    let to = to.as_deref().map(|v| at("--to", v)).transpose()?;
    range(from, to)?;
    Ok(RunFilter {
        job: Some(job),
        status: wanted
            .as_deref()
            .map(|s| status("--status", s).map_err(argument("--status")))
            .transpose()?,
        partition,
        from,
        to,
        limit: parse_page(limit).map_err(argument("--limit"))?,
    })
}

/// A retry of one slot, or with `--failed` of every failed slot of a range.
fn retry(args: RetryArgs) -> Result<Plan, Failure> {
    let RetryArgs {
        job,
        slot,
        failed,
        from,
        to,
        partition,
        why,
    } = args;
    let command = if failed {
        let from = at("--from", from.as_deref().unwrap_or_default())?;
        let to = at("--to", to.as_deref().unwrap_or_default())?;
        range(Some(from), Some(to))?;
        Command::RetryFailed {
            job,
            from,
            to,
            partition,
        }
    } else {
        Command::Retry {
            slot: at("SLOT", slot.as_deref().unwrap_or_default())?,
            job,
            partition: partition.unwrap_or_default(),
        }
    };
    Ok(change(command, why.request()?))
}

/// A range whose `--from` is before its `--to`, when both are given.
pub(super) fn range(from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> Result<(), Failure> {
    match (from, to) {
        (Some(from), Some(to)) if from >= to => Err(usage(format!(
            "--from ({}) must be before --to ({})",
            show::ts(&from),
            show::ts(&to)
        ))),
        _ => Ok(()),
    }
}

/// The query of `missed`: `--from` and `--to` (a non-empty range; none is up to now), `--limit` by
/// the page rule, `--cursor` as a previous page wrote it.
fn missed_query(
    job: Option<String>,
    (from, to): (&str, Option<&str>),
    limit: &str,
    cursor: Option<&str>,
) -> Result<MissedQuery, Failure> {
    let from = at("--from", from)?;
    let to = to.map(|v| at("--to", v)).transpose()?;
    range(Some(from), to)?;
    Ok(MissedQuery {
        job,
        from,
        to: to.unwrap_or(DateTime::<Utc>::MAX_UTC),
        after: cursor.map(MissedCursor::parse).transpose()?,
        limit: parse_page(limit).map_err(argument("--limit"))?,
    })
}
