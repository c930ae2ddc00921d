//! The quick start: three replicas, as three OS processes, share one store and run seconds-level jobs.
//! Each slot runs once across them.
//!
//! ```text
//! cargo run --example quickstart                                   # SQLite file, no setup
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example quickstart
//! ```
//!
//! Runs for about 20 seconds, or until Ctrl-C, then shuts the replicas down gracefully and prints which
//! replica ran each slot, the attempts, and the number of slots, runs and duplicate executions.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use slotguard::{Job, JobContext, JobError, Overlap, RetryPolicy, Scheduler};

const REPLICAS: usize = 3;
const RUN_FOR: Duration = Duration::from_secs(20);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--replica") {
        Some(i) => replica(&args[i + 1], &args[i + 2], &args[i + 3]).await,
        None => coordinator().await,
    }
}

/// Starts the replicas, lets them run, stops them, and reports from the effects ledger.
async fn coordinator() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("slotguard-quickstart-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ledger = dir.join("ledger.txt");
    let store = match std::env::var("DATABASE_URL") {
        Ok(url) if url.starts_with("postgres") => format!("postgres:{url}"),
        _ => format!("sqlite:{}", dir.join("slots.db").display()),
    };
    let shown = store.split('@').next_back().unwrap_or(&store);
    println!("slotguard quick start: {REPLICAS} replicas (separate processes) sharing {shown}");
    println!(
        "jobs: settlement every 2 s, report every 5 s (takes 6 s: overlapping slots are skipped),"
    );
    println!("      sync every 3 s (its first attempt fails and is retried)\n");

    let exe = std::env::current_exe()?;
    let mut children: Vec<Child> = (1..=REPLICAS)
        .map(|n| {
            Command::new(&exe)
                .args([
                    "--replica",
                    &n.to_string(),
                    &store,
                    &ledger.to_string_lossy(),
                ])
                .spawn()
        })
        .collect::<Result<_, _>>()?;

    tokio::select! {
        () = tokio::time::sleep(RUN_FOR) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    println!(
        "\nstopping the replicas (SIGTERM): no new claims, running jobs finish or are handed over ..."
    );
    for child in &children {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }
    for child in &mut children {
        child.wait()?;
    }
    report(&ledger);
    store_summary(&store).await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// What the store recorded: runs by status, and the skipped slots with their reason.
async fn store_summary(store: &str) {
    // The two backends' inspection rows are different types with the same fields.
    let row = |key: slotguard::store::SlotKey, status: slotguard::store::RunStatus, message| {
        (
            key.job,
            key.scheduled_at.format("%H:%M:%S").to_string(),
            status.to_string(),
            message,
        )
    };
    let rows: Vec<(String, String, String, Option<String>)> = match store.strip_prefix("sqlite:") {
        Some(path) => match slotguard_sqlite::SqliteBackend::open(path).await {
            Ok(b) => b
                .runs(None)
                .await
                .unwrap_or_default()
                .into_iter()
                .map(|r| row(r.key, r.status, r.error_message))
                .collect(),
            Err(_) => Vec::new(),
        },
        None => {
            let url = store.strip_prefix("postgres:").unwrap_or(store);
            let backend = slotguard_postgres::PgBackend::builder(url)
                .schema("slotguard_quickstart")
                .connect()
                .await;
            match backend {
                Ok(b) => b
                    .runs(None)
                    .await
                    .unwrap_or_default()
                    .into_iter()
                    .map(|r| row(r.key, r.status, r.error_message))
                    .collect(),
                Err(_) => Vec::new(),
            }
        }
    };
    let mut by_status: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, _, status, _) in &rows {
        *by_status.entry(status.as_str()).or_default() += 1;
    }
    let counts: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!(
        "the store recorded {} runs: {}",
        rows.len(),
        counts.join(", ")
    );
    for (job, slot, _, reason) in rows.iter().filter(|r| r.2 == "skipped") {
        println!(
            "  {job} {slot} skipped: {}",
            reason.as_deref().unwrap_or("-")
        );
    }
}

/// Prints the closing summary from the effects ledger: what actually ran, not what the store says.
fn report(ledger: &PathBuf) {
    let text = std::fs::read_to_string(ledger).unwrap_or_default();
    let mut runs: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if let [job, slot, replica, attempt] = f[..] {
            runs.entry((job.to_owned(), slot.to_owned()))
                .or_default()
                .push((replica.to_owned(), attempt.to_owned()));
        }
    }
    println!("\n{:<11} {:<9} ran on (replica/attempt)", "job", "slot");
    for ((job, slot), ran) in &runs {
        let who: Vec<String> = ran.iter().map(|(r, a)| format!("{r}/{a}")).collect();
        println!("{job:<11} {slot:<9} {}", who.join(", "));
    }
    // A retry is a second attempt of the same slot, not a duplicate: count each attempt once.
    let executions: usize = runs.values().map(Vec::len).sum();
    let duplicates: usize = runs
        .values()
        .map(|ran| {
            let mut attempts: Vec<&String> = ran.iter().map(|(_, a)| a).collect();
            let all = attempts.len();
            attempts.sort();
            attempts.dedup();
            all - attempts.len()
        })
        .sum();
    println!(
        "\n{} slots, {} runs (attempts included), {} duplicate executions",
        runs.len(),
        executions,
        duplicates
    );
}

/// One replica: the same binary, started with `--replica N STORE LEDGER`.
async fn replica(n: &str, store: &str, ledger: &str) -> Result<(), Box<dyn std::error::Error>> {
    let me: Arc<str> = Arc::from(format!("replica-{n}"));
    let n = n.to_owned();
    let ledger: Arc<str> = Arc::from(ledger);
    let mut builder = Scheduler::builder()
        .instance_id(me.to_string())
        .grace_period(Duration::from_secs(3))
        .stale_after(Duration::from_secs(6))
        .recovery_interval(Duration::from_millis(500));
    builder = if let Some(path) = store.strip_prefix("sqlite:") {
        builder.backend(slotguard_sqlite::SqliteBackend::open(path).await?)
    } else {
        let url = store.strip_prefix("postgres:").unwrap_or(store);
        builder.backend(
            slotguard_postgres::PgBackend::builder(url)
                .schema("slotguard_quickstart")
                .connect()
                .await?,
        )
    };
    let ran = move |ctx: &JobContext, note: &str| {
        let slot = ctx.scheduled_at().format("%H:%M:%S").to_string();
        // One write per line (O_APPEND): lines of the three processes never interleave.
        let line = format!("{} {slot} {n} {}\n", ctx.job_name(), ctx.attempt());
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&*ledger)
        {
            let _ = f.write_all(line.as_bytes());
        }
        println!(
            "{:<10} {:<11} slot {slot}  attempt {}  token {:<4} {note}",
            me,
            ctx.job_name(),
            ctx.attempt(),
            ctx.fencing_token().unwrap_or_default()
        );
    };
    let ran = Arc::new(ran);

    let r = Arc::clone(&ran);
    builder = builder.job(Job::new(
        "settlement",
        "*/2 * * * * *",
        move |ctx: JobContext| {
            let r = Arc::clone(&r);
            async move {
                r(&ctx, &format!("key {}", ctx.idempotency_key()));
                Ok::<(), JobError>(())
            }
        },
    ));
    let r = Arc::clone(&ran);
    builder = builder.job(
        Job::new("report", "*/5 * * * * *", move |ctx: JobContext| {
            let r = Arc::clone(&r);
            async move {
                r(&ctx, "started (takes 6 s)");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(6)) => Ok(()),
                    () = ctx.cancelled() => Err(JobError::from("stopped by shutdown")),
                }
            }
        })
        .overlap(Overlap::Skip),
    );
    let r = Arc::clone(&ran);
    builder = builder.job(
        Job::new("sync", "*/3 * * * * *", move |ctx: JobContext| {
            let r = Arc::clone(&r);
            async move {
                if ctx.attempt() == 1 {
                    r(&ctx, "fails (upstream 503); retried in 1 s");
                    return Err(JobError::from("upstream returned 503"));
                }
                r(&ctx, "synced");
                Ok(())
            }
        })
        .retry(
            RetryPolicy::exponential(3, Duration::from_secs(1), Duration::from_secs(4))
                .without_jitter(),
        ),
    );

    let handle = builder.build()?.try_start().await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    handle.shutdown().await;
    Ok(())
}
