//! The operations on a cluster's store: `jobs`, `runs`, `run`, `missed`, `retry`, `cancel`,
//! `trigger`, `backfill`, `pause`, `resume`, `audit`, `replicas`. Each is one call of the admin API
//! ([`slotguard_admin::Admin`]) on the store the replicas share, printed as a table (or, for the
//! listings, as JSON with `--json`).
//!
//! Every argument is checked before the store is opened ([`Plan::new`]), so bad input is reported as
//! bad input (exit 2) even when the store is unreachable. Exit codes, for scripts: 0 done; 2 bad input
//! (usage, a malformed date, a reason too long, a range too large, no store at the place named); 3
//! unknown job or slot; 4 refused by the run's status (retry of a running run) or by the job's pause
//! state (a second pause, the resume of an active job); 1 the store could not be reached, no job's
//! missed slots could be counted, or another failure; with `trigger --wait`, 5 the run ended without success (failed,
//! dead, skipped, abandoned) and 6 it had not finished when `--timeout` passed. Errors are one line
//! on stderr, prefixed `error:`.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use slotguard::store::{RunFilter, RunStatus, UnknownRunStatus};
use slotguard_admin::{
    Admin, AdminError, BackfillOptions, ChangeRequest, DEFAULT_PAGE, MissedCursor, MissedQuery,
    check_wait, finished, parse_page,
};

use crate::exit;

mod show;
mod store;

pub(crate) use store::Store;

/// Unknown job or slot.
const NOT_FOUND: u8 = 3;
/// Refused by the run's status, or by the job's pause state (a second pause, a needless resume).
const REFUSED: u8 = 4;
/// `trigger --wait`: the run ended without success (failed, dead, skipped, abandoned).
const UNSUCCESSFUL: u8 = 5;
/// `trigger --wait`: the run had not finished when `--timeout` passed.
const STILL_GOING: u8 = 6;

const EXAMPLES: &str = "\
Examples:
  export SLOTGUARD_DATABASE_URL=postgres://ops@db.internal/app   # or sqlite:/var/lib/app/slotguard.db
  slotguard jobs
  slotguard runs daily-settlement --status failed
  slotguard run daily-settlement 2026-03-08T17:00:00Z
  slotguard retry daily-settlement 2026-03-08T17:00:00Z --reason 'bank API was down'
  slotguard retry daily-settlement --failed --from 2026-03-01T00:00:00Z --to 2026-03-08T00:00:00Z --reason 'bank API was down'
  slotguard trigger daily-settlement --reason 'settle again' --wait --timeout 300
  slotguard missed daily-settlement --from 2026-03-01T00:00:00Z --json
  slotguard missed --from 2026-03-01T00:00:00Z                    # every job

Exit codes: 0 done, 2 bad input, 3 unknown job or slot, 4 refused by the run's status or the
job's pause state, 1 store unreachable, no job's missed slots countable, or another failure;
trigger --wait: 0 succeeded, 5 ended without success, 6 not finished within --timeout.";

/// Who asks, and why: stored in the audit trail.
#[derive(Debug, Args)]
pub(crate) struct Why {
    /// Why (stored with the change in the audit trail; 1 to 1,024 bytes).
    #[arg(long)]
    reason: String,

    /// Who asks, 1 to 128 bytes [default: $USER, else `cli`].
    #[arg(long)]
    actor: Option<String>,
}

impl Why {
    /// The change request, checked as the admin API checks it, so that a bad reason is bad input
    /// before the store is even opened.
    fn request(self) -> Result<ChangeRequest, Failure> {
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
    job: String,
    /// The slot, in RFC 3339 (`2026-03-08T17:00:00Z`), as `slotguard runs` prints it.
    slot: String,
    /// The partition, for a partitioned job.
    #[arg(long, default_value = "")]
    partition: String,
    #[command(flatten)]
    why: Why,
}

/// `backfill`: the missing slots of a range.
#[derive(Debug, Args)]
pub(crate) struct BackfillArgs {
    /// The job's name.
    job: String,
    /// From this instant (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    from: String,
    /// Until this instant, excluded (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    to: String,
    /// Create the runs; without it, only list them.
    #[arg(long)]
    execute: bool,
    /// Allow a range that starts before the job was first registered (history from before the
    /// job existed); without it, such a range is refused.
    #[arg(long)]
    before_first_seen: bool,
    /// Runs that become due per second, 0.001 to 1,000.
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        allow_negative_numbers = true
    )]
    per_second: String,
    #[command(flatten)]
    why: Why,
}

/// `retry`: one slot, or every failed slot of a range.
#[derive(Debug, Args)]
pub(crate) struct RetryArgs {
    /// The job's name.
    job: String,
    /// The slot, in RFC 3339 (`2026-03-08T17:00:00Z`), as `slotguard runs` prints it.
    #[arg(required_unless_present = "failed")]
    slot: Option<String>,
    /// Instead of one slot: every failed or dead run with a slot in [--from, --to), one audit entry
    /// each (at most 1,000).
    #[arg(long, conflicts_with = "slot", requires_all = ["from", "to"])]
    failed: bool,
    /// With --failed: from this instant (RFC 3339).
    #[arg(long, value_name = "RFC3339", requires = "failed")]
    from: Option<String>,
    /// With --failed: until this instant, excluded (RFC 3339).
    #[arg(long, value_name = "RFC3339", requires = "failed")]
    to: Option<String>,
    /// The partition, for a partitioned job (with --failed and no --partition: every partition).
    #[arg(long)]
    partition: Option<String>,
    #[command(flatten)]
    why: Why,
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
    /// List the scheduler processes recorded in the store: host, pid, version, roles, jobs, runs
    /// held, last heartbeat, alive or gone.
    #[command(after_long_help = EXAMPLES)]
    Replicas {
        /// One JSON object per replica and line, as the HTTP router's `GET /replicas` lists them.
        #[arg(long)]
        json: bool,
    },
}

/// A failure, with the exit code it maps to.
#[derive(Debug)]
struct Failure {
    code: u8,
    message: String,
}

impl From<AdminError> for Failure {
    fn from(e: AdminError) -> Self {
        // The admin API's own messages, except that slots are written as the CLI writes and reads
        // them (RFC 3339), not as chrono displays them (`2026-03-08 17:00:00 UTC`), so that a slot in
        // a message can be pasted back into a command.
        let (code, message) = match &e {
            AdminError::UnknownJob { .. } => (NOT_FOUND, e.to_string()),
            AdminError::UnknownRun {
                job,
                slot,
                partition,
            } => (
                NOT_FOUND,
                format!(
                    "job `{job}` has no run for slot {}{}",
                    show::ts(slot),
                    if partition.is_empty() {
                        String::new()
                    } else {
                        format!(" (partition `{}`)", show::shown(partition))
                    }
                ),
            ),
            AdminError::Refused {
                action,
                job,
                slot,
                status,
                hint,
            } => (
                REFUSED,
                format!(
                    "{action} refused for job `{job}` slot {}: the run is {status}; {hint}",
                    show::ts(slot)
                ),
            ),
            AdminError::PauseState { .. } => (REFUSED, e.to_string()),
            AdminError::Invalid { .. } => (exit::USAGE, e.to_string()),
            AdminError::Store(_) => (exit::FAILURE, e.to_string()),
        };
        Failure { code, message }
    }
}

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: exit::USAGE,
        message: message.into(),
    }
}

fn failure(message: impl Into<String>) -> Failure {
    Failure {
        code: exit::FAILURE,
        message: message.into(),
    }
}

/// A slot asked for by `retry` and `cancel`.
#[derive(Debug)]
struct Slot {
    job: String,
    at: DateTime<Utc>,
    partition: String,
}

/// An operation with its arguments checked.
#[derive(Debug)]
enum Plan {
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
        slot: Slot,
        json: bool,
    },
    Retry(Slot, ChangeRequest),
    RetryFailed {
        job: String,
        range: (DateTime<Utc>, DateTime<Utc>),
        partition: Option<String>,
        by: ChangeRequest,
    },
    Cancel(Slot, ChangeRequest),
    Trigger {
        job: String,
        by: ChangeRequest,
        /// `--wait`: how long to follow the run.
        wait: Option<Duration>,
    },
    Backfill {
        job: String,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        options: BackfillOptions,
        by: ChangeRequest,
    },
    Pause(String, ChangeRequest),
    Resume(String, ChangeRequest),
    Audit {
        job: Option<String>,
        before: Option<i64>,
        limit: usize,
        json: bool,
    },
    Replicas {
        json: bool,
    },
}

impl Plan {
    /// Checks every argument that can be checked without the store.
    fn new(op: Op) -> Result<Plan, Failure> {
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
                filter: Plan::filter(job, wanted, (from, to), partition, &limit)?,
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
                slot: Slot {
                    at: instant("SLOT", &slot)?,
                    job,
                    partition,
                },
                json,
            },
            Op::Retry(args) => Plan::retry(args)?,
            Op::Cancel(args) => {
                let (slot, by) = slot(args)?;
                Plan::Cancel(slot, by)
            }
            Op::Trigger {
                job,
                why,
                wait,
                timeout,
            } => Plan::Trigger {
                job,
                by: why.request()?,
                wait: wait.then(|| seconds(&timeout)).transpose()?,
            },
            Op::Backfill(args) => Plan::backfill_of(args)?,
            Op::Pause { job, why } => Plan::Pause(job, why.request()?),
            Op::Resume { job, why } => Plan::Resume(job, why.request()?),
            Op::Audit {
                job,
                limit,
                before,
                json,
            } => Plan::Audit {
                job,
                before,
                limit: page(&limit)?,
                json,
            },
            Op::Replicas { json } => Plan::Replicas { json },
        })
    }

    /// `backfill`, every argument checked.
    fn backfill_of(args: BackfillArgs) -> Result<Plan, Failure> {
        let BackfillArgs {
            job,
            from,
            to,
            execute,
            before_first_seen,
            per_second,
            why,
        } = args;
        let (from, to) = (instant("--from", &from)?, instant("--to", &to)?);
        range(Some(from), Some(to))?;
        let options = (!execute, before_first_seen);
        Plan::backfill(job, (from, to), options, &per_second, why)
    }

    /// The filter of `runs`, every argument checked.
    fn filter(
        job: String,
        wanted: Option<String>,
        (from, to): (Option<String>, Option<String>),
        partition: Option<String>,
        limit: &str,
    ) -> Result<RunFilter, Failure> {
        let from = from.as_deref().map(|v| instant("--from", v)).transpose()?;
        let to = to.as_deref().map(|v| instant("--to", v)).transpose()?;
        range(from, to)?;
        Ok(RunFilter {
            job: Some(job),
            status: wanted.as_deref().map(status).transpose()?,
            partition,
            from,
            to,
            limit: page(limit)?,
        })
    }

    /// A retry of one slot, or with `--failed` of every failed slot of a range.
    fn retry(args: RetryArgs) -> Result<Plan, Failure> {
        let RetryArgs {
            job,
            slot: at,
            failed,
            from,
            to,
            partition,
            why,
        } = args;
        if failed {
            let from = instant("--from", from.as_deref().unwrap_or_default())?;
            let to = instant("--to", to.as_deref().unwrap_or_default())?;
            range(Some(from), Some(to))?;
            return Ok(Plan::RetryFailed {
                job,
                range: (from, to),
                partition,
                by: why.request()?,
            });
        }
        let (slot, by) = slot(SlotArgs {
            job,
            slot: at.unwrap_or_default(),
            partition: partition.unwrap_or_default(),
            why,
        })?;
        Ok(Plan::Retry(slot, by))
    }

    /// A backfill of `range`, its rate and reason checked.
    fn backfill(
        job: String,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        (dry_run, before_first_seen): (bool, bool),
        per_second: &str,
        why: Why,
    ) -> Result<Plan, Failure> {
        Ok(Plan::Backfill {
            job,
            from,
            to,
            options: BackfillOptions {
                dry_run,
                per_second: rate(per_second)?,
                before_first_seen,
            },
            by: why.request()?,
        })
    }

    /// Asks the store, and renders the answer with its exit code.
    async fn execute(self, admin: &Admin) -> Result<Answer, Failure> {
        Ok(Answer::from(match self {
            Plan::Jobs { json } => show::jobs(&admin.jobs().await?, json),
            Plan::Runs { filter, json } => show::runs(&admin.runs(filter).await?, json),
            Plan::Missed { query, json } => {
                let one = query.job.is_some();
                let whole = !one && query.after.is_none();
                let page = admin.missed_page(query).await?;
                if whole && page.next.is_none() {
                    // The whole listing in one page: say so when no job could be counted.
                    none_counted(&page.jobs)?;
                }
                show::missed(&page, one, json)
            }
            Plan::Run { slot, json } => {
                show::run(&admin.run(&slot.job, slot.at, &slot.partition).await?, json)
            }
            Plan::RetryFailed {
                job,
                range,
                partition,
                by,
            } => show::range_retried(
                &job,
                &admin
                    .retry_failed(&job, range, partition.as_deref(), &by)
                    .await?,
            ),
            Plan::Trigger { job, by, wait } => {
                let triggered = admin.trigger(&job, &by).await?;
                let text = show::triggered(&job, &triggered);
                let Some(timeout) = wait else {
                    return Ok(Answer::from(text));
                };
                // Said before the wait, so that a person sees what is being waited for.
                print(&text)?;
                let run = admin
                    .wait(&job, triggered.scheduled_at, "", timeout)
                    .await?;
                return Ok(Answer {
                    text: show::waited(&run, timeout),
                    code: outcome_code(&run),
                });
            }
            Plan::Retry(slot, by) => show::retried(
                &admin
                    .retry(&slot.job, slot.at, &slot.partition, &by)
                    .await?,
            ),
            Plan::Cancel(slot, by) => cancel(admin, &slot, &by).await?,
            Plan::Backfill {
                job,
                from,
                to,
                options,
                by,
            } => show::backfilled(
                &admin.backfill(&job, from, to, options, &by).await?,
                options.per_second,
            ),
            Plan::Pause(job, by) => show::paused(&admin.pause(&job, &by).await?, &by.actor),
            Plan::Resume(job, by) => show::paused(&admin.resume(&job, &by).await?, &by.actor),
            Plan::Audit {
                job,
                before,
                limit,
                json,
            } => show::audit(
                &admin.audit_page(job.as_deref(), before, limit).await?,
                limit,
                json,
            ),
            Plan::Replicas { json } => show::replicas(&admin.replicas().await?, json),
        }))
    }
}

/// `cancel`, said from what the run was: a running run's replica is told, a pending run never
/// starts.
async fn cancel(admin: &Admin, slot: &Slot, by: &ChangeRequest) -> Result<String, Failure> {
    let was = admin.run(&slot.job, slot.at, &slot.partition).await?.status;
    let run = admin
        .cancel(&slot.job, slot.at, &slot.partition, by)
        .await?;
    Ok(show::cancelled(&run, was))
}

/// `missed` over every job fails (exit 1) when not one job could be counted: "0 missed" would be
/// an answer that was never found.
fn none_counted(found: &[slotguard_admin::JobMissed]) -> Result<(), Failure> {
    if found.is_empty() || found.iter().any(|j| j.missed.is_ok()) {
        return Ok(());
    }
    let reasons: Vec<String> = found
        .iter()
        .take(3)
        .filter_map(|j| {
            Some(format!(
                "{}: {}",
                show::shown(&j.job),
                j.missed.as_ref().err()?
            ))
        })
        .collect();
    let more = match found.len().saturating_sub(3) {
        0 => String::new(),
        n => format!("; and {n} more"),
    };
    Err(failure(format!(
        "no job's missed slots could be counted: {}{more}",
        reasons.join("; ")
    )))
}

/// What an operation prints, and its exit code.
struct Answer {
    text: String,
    code: u8,
}

impl From<String> for Answer {
    fn from(text: String) -> Self {
        Answer { text, code: 0 }
    }
}

/// `trigger --wait`'s exit code for the run as the wait left it.
fn outcome_code(run: &slotguard::store::RunRecord) -> u8 {
    match run.status {
        _ if !finished(run) => STILL_GOING,
        RunStatus::Succeeded => 0,
        _ => UNSUCCESSFUL,
    }
}

/// Prints `text` now, on stdout.
fn print(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| failure(format!("writing output: {e}")))
}

/// Runs one operation and prints its result.
pub(crate) fn run(store: &Store, op: Op) -> ExitCode {
    let result = Plan::new(op).and_then(|plan| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failure(format!("starting the async runtime: {e}")))?;
        runtime.block_on(async {
            let admin = store.open().await?;
            plan.execute(&admin).await
        })
    });
    match result {
        Ok(answer) => match std::io::stdout().lock().write_all(answer.text.as_bytes()) {
            Ok(()) => ExitCode::from(answer.code),
            Err(e) => exit::write_error(&e),
        },
        Err(failure) => {
            exit::report(show::one_line(&failure.message));
            ExitCode::from(failure.code)
        }
    }
}

fn slot(args: SlotArgs) -> Result<(Slot, ChangeRequest), Failure> {
    let at = instant("SLOT", &args.slot)?;
    Ok((
        Slot {
            job: args.job,
            at,
            partition: args.partition,
        },
        args.why.request()?,
    ))
}

fn instant(field: &str, value: &str) -> Result<DateTime<Utc>, Failure> {
    DateTime::parse_from_rfc3339(value.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            usage(format!(
                "{field}: `{}` is not an RFC 3339 instant such as 2026-03-08T17:00:00Z ({e})",
                show::shown(value)
            ))
        })
}

fn range(from: Option<DateTime<Utc>>, to: Option<DateTime<Utc>>) -> Result<(), Failure> {
    match (from, to) {
        (Some(from), Some(to)) if from >= to => Err(usage(format!(
            "--from ({}) must be before --to ({})",
            show::ts(&from),
            show::ts(&to)
        ))),
        _ => Ok(()),
    }
}

/// `--limit`, by the admin API's rule for every listing ([`parse_page`]).
fn page(limit: &str) -> Result<usize, Failure> {
    parse_page(limit).map_err(|e| match e {
        AdminError::Invalid { problem, .. } => usage(format!("--limit: {problem}")),
        other => Failure::from(other),
    })
}

/// `--timeout`: a number of seconds within the admin API's bound on a wait.
fn seconds(value: &str) -> Result<Duration, Failure> {
    let bad = || {
        usage(format!(
            "--timeout: `{}` is not a number of seconds from 0 to 3600",
            show::shown(value)
        ))
    };
    let secs = value.trim().parse::<f64>().map_err(|_| bad())?;
    let timeout = Duration::try_from_secs_f64(secs).map_err(|_| bad())?;
    check_wait(timeout).map_err(|_| bad())?;
    Ok(timeout)
}

/// The query of `missed`: `--from` and `--to` (a non-empty range; none is up to now), `--limit` by
/// the page rule, `--cursor` as a previous page wrote it.
fn missed_query(
    job: Option<String>,
    (from, to): (&str, Option<&str>),
    limit: &str,
    cursor: Option<&str>,
) -> Result<MissedQuery, Failure> {
    let from = instant("--from", from)?;
    let to = to.map(|v| instant("--to", v)).transpose()?;
    range(Some(from), to)?;
    Ok(MissedQuery {
        job,
        from,
        to: to.unwrap_or(DateTime::<Utc>::MAX_UTC),
        after: cursor.map(MissedCursor::parse).transpose()?,
        limit: page(limit)?,
    })
}

/// `--per-second`: a number of runs per second within the admin API's bounds.
fn rate(value: &str) -> Result<f64, Failure> {
    let per_second = value.trim().parse::<f64>().map_err(|_| {
        usage(format!(
            "--per-second: `{}` is not a number of runs per second",
            show::shown(value)
        ))
    })?;
    let options = BackfillOptions {
        per_second,
        ..BackfillOptions::default()
    };
    match options.validate() {
        Err(AdminError::Invalid { problem, .. }) => Err(usage(format!("--per-second: {problem}"))),
        other => other.map(|()| per_second).map_err(Failure::from),
    }
}

/// A run status, in any case and with blanks around it.
fn status(value: &str) -> Result<RunStatus, Failure> {
    value
        .parse()
        .or_else(|e| value.trim().to_ascii_lowercase().parse().map_err(|_| e))
        .map_err(|e: UnknownRunStatus| usage(format!("--status: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use slotguard_admin::MAX_REASON_BYTES;

    fn why(reason: &str) -> Why {
        Why {
            reason: reason.to_owned(),
            actor: Some("ops".to_owned()),
        }
    }

    #[test]
    fn reasons_are_checked_by_the_admin_api_before_the_store_is_opened() {
        for (reason, problem) in [
            ("", "must not be empty"),
            ("  ", "must not be empty"),
            ("a\u{7}b", "contains control characters"),
        ] {
            let err = why(reason).request().unwrap_err();
            assert_eq!(err.code, exit::USAGE);
            assert_eq!(err.message, format!("invalid reason: {problem}"));
        }
        let long = "x".repeat(MAX_REASON_BYTES + 1);
        let err = why(&long).request().unwrap_err();
        assert_eq!(
            err.message,
            "invalid reason: is 1025 bytes; at most 1024 are accepted"
        );
        assert!(why("two\nlines\tand a tab").request().is_ok());
        assert!(why(&"x".repeat(MAX_REASON_BYTES)).request().is_ok());
    }

    #[test]
    fn limits_and_statuses() {
        assert_eq!(page("1").unwrap(), 1);
        assert_eq!(page("1000").unwrap(), 1000);
        for bad in [
            "0",
            "-1",
            "1001",
            "100000",
            "-9223372036854775808",
            "ten",
            "",
        ] {
            let err = page(bad).unwrap_err();
            assert_eq!(err.code, exit::USAGE, "{bad}");
            assert!(err.message.starts_with("--limit: "), "{}", err.message);
        }
        assert_eq!(status("Failed").unwrap(), RunStatus::Failed);
        let err = status("fail\ned").unwrap_err();
        assert!(err.message.contains("`fail\\ned`"), "{}", err.message);
    }

    #[test]
    fn instants_and_ranges() {
        assert_eq!(
            show::ts(&instant("SLOT", "2026-03-09T02:00:00+09:00").unwrap()),
            "2026-03-08T17:00:00Z"
        );
        let err = instant("SLOT", &"9".repeat(10_000)).unwrap_err();
        assert_eq!(err.code, exit::USAGE);
        assert!(err.message.len() < 200, "{}", err.message);
        let a = instant("--from", "2026-03-08T00:00:00Z").unwrap();
        assert!(range(Some(a), Some(a)).is_err());
        assert!(range(Some(a), None).is_ok());
    }

    #[test]
    fn backfill_rates_are_bounded() {
        assert_eq!(rate(" 0.5 ").unwrap(), 0.5);
        assert_eq!(rate("0.001").unwrap(), 0.001);
        assert_eq!(rate("1000").unwrap(), 1000.0);
        for bad in [
            "1e-300", "1e-12", "1e-10", "0", "-1", "1000.5", "inf", "NaN",
        ] {
            let err = rate(bad).unwrap_err();
            assert_eq!(err.code, exit::USAGE, "{bad}");
            assert!(
                err.message.starts_with("--per-second: "),
                "{bad}: {}",
                err.message
            );
        }
        assert!(rate("fast").unwrap_err().message.contains("`fast`"));
    }

    mod no_panic {
        use super::super::*;
        use clap::Parser;
        use proptest::prelude::*;
        use slotguard::MemoryBackend;
        use slotguard::store::{AdminStore, JobDefinition};

        #[derive(Parser)]
        struct Line {
            #[command(subcommand)]
            op: Op,
        }

        const JOB: &str = "daily-settlement";

        /// The admin API over a memory store with one job, every hour in Seoul.
        async fn admin() -> Admin {
            let backend = MemoryBackend::new();
            let cron = "0 * * * *";
            let definition = JobDefinition {
                name: JOB.to_owned(),
                cron: cron.to_owned(),
                zone: "Asia/Seoul".to_owned(),
                dst: "vixie".to_owned(),
                guard: "slot".to_owned(),
                fingerprint: slotguard::Schedule::parse(cron, "Asia/Seoul")
                    .unwrap()
                    .fingerprint(),
            };
            backend.register_jobs(&[definition]).await.unwrap();
            Admin::new(backend)
        }

        fn job() -> impl Strategy<Value = String> {
            prop_oneof![3 => Just(JOB.to_owned()), 1 => any::<String>()]
        }

        /// Recent instants (ranges with missing slots), the ends of RFC 3339, or anything.
        fn instant() -> impl Strategy<Value = String> {
            prop_oneof![
                4 => (1i64..72).prop_map(|h| (Utc::now() - chrono::Duration::hours(h)).to_rfc3339()),
                1 => Just("0000-01-01T00:00:00Z".to_owned()),
                1 => Just("9999-12-31T23:59:59.999Z".to_owned()),
                1 => any::<String>(),
            ]
        }

        /// A number as text: tiny, huge, negative, not finite, or anything.
        fn number() -> impl Strategy<Value = String> {
            prop_oneof![
                2 => prop::sample::select(vec!["1e-300", "5e-324", "1e-12", "1e-10", "0.001", "1000", "1e300", "-1", "0", "inf"]).prop_map(str::to_owned),
                2 => any::<f64>().prop_map(|n| n.to_string()),
                1 => any::<i64>().prop_map(|n| n.to_string()),
                1 => any::<String>(),
            ]
        }

        /// The arguments of any operation.
        fn args() -> impl Strategy<Value = Vec<String>> {
            let s = |v: &str| v.to_owned();
            prop_oneof![
                1 => Just(vec![s("jobs")]),
                1 => (job(), instant(), instant(), number(), prop::option::of(any::<String>())).prop_map(move |(j, f, t, n, p)| {
                    let mut a = vec![s("runs"), j, s("--from"), f, s("--to"), t, s("--limit"), n];
                    a.extend(p.map(|p| [s("--partition"), p]).into_iter().flatten());
                    a
                }),
                1 => (job(), instant(), prop::option::of(instant())).prop_map(move |(j, f, t)| {
                    let mut a = vec![s("missed"), j, s("--from"), f];
                    a.extend(t.map(|t| [s("--to"), t]).into_iter().flatten());
                    a
                }),
                1 => (prop::sample::select(vec!["retry", "cancel"]), job(), instant(), any::<String>(), any::<String>()).prop_map(move |(op, j, slot, p, r)| {
                    vec![s(op), j, slot, s("--partition"), p, s("--reason"), r]
                }),
                1 => (prop::sample::select(vec!["trigger", "pause", "resume"]), job(), any::<String>()).prop_map(move |(op, j, r)| {
                    vec![s(op), j, s("--reason"), r]
                }),
                1 => (job(), instant(), any::<String>(), any::<bool>()).prop_map(move |(j, slot, p, json)| {
                    let mut a = vec![s("run"), j, slot, s("--partition"), p];
                    if json {
                        a.push(s("--json"));
                    }
                    a
                }),
                1 => (job(), instant(), instant(), prop::option::of(any::<String>()), any::<String>()).prop_map(move |(j, f, t, p, r)| {
                    let mut a = vec![s("retry"), j, s("--failed"), s("--from"), f, s("--to"), t, s("--reason"), r];
                    a.extend(p.map(|p| [s("--partition"), p]).into_iter().flatten());
                    a
                }),
                // A timeout that ends at once: nothing runs the manual run on a memory store.
                1 => (job(), prop::sample::select(vec!["0", "-1", "3601", "NaN", "inf", "soon"])).prop_map(move |(j, t)| {
                    vec![s("trigger"), j, s("--reason"), s("proptest"), s("--wait"), s("--timeout"), s(t)]
                }),
                4 => (job(), instant(), instant(), any::<bool>(), number()).prop_map(move |(j, f, t, execute, n)| {
                    let mut a = vec![s("backfill"), j, s("--from"), f, s("--to"), t, s("--per-second"), n, s("--reason"), s("proptest")];
                    if execute {
                        a.push(s("--execute"));
                    }
                    a
                }),
                1 => (prop::option::of(job()), number()).prop_map(move |(j, n)| {
                    let mut a = vec![s("audit"), s("--limit"), n];
                    a.extend(j);
                    a
                }),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Whatever the arguments, an operation ends in an answer or a failure with its exit
            /// code, never in a panic (exit 101).
            #[test]
            fn no_operation_panics(args in args()) {
                let Ok(line) = Line::try_parse_from(std::iter::once("slotguard".to_owned()).chain(args)) else {
                    return Ok(());
                };
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let result = Plan::new(line.op)
                    .and_then(|plan| runtime.block_on(async { plan.execute(&admin().await).await }));
                if let Err(failure) = result {
                    prop_assert_ne!(failure.code, exit::FAILURE, "{}", failure.message);
                }
            }
        }
    }
}
