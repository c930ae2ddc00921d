//! Run-once under an external trigger: a Kubernetes CronJob (or a systemd timer) starts this binary
//! once per slot; it runs that slot of `nightly_export` through the guard chain and exits with a code
//! that tells Kubernetes or systemd what happened. Duplicate starts for one slot run the body once.
//!
//! ```text
//! # the slot from an argument, the environment (SLOTGUARD_SLOT, or SLOTGUARD_ANNOTATIONS naming the
//! # downward-API annotations file of the CronJob's pod), or the latest slot:
//! cargo run --example cronjob -- --store sqlite:/tmp/slots.db --slot 2026-12-02T02:00:00Z
//! SLOTGUARD_SLOT=latest cargo run --example cronjob -- --store sqlite:/tmp/slots.db
//! ```
//!
//! `docs/workers.md` has the CronJob manifest and the systemd units.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use slotguard::{CatchUp, Job, JobContext, RunOnce, RunOnceError, Scheduler, SlotSource};

#[derive(Parser)]
struct Args {
    /// `sqlite:<path>` or `postgres:<schema>:<url>`.
    #[arg(long)]
    store: String,
    /// The slot: an RFC 3339 instant or `latest` (default: from the environment).
    #[arg(long)]
    slot: Option<String>,
    /// How long the body takes, in milliseconds.
    #[arg(long, default_value_t = 500)]
    work_ms: u64,
    /// A file the body appends `<slot> <pid>` to (what the tests count).
    #[arg(long)]
    ledger: Option<String>,
    /// The body fails while the attempt is at most this (a pod whose work fails).
    #[arg(long, default_value_t = 0)]
    fail_attempts: u32,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    // Every way this can end has its exit code: a store that cannot be reached or opened is 4
    // (retried), bad input or configuration 2 (the Job fails), never a panic's 101.
    match run(Args::parse()).await {
        Ok(done) => {
            println!("nightly_export: {done}");
            done.exit_code()
        }
        Err(e) => {
            eprintln!("nightly_export: {e}");
            e.exit_code()
        }
    }
}

async fn run(args: Args) -> Result<RunOnce, RunOnceError> {
    let source = match &args.slot {
        Some(slot) => SlotSource::parse(slot)?,
        None => SlotSource::from_env()?,
    };
    let (ledger, work) = (args.ledger.clone(), Duration::from_millis(args.work_ms));
    let fail = args.fail_attempts;
    let job = Job::new("nightly_export", "* * * * *", move |ctx: JobContext| {
        let ledger = ledger.clone();
        async move {
            if let Some(path) = ledger {
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?;
                writeln!(
                    file,
                    "{} {}",
                    ctx.scheduled_at().to_rfc3339(),
                    std::process::id()
                )?;
            }
            tokio::time::sleep(work).await;
            if ctx.attempt() <= fail {
                return Err(std::io::Error::other("the export service answered 503"));
            }
            Ok::<_, std::io::Error>(())
        }
    })
    // A slot may start up to 10 minutes late (a cluster busy or recovering); older ones are refused.
    .catch_up(CatchUp::All {
        within: Duration::from_secs(600),
        max_slots: 10,
    })
    .retry(slotguard::RetryPolicy::exponential(
        3,
        Duration::from_secs(1),
        Duration::from_secs(10),
    ));
    let builder = Scheduler::builder()
        .stale_after(Duration::from_secs(3))
        .job(job);
    let builder = match args.store.split_once(':') {
        Some(("sqlite", path)) => {
            builder.backend(slotguard_sqlite::SqliteBackend::open(path).await?)
        }
        Some(("postgres", rest)) => {
            let (schema, url) = rest
                .split_once(':')
                .ok_or_else(|| RunOnceError::Config("expected postgres:<schema>:<url>".into()))?;
            builder.backend(
                slotguard_postgres::PgBackend::builder(url)
                    .schema(schema)
                    .connect()
                    .await?,
            )
        }
        _ => {
            let problem = format!(
                "unknown store `{}`: sqlite:<path> or postgres:<schema>:<url>",
                args.store
            );
            return Err(RunOnceError::Config(problem));
        }
    };
    builder.build()?.run_once("nightly_export", source).await
}
