//! Trigger apart from execution: one scheduler process enqueues every slot as a `pending` row, three
//! worker processes run them. Each slot runs once, on whichever worker claims it.
//!
//! ```text
//! cargo run --example workers                                   # SQLite file, no setup
//! DATABASE_URL=postgres://postgres@127.0.0.1:5432/test cargo run --example workers
//! ```
//!
//! Runs for about 20 seconds, stops the processes with SIGTERM, prints which worker ran each slot
//! and a summary counted from what the bodies did.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use slotguard::{Job, JobContext, Overlap, Role, Scheduler};

const WORKERS: usize = 3;
const RUN_FOR: Duration = Duration::from_secs(20);
const TENANTS: [&str; 6] = ["acme", "globex", "initech", "umbrella", "hooli", "stark"];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--process") {
        Some(i) => process(&args[i + 1], &args[i + 2], &args[i + 3]).await,
        None => coordinator().await,
    }
}

/// Starts the scheduler and the workers, lets them run, stops them, reports from the ledger.
async fn coordinator() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("slotguard-workers-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ledger = dir.join("ledger.txt");
    let store = match std::env::var("DATABASE_URL") {
        Ok(url) if url.starts_with("postgres") => {
            format!("postgres:slotguard_workers_{}:{url}", std::process::id())
        }
        _ => format!("sqlite:{}", dir.join("slots.db").display()),
    };
    let shown = store.split('@').next_back().unwrap_or(&store);
    println!(
        "slotguard workers: 1 scheduler and {WORKERS} workers (separate processes) sharing {shown}"
    );
    println!(
        "jobs: ingest every second, invoice every 5 s for {} tenants (one queued slot each)\n",
        TENANTS.len()
    );
    let exe = std::env::current_exe()?;
    let spawn = |name: String| -> std::io::Result<Child> {
        Command::new(&exe)
            .args(["--process", &name, &store, &ledger.to_string_lossy()])
            .spawn()
    };
    let mut children = vec![spawn("scheduler".to_owned())?];
    for n in 1..=WORKERS {
        children.push(spawn(format!("worker-{n}"))?);
    }
    tokio::select! {
        () = tokio::time::sleep(RUN_FOR) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    println!(
        "\nstopping (SIGTERM): the scheduler stops enqueuing, workers finish what they run ..."
    );
    for child in &children {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }
    for child in &mut children {
        child.wait()?;
    }
    report(&std::fs::read_to_string(&ledger).unwrap_or_default());
    if let Some((schema, url)) = store
        .strip_prefix("postgres:")
        .and_then(|s| s.split_once(':'))
    {
        // This run's schema only: the next run starts empty.
        let pool = sqlx::PgPool::connect(url).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
        )))
        .execute(&pool)
        .await?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Prints who ran each slot and the summary line.
fn report(ledger: &str) {
    let mut runs: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    let mut by_worker: BTreeMap<String, usize> = BTreeMap::new();
    for line in ledger.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        if let [job, slot, partition, worker] = parts[..] {
            runs.entry((slot.into(), job.into(), partition.into()))
                .or_default()
                .push(worker.into());
            *by_worker.entry(worker.into()).or_default() += 1;
        }
    }
    for ((slot, job, partition), workers) in &runs {
        let part = if partition == "-" {
            String::new()
        } else {
            format!("[{partition}]")
        };
        println!("  {slot}  {job}{part:<11} ran on {}", workers.join(", "));
    }
    let executions: usize = runs.values().map(Vec::len).sum();
    let duplicates: usize = runs.values().map(|w| w.len() - 1).sum();
    let spread: Vec<String> = by_worker.iter().map(|(w, n)| format!("{w} {n}")).collect();
    println!("\nper worker: {}", spread.join(", "));
    println!(
        "{} slots, {executions} executions, {duplicates} duplicates (counted from what the bodies did)",
        runs.len()
    );
}

/// One process: the scheduler or a worker, until SIGTERM.
async fn process(name: &str, store: &str, ledger: &str) -> Result<(), Box<dyn std::error::Error>> {
    let role = if name == "scheduler" {
        Role::Scheduler
    } else {
        Role::Worker
    };
    let ledger = Arc::new(std::sync::Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(ledger)?,
    ));
    let builder = Scheduler::builder()
        .role(role)
        .instance_id(name)
        .stale_after(Duration::from_secs(6))
        // Room for 3 bodies per worker: the 6 invoices of a slot spread over the workers.
        .max_concurrent_runs(3)
        .job(Job::new("ingest", "* * * * * *", body(&ledger, name, 300)))
        .job(
            Job::new("invoice", "*/5 * * * * *", body(&ledger, name, 800))
                .overlap(Overlap::Allow)
                .partitions(|| async { Ok::<_, slotguard::JobError>(TENANTS) }),
        );
    let builder = match store.split_once(':') {
        Some(("sqlite", path)) => {
            builder.backend(slotguard_sqlite::SqliteBackend::open(path).await?)
        }
        Some(("postgres", rest)) => {
            let (schema, url) = rest.split_once(':').ok_or("postgres:<schema>:<url>")?;
            let backend = slotguard_postgres::PgBackend::builder(url)
                .schema(schema)
                .connect()
                .await?;
            builder.backend(backend)
        }
        _ => return Err(format!("unknown store {store}").into()),
    };
    let handle = builder.build()?.try_start().await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    term.recv().await;
    handle.shutdown().await;
    Ok(())
}

/// A body that takes `ms`, prints where it ran and appends itself to the ledger.
fn body(
    ledger: &Arc<std::sync::Mutex<std::fs::File>>,
    worker: &str,
    ms: u64,
) -> impl Fn(JobContext) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
+ Send
+ Sync
+ 'static {
    let (ledger, worker) = (Arc::clone(ledger), worker.to_owned());
    move |ctx: JobContext| {
        let (ledger, worker) = (Arc::clone(&ledger), worker.clone());
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let slot = ctx.scheduled_at().format("%H:%M:%S").to_string();
            let partition = ctx.partition().unwrap_or("-");
            let line = format!("{} {slot} {partition} {worker}\n", ctx.job_name());
            if let Ok(mut file) = ledger.lock() {
                let _ = file.write_all(line.as_bytes());
            }
        })
    }
}
