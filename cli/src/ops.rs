//! The operations on a cluster's store: `jobs`, `runs`, `missed`, `retry`, `cancel`, `trigger`,
//! `backfill`, `pause`, `resume`, `audit`. Each is one call of the admin API
//! ([`slotguard::admin::Admin`]) on the store the replicas share, printed as a table.
//!
//! Exit codes, for scripts: 0 done; 2 bad input (usage, a malformed date, a reason too long, a range
//! too large); 3 unknown job or slot; 4 refused by the run's status (retry of a running run); 1 the
//! store could not be reached or another failure.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use clap::{Args, Subcommand};
use slotguard::admin::{Admin, AdminError, BackfillOptions, ChangeRequest};
use slotguard::store::{Backend, RunFilter, RunRecord, RunStatus};

use crate::exit;

/// Unknown job or slot.
const NOT_FOUND: u8 = 3;
/// Refused by the run's status.
const REFUSED: u8 = 4;

/// Where the store is, shared by every operation.
#[derive(Debug, Args)]
pub(crate) struct Store {
    /// The store the replicas share: `postgres://user@host/db` or `sqlite:path/to/file.db`.
    #[arg(
        long,
        env = "SLOTGUARD_DATABASE_URL",
        value_name = "URL",
        global = true
    )]
    database_url: Option<String>,

    /// The PostgreSQL schema slotguard's tables live in.
    #[arg(
        long,
        env = "SLOTGUARD_SCHEMA",
        default_value = "slotguard",
        global = true
    )]
    schema: String,
}

/// Who asks, and why: stored in the audit trail.
#[derive(Debug, Args)]
pub(crate) struct Why {
    /// Why (stored with the change; at most 1,024 bytes).
    #[arg(long)]
    reason: String,

    /// Who asks [default: $USER, else `cli`].
    #[arg(long)]
    actor: Option<String>,
}

impl Why {
    fn request(&self) -> ChangeRequest {
        let actor = self
            .actor
            .clone()
            .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| "cli".to_owned());
        ChangeRequest::new(actor, self.reason.clone())
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

/// The operations.
#[derive(Debug, Subcommand)]
pub(crate) enum Op {
    /// List the registered jobs: schedule, zone, next slot, last run, pause state.
    Jobs,
    /// List a job's runs, newest slot first.
    Runs {
        /// The job's name.
        job: String,
        /// Only runs in this status (pending, running, succeeded, failed, abandoned, skipped, dead).
        #[arg(long)]
        status: Option<String>,
        /// Only slots at or after this instant (RFC 3339).
        #[arg(long)]
        from: Option<String>,
        /// Only slots before this instant (RFC 3339).
        #[arg(long)]
        to: Option<String>,
        /// Only this partition.
        #[arg(long)]
        partition: Option<String>,
        /// At most this many runs (1 to 1,000).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// List the slots of a job's schedule that have no run at all in a range.
    Missed {
        /// The job's name.
        job: String,
        /// From this instant (RFC 3339).
        #[arg(long)]
        from: String,
        /// Until this instant (RFC 3339) [default: now].
        #[arg(long)]
        to: Option<String>,
    },
    /// Run a finished slot again: a new attempt of the same run, same slot and idempotency key.
    Retry(SlotArgs),
    /// Cancel a running or pending run; the replica running it is told at its next heartbeat.
    Cancel(SlotArgs),
    /// Run a job now, as a manual slot that cannot collide with a scheduled one.
    Trigger {
        /// The job's name.
        job: String,
        #[command(flatten)]
        why: Why,
    },
    /// Create runs for the missing slots of a range (a dry run unless --execute).
    Backfill {
        /// The job's name.
        job: String,
        /// From this instant (RFC 3339).
        #[arg(long)]
        from: String,
        /// Until this instant (RFC 3339).
        #[arg(long)]
        to: String,
        /// Create the runs; without it, only list them.
        #[arg(long)]
        execute: bool,
        /// Runs that become due per second.
        #[arg(long, default_value_t = 1.0)]
        per_second: f64,
        #[command(flatten)]
        why: Why,
    },
    /// Pause a job on every replica (within one recovery poll).
    Pause {
        /// The job's name.
        job: String,
        #[command(flatten)]
        why: Why,
    },
    /// Resume a paused job.
    Resume {
        /// The job's name.
        job: String,
        #[command(flatten)]
        why: Why,
    },
    /// Show the audit trail, newest first.
    Audit {
        /// Only this job.
        job: Option<String>,
        /// At most this many entries.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

/// A failure, with the exit code it maps to.
struct Failure {
    code: u8,
    message: String,
}

impl From<AdminError> for Failure {
    fn from(e: AdminError) -> Self {
        let code = match &e {
            AdminError::UnknownJob { .. } | AdminError::UnknownRun { .. } => NOT_FOUND,
            AdminError::Refused { .. } => REFUSED,
            AdminError::Invalid { .. } => exit::USAGE,
            AdminError::Store(_) => exit::FAILURE,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: exit::USAGE,
        message: message.into(),
    }
}

/// Runs one operation and prints its result.
pub(crate) fn run(store: &Store, op: Op) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            exit::report(format_args!("starting the async runtime: {e}"));
            return ExitCode::from(exit::FAILURE);
        }
    };
    match runtime.block_on(async {
        let admin = connect(store).await?;
        execute(&admin, op).await
    }) {
        Ok(text) => match std::io::stdout().lock().write_all(text.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => exit::write_error(&e),
        },
        Err(failure) => {
            exit::report(failure.message);
            ExitCode::from(failure.code)
        }
    }
}

async fn connect(store: &Store) -> Result<Admin, Failure> {
    let Some(url) = store.database_url.as_deref() else {
        return Err(usage(
            "no store given: pass --database-url postgres://... or sqlite:PATH (or set SLOTGUARD_DATABASE_URL)",
        ));
    };
    let unreachable = |e: &dyn std::fmt::Display| Failure {
        code: exit::FAILURE,
        message: format!("cannot open the store: {e}"),
    };
    let backend: Arc<dyn Backend> = if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        if !std::path::Path::new(path).exists() {
            return Err(usage(format!("no SQLite store at `{path}`")));
        }
        Arc::new(
            slotguard_sqlite::SqliteBackend::open(path)
                .await
                .map_err(|e| unreachable(&e))?,
        )
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Arc::new(
            slotguard_postgres::PgBackend::builder(url)
                .schema(store.schema.clone())
                .pool_size(2)
                .connect()
                .await
                .map_err(|e| unreachable(&e))?,
        )
    } else {
        return Err(usage(
            "the store URL must start with postgres://, postgresql:// or sqlite:",
        ));
    };
    Ok(Admin::shared(backend))
}

fn instant(field: &str, value: &str) -> Result<DateTime<Utc>, Failure> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            usage(format!(
                "--{field}: `{}` is not an RFC 3339 instant such as 2026-03-08T17:00:00Z ({e})",
                value.escape_debug()
            ))
        })
}

fn status(value: &str) -> Result<RunStatus, Failure> {
    [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Abandoned,
        RunStatus::Skipped,
        RunStatus::Dead,
    ]
    .into_iter()
    .find(|s| s.as_str() == value)
    .ok_or_else(|| {
        usage(format!(
            "--status: `{}` is not one of pending, running, succeeded, failed, abandoned, skipped, dead",
            value.escape_debug()
        ))
    })
}

async fn execute(admin: &Admin, op: Op) -> Result<String, Failure> {
    Ok(match op {
        Op::Jobs => {
            let jobs = admin.jobs().await?;
            let rows = jobs
                .iter()
                .map(|j| {
                    let d = &j.record.definition;
                    vec![
                        d.name.clone(),
                        d.cron.clone(),
                        d.zone.clone(),
                        d.guard.clone(),
                        j.next_slots.first().map(ts).unwrap_or_default(),
                        j.last_run
                            .as_ref()
                            .map(|r| format!("{} {}", ts(&r.key.scheduled_at), r.status))
                            .unwrap_or_else(|| "-".into()),
                        if j.record.paused {
                            format!("paused by {}", j.record.paused_by.as_deref().unwrap_or("?"))
                        } else {
                            "active".into()
                        },
                    ]
                })
                .collect();
            table(
                &["JOB", "CRON", "ZONE", "GUARD", "NEXT", "LAST RUN", "STATE"],
                rows,
            )
        }
        Op::Runs {
            job,
            status: wanted,
            from,
            to,
            partition,
            limit,
        } => {
            let filter = RunFilter {
                job: Some(job),
                status: wanted.as_deref().map(status).transpose()?,
                partition,
                from: from.as_deref().map(|v| instant("from", v)).transpose()?,
                to: to.as_deref().map(|v| instant("to", v)).transpose()?,
                limit: limit.max(1),
            };
            runs_table(&admin.runs(filter).await?)
        }
        Op::Missed { job, from, to } => {
            let from = instant("from", &from)?;
            let to = match to {
                Some(to) => instant("to", &to)?,
                None => Utc::now(),
            };
            let missed = admin.missed(&job, from, to).await?;
            let mut out = table(
                &["SLOT", "WALL TIME", "BUSINESS DATE"],
                missed
                    .iter()
                    .map(|m| {
                        vec![
                            ts(&m.scheduled_at),
                            m.wall.format("%Y-%m-%d %H:%M:%S").to_string(),
                            m.business_date.to_string(),
                        ]
                    })
                    .collect(),
            );
            let _ = writeln!(out, "{} missed slot(s)", missed.len());
            out
        }
        Op::Retry(args) => {
            let slot = instant("slot", &args.slot)?;
            let run = admin
                .retry(&args.job, slot, &args.partition, &args.why.request())
                .await?;
            format!(
                "retry accepted: run {} of {} at {} is {}; a replica running the job takes attempt {} within one recovery poll\n",
                run.id,
                run.key.job,
                ts(&run.key.scheduled_at),
                run.status,
                run.attempt + 1
            )
        }
        Op::Cancel(args) => {
            let slot = instant("slot", &args.slot)?;
            let run = admin
                .cancel(&args.job, slot, &args.partition, &args.why.request())
                .await?;
            format!(
                "cancelled: run {} of {} at {} is {} ({})\n",
                run.id,
                run.key.job,
                ts(&run.key.scheduled_at),
                run.status,
                run.error_message.as_deref().unwrap_or("")
            )
        }
        Op::Trigger { job, why } => {
            let t = admin.trigger(&job, &why.request()).await?;
            format!(
                "triggered: run {} of {job} at {} (manual); it starts within one recovery poll\n",
                t.run_id,
                t.scheduled_at.to_rfc3339_opts(SecondsFormat::Millis, true)
            )
        }
        Op::Backfill {
            job,
            from,
            to,
            execute,
            per_second,
            why,
        } => {
            let (from, to) = (instant("from", &from)?, instant("to", &to)?);
            let options = BackfillOptions {
                dry_run: !execute,
                per_second,
            };
            let report = admin
                .backfill(&job, from, to, options, &why.request())
                .await?;
            let mut out = table(
                &["SLOT", "WALL TIME", "BUSINESS DATE"],
                report
                    .slots
                    .iter()
                    .map(|m| {
                        vec![
                            ts(&m.scheduled_at),
                            m.wall.format("%Y-%m-%d %H:%M:%S").to_string(),
                            m.business_date.to_string(),
                        ]
                    })
                    .collect(),
            );
            if report.dry_run {
                let _ = writeln!(
                    out,
                    "dry run: {} slot(s) would be created; add --execute to create them",
                    report.slots.len()
                );
            } else {
                let _ = writeln!(
                    out,
                    "created {} run(s) ({} existed already), due at {per_second}/s until {}",
                    report.created,
                    report.existing,
                    report
                        .last_due
                        .as_ref()
                        .map(ts)
                        .unwrap_or_else(|| "-".into())
                );
            }
            out
        }
        Op::Pause { job, why } => {
            let record = admin.pause(&job, &why.request()).await?;
            format!(
                "paused: {} (by {})\n",
                record.definition.name,
                record.paused_by.as_deref().unwrap_or("?")
            )
        }
        Op::Resume { job, why } => {
            let record = admin.resume(&job, &why.request()).await?;
            format!(
                "resumed: {} (by {})\n",
                record.definition.name,
                record.paused_by.as_deref().unwrap_or("?")
            )
        }
        Op::Audit { job, limit } => {
            let entries = admin.audit(job.as_deref(), limit).await?;
            table(
                &["AT", "JOB", "ACTION", "SLOT", "ACTOR", "REASON"],
                entries
                    .iter()
                    .map(|a| {
                        vec![
                            ts(&a.at),
                            a.job.clone(),
                            a.entry.action.clone(),
                            a.scheduled_at
                                .as_ref()
                                .map(ts)
                                .unwrap_or_else(|| "-".into()),
                            a.entry.actor.clone(),
                            a.entry.reason.clone(),
                        ]
                    })
                    .collect(),
            )
        }
    })
}

fn ts(t: &DateTime<Utc>) -> String {
    if t.timestamp_subsec_millis() == 0 {
        t.to_rfc3339_opts(SecondsFormat::Secs, true)
    } else {
        t.to_rfc3339_opts(SecondsFormat::Millis, true)
    }
}

fn runs_table(runs: &[RunRecord]) -> String {
    let rows = runs
        .iter()
        .map(|r| {
            vec![
                ts(&r.key.scheduled_at),
                if r.key.partition.is_empty() {
                    "-".into()
                } else {
                    r.key.partition.clone()
                },
                r.status.to_string(),
                r.attempt.to_string(),
                r.trigger.as_str().to_owned(),
                r.owner.clone().unwrap_or_else(|| "-".into()),
                r.error_message.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &[
            "SLOT",
            "PARTITION",
            "STATUS",
            "ATTEMPT",
            "TRIGGER",
            "OWNER",
            "MESSAGE",
        ],
        rows,
    )
}

/// Left-aligned columns; cells are escaped (no control characters reach the terminal) and
/// shortened to 60 characters.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let clean = |cell: &str| -> String {
        let escaped: String = cell.escape_debug().collect();
        if escaped.chars().count() > 60 {
            let head: String = escaped.chars().take(59).collect();
            format!("{head}…")
        } else {
            escaped
        }
    };
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| clean(c)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<w$}  ");
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}
