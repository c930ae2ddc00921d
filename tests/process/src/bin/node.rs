//! A replica process for the multi-process tests, on a real store.
//!
//! ```text
//! sg-node --store sqlite:/tmp/x.db | postgres:postgres://...#schema
//!         --instance a --ledger /tmp/ledger --jobs 10 --cron "* * * * * *" --work-ms 50
//!         [--guard slot|lock] [--stale-ms 3000] [--recovery-ms 500] [--grace-ms 5000]
//!         [--lock-check-ms 500] [--namespace default]
//! ```
//!
//! Every job body appends to the effects ledger before doing anything else (`start <job> <slot>
//! <attempt> <token> <instance> <pid>`), then works for `--work-ms` (or until told to stop), then
//! appends `end ...` or `lost ...` with whether its ownership was lost. Duplicates are counted from the
//! ledger, from what actually ran. Prints `ready` once started and `stopped ...` after a graceful
//! shutdown on SIGTERM or SIGINT.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use slotguard::{GuardLevel, Job, JobContext, JobError, RetryPolicy, Scheduler};

struct Args(Vec<String>);

impl Args {
    fn get(&self, name: &str) -> Option<&str> {
        let flag = format!("--{name}");
        self.0
            .iter()
            .position(|a| *a == flag)
            .and_then(|i| self.0.get(i + 1))
            .map(String::as_str)
    }

    fn ms(&self, name: &str, default: u64) -> Duration {
        Duration::from_millis(
            self.get(name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(default),
        )
    }
}

fn append(ledger: &str, line: &str) {
    // One write per line with O_APPEND: lines of several processes never interleave.
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ledger)
    {
        let _ = f.write_all(format!("{line}\n").as_bytes());
        let _ = f.sync_data();
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args(std::env::args().collect());
    let store = args.get("store").ok_or("--store is required")?.to_owned();
    let instance = args.get("instance").unwrap_or("node").to_owned();
    let ledger: Arc<str> = Arc::from(args.get("ledger").ok_or("--ledger is required")?);
    let jobs: usize = args.get("jobs").and_then(|v| v.parse().ok()).unwrap_or(1);
    let cron = args.get("cron").unwrap_or("* * * * * *").to_owned();
    let work = args.ms("work-ms", 50);
    let guard = match args.get("guard").unwrap_or("slot") {
        "lock" => GuardLevel::Lock,
        _ => GuardLevel::Slot,
    };

    let mut builder = Scheduler::builder()
        .instance_id(instance.clone())
        .stale_after(args.ms("stale-ms", 3_000))
        .recovery_interval(args.ms("recovery-ms", 500))
        .grace_period(args.ms("grace-ms", 5_000))
        .kill_after(Duration::from_millis(500))
        .lock_namespace(args.get("namespace").unwrap_or("default"));
    builder = if let Some(path) = store.strip_prefix("sqlite:") {
        builder.backend(slotguard_sqlite::SqliteBackend::open(path).await?)
    } else if let Some(rest) = store.strip_prefix("postgres:") {
        let (url, schema) = rest.split_once('#').unwrap_or((rest, "slotguard"));
        let backend = slotguard_postgres::PgBackend::builder(url)
            .schema(schema)
            .lock_liveness_interval(args.ms("lock-check-ms", 500))
            .connect()
            .await?;
        builder.backend(backend)
    } else {
        return Err(format!("unknown store {store}").into());
    };

    for n in 0..jobs {
        let ledger = Arc::clone(&ledger);
        let instance = instance.clone();
        let name = format!("job{n:03}");
        builder = builder.job(
            Job::new(name, cron.clone(), move |ctx: JobContext| {
                let ledger = Arc::clone(&ledger);
                let instance = instance.clone();
                async move {
                    let id = format!(
                        "{} {} {} {} {} {}",
                        ctx.job_name(),
                        ctx.scheduled_at().format("%Y-%m-%dT%H:%M:%SZ"),
                        ctx.attempt(),
                        ctx.fencing_token().unwrap_or(0),
                        instance,
                        std::process::id()
                    );
                    append(&ledger, &format!("start {id}"));
                    tokio::select! {
                        () = tokio::time::sleep(work) => {}
                        () = ctx.cancelled() => {}
                    }
                    if ctx.is_lost() {
                        append(&ledger, &format!("lost {id}"));
                        return Err(JobError::from("ownership lost"));
                    }
                    if ctx.is_cancelled() {
                        append(&ledger, &format!("cancelled {id}"));
                        return Err(JobError::from("stopped by shutdown"));
                    }
                    append(&ledger, &format!("end {id}"));
                    Ok(())
                }
            })
            .guard(guard)
            .retry(RetryPolicy::exponential(
                5,
                Duration::from_millis(200),
                Duration::from_secs(2),
            )),
        );
    }
    let handle = builder.build()?.try_start().await?;
    say("ready");

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    say("signal");
    let report = handle.shutdown().await;
    say(&format!(
        "stopped in_flight={} finished_in_grace={} abandoned={}",
        report.in_flight, report.finished_in_grace, report.abandoned
    ));
    Ok(())
}
