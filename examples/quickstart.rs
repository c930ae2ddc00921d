//! The quick start: three replicas, as three OS processes, share one store and run seconds-level jobs.
//! Each slot runs once across them.
//!
//! ```text
//! cargo run --example quickstart                                   # SQLite file, no setup
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example quickstart
//! ```
//!
//! Runs for about 20 seconds (`QUICKSTART_SECONDS` to change it), or until Ctrl-C, then shuts the
//! replicas down gracefully and prints which replica ran each slot, the attempts, and the number of
//! runs, attempts and duplicate executions. A run is one job's one slot; an attempt is one execution
//! of its body, so a retried run has two attempts.
//!
//! The store is kept for the CLI: on SQLite a file in the temporary directory, on PostgreSQL a fresh
//! schema per run (`slotguard_quickstart_<time>_<pid>`), named in the output with the commands to try
//! on it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use slotguard::{Job, JobContext, JobError, Overlap, RetryPolicy, Scheduler};

const REPLICAS: usize = 3;
const RUN_FOR: Duration = Duration::from_secs(20);

/// How long the replicas run: `QUICKSTART_SECONDS`, else [`RUN_FOR`].
fn run_for() -> Duration {
    std::env::var("QUICKSTART_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(RUN_FOR, Duration::from_secs)
}

/// Where the replicas share their store.
#[derive(Debug, Clone)]
enum Store {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A schema of its own in a PostgreSQL database.
    Postgres { url: String, schema: String },
}

impl Store {
    /// The store as one command-line argument of a replica: `sqlite:PATH` or `postgres:SCHEMA:URL`.
    fn arg(&self) -> String {
        match self {
            Store::Sqlite(path) => format!("sqlite:{}", path.display()),
            Store::Postgres { url, schema } => format!("postgres:{schema}:{url}"),
        }
    }

    fn from_arg(arg: &str) -> Store {
        match arg.strip_prefix("sqlite:") {
            Some(path) => Store::Sqlite(PathBuf::from(path)),
            None => {
                let rest = arg.strip_prefix("postgres:").unwrap_or(arg);
                let (schema, url) = rest.split_once(':').unwrap_or(("slotguard", rest));
                Store::Postgres {
                    url: url.to_owned(),
                    schema: schema.to_owned(),
                }
            }
        }
    }

    /// The backend, created (tables, schema) if it is not there yet.
    async fn open(&self) -> Result<Arc<dyn slotguard::store::Backend>, Box<dyn std::error::Error>> {
        Ok(match self {
            Store::Sqlite(path) => Arc::new(slotguard_sqlite::SqliteBackend::open(path).await?),
            Store::Postgres { url, schema } => Arc::new(
                slotguard_postgres::PgBackend::builder(url)
                    .schema(schema.as_str())
                    .connect()
                    .await?,
            ),
        })
    }

    /// The CLI's options that name this store (the URL of PostgreSQL as the variable it came in).
    fn cli_options(&self) -> String {
        match self {
            Store::Sqlite(path) => format!("--database-url sqlite:{}", path.display()),
            Store::Postgres { schema, .. } => {
                format!("--database-url \"$DATABASE_URL\" --schema {schema}")
            }
        }
    }
}

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
        Ok(url) if url.starts_with("postgres") => Store::Postgres {
            schema: fresh_schema(),
            url,
        },
        _ => Store::Sqlite(dir.join("slots.db")),
    };
    let shown = match &store {
        Store::Sqlite(path) => format!("the SQLite file {}", path.display()),
        Store::Postgres { url, schema } => format!(
            "the fresh schema {schema} in PostgreSQL at {}",
            url.split('@').next_back().unwrap_or("DATABASE_URL")
        ),
    };
    println!("slotguard quick start: {REPLICAS} replicas (separate processes) sharing {shown}");
    println!(
        "jobs: settlement every 2 s, report every 5 s (takes 6 s: overlapping slots are skipped),"
    );
    println!("      sync every 3 s (its first attempt fails and is retried)\n");

    let started = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let exe = std::env::current_exe()?;
    let mut children: Vec<Child> = (1..=REPLICAS)
        .map(|n| {
            Command::new(&exe)
                .args([
                    "--replica",
                    &n.to_string(),
                    &store.arg(),
                    &ledger.to_string_lossy(),
                ])
                .spawn()
        })
        .collect::<Result<_, _>>()?;

    tokio::select! {
        () = tokio::time::sleep(run_for()) => {}
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
    let _ = std::fs::remove_file(&ledger);
    let retried = store_summary(&store).await;
    try_the_cli(&store, &started, retried.as_deref());
    Ok(())
}

/// A schema no earlier run used: the time in milliseconds and this process's id.
fn fresh_schema() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("slotguard_quickstart_{millis}_{}", std::process::id())
}

/// Ends with commands to try on the store this run leaves behind.
fn try_the_cli(store: &Store, started: &str, retried: Option<&str>) {
    let cli = format!("slotguard {}", store.cli_options());
    println!(
        "\nthe store is kept; try the CLI on it (`cargo install --path cli` installs `slotguard`;"
    );
    println!("or write `cargo run -q -p slotguard-cli --` for `slotguard`):");
    println!("  {cli} jobs");
    println!("  {cli} runs sync --limit 5");
    if let Some(slot) = retried {
        println!("  {cli} run sync {slot}    # one run, its two attempts");
    }
    println!("  {cli} missed settlement --from {started}    # the slots after the shutdown");
    println!(
        "  {cli} trigger settlement --reason 'try it' --wait --timeout 5    # no replica is up: exit 6"
    );
    println!("  {cli} audit");
    match store {
        Store::Sqlite(path) => println!(
            "remove it with: rm -r {}",
            path.parent().unwrap_or(path).display()
        ),
        Store::Postgres { schema, .. } => {
            println!("remove it with: psql \"$DATABASE_URL\" -c 'DROP SCHEMA {schema} CASCADE'");
        }
    }
}

/// What the store recorded: runs by status, and the skipped slots with their reason. Returns the
/// slot of a `sync` run that took two attempts, if there is one.
async fn store_summary(store: &Store) -> Option<String> {
    let admin = match store.open().await {
        Ok(backend) => slotguard_admin::Admin::shared(backend),
        Err(e) => {
            println!("could not read the store: {e}");
            return None;
        }
    };
    let filter = slotguard::store::RunFilter {
        limit: slotguard_admin::MAX_PAGE,
        ..slotguard::store::RunFilter::default()
    };
    let runs = admin.runs(filter).await.unwrap_or_default();
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for run in &runs {
        *by_status.entry(run.status.to_string()).or_default() += 1;
    }
    let counts: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!(
        "the store recorded {} runs (skipped slots included): {}",
        runs.len(),
        counts.join(", ")
    );
    for run in runs.iter().filter(|r| r.status.as_str() == "skipped") {
        println!(
            "  {} {} skipped: {}",
            run.key.job,
            run.key.scheduled_at.format("%H:%M:%S"),
            run.error_message.as_deref().unwrap_or("-")
        );
    }
    runs.iter()
        .find(|r| r.key.job == "sync" && r.attempt >= 2)
        .map(|r| {
            r.key
                .scheduled_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        })
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
        "\n{} runs executed ({} attempts: a retry is a second attempt of the same run), {} duplicate executions",
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
    builder = match Store::from_arg(store) {
        Store::Sqlite(path) => builder.backend(slotguard_sqlite::SqliteBackend::open(path).await?),
        Store::Postgres { url, schema } => builder.backend(
            slotguard_postgres::PgBackend::builder(&url)
                .schema(schema.as_str())
                .connect()
                .await?,
        ),
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
