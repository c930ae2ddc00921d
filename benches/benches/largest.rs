//! The largest installation measured on one PostgreSQL: 8 replica processes, 1,200 jobs × 100
//! partitions (120,000 partition schedules), each job every 2 minutes at its own second, so that
//! 1,000 slots fall due every second, for 10 minutes.
//!
//! ```text
//! cargo bench -p slotguard-benches --bench largest                    # 8 × 1,200 × 100, 600 s
//! cargo bench -p slotguard-benches --bench largest -- 120 8 1200 100  # secs replicas jobs parts
//! ```
//!
//! Every body appends `(job, slot, partition, start)` to its process's ledger, written when the
//! process stops; the harness reads the ledgers, not the store, to count what ran:
//! - duplicates: a (job, slot, partition) whose body ran more than once;
//! - missing: the slots due in the measured window (after 30 s of warm-up, before the last 10 s)
//!   that never ran;
//! - lag: body start minus the slot's instant, p50 / p99 / max;
//! - the database's CPU share: the `postgres` processes' CPU time over the machine's, from /proc;
//! - connections: the most sessions of the replicas seen on the server (sampled every 5 s).
//!
//! Runs in a fresh schema, dropped afterwards. Override the server with
//! `SLOTGUARD_TEST_DATABASE_URL`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use slotguard::{Job, JobContext, Scheduler};
use slotguard_postgres::PgBackend;
use slotguard_tests::pg::{TestSchema, database_url};
use sqlx::{Connection, PgConnection};

/// Slots of the first seconds pay for start-up; left out of the figures.
const WARMUP: Duration = Duration::from_secs(30);
/// Slots of the last seconds may not have run when the replicas stop.
const COOLDOWN: Duration = Duration::from_secs(10);

/// The run's shape: how long, how many replicas, jobs and partitions per job.
#[derive(Debug, Clone, Copy)]
struct Shape {
    secs: u64,
    replicas: usize,
    jobs: usize,
    partitions: usize,
}

fn main() {
    let args = slotguard_benches::bench_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if args.first().map(String::as_str) == Some("--child") {
        runtime.block_on(child(&args[1..]));
        return;
    }
    let n = |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let shape = Shape {
        secs: n(0, 600),
        replicas: n(1, 8) as usize,
        jobs: n(2, 1_200) as usize,
        partitions: n(3, 100) as usize,
    };
    runtime.block_on(run(shape));
}

/// Job `i`'s expression: every 2 minutes, at second `i % 60` of even or odd minutes.
fn cron(i: usize) -> String {
    format!("{} {}/2 * * * *", i % 60, (i / 60) % 2)
}

fn url_for(replica: &str) -> String {
    let url = database_url();
    let joiner = if url.contains('?') { '&' } else { '?' };
    format!("{url}{joiner}application_name=sg-largest-{replica}")
}

/// A replica: the jobs on `schema` until its stdin closes, then its ledger to the path given.
async fn child(args: &[String]) {
    let [schema, id, jobs, partitions, ledger] = args else {
        panic!("--child SCHEMA ID JOBS PARTITIONS LEDGER");
    };
    let jobs: usize = jobs.parse().expect("jobs");
    let keys: Arc<Vec<String>> = Arc::new(
        (0..partitions.parse::<usize>().expect("partitions"))
            .map(|p| format!("p{p:03}"))
            .collect(),
    );
    let backend = PgBackend::builder(&url_for(id))
        .schema(schema)
        .pool_size(4)
        .connect()
        .await
        .expect("connect");
    let ran: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut builder = Scheduler::builder().backend(backend).instance_id(id);
    for i in 0..jobs {
        let (ran, keys) = (Arc::clone(&ran), Arc::clone(&keys));
        let job = Job::new(format!("j{i:04}"), cron(i), move |ctx: JobContext| {
            let ran = Arc::clone(&ran);
            async move {
                let line = format!(
                    "{} {} {} {}",
                    ctx.job_name(),
                    ctx.scheduled_at().timestamp(),
                    ctx.partition().unwrap_or_default(),
                    Utc::now().timestamp_micros()
                );
                ran.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(line);
            }
        })
        .partitions(move || {
            let keys = Arc::clone(&keys);
            async move { Ok::<_, slotguard::JobError>(keys.to_vec()) }
        });
        builder = builder.job(job);
    }
    let handle = builder
        .build()
        .expect("build")
        .try_start()
        .await
        .expect("start");
    println!("ready");
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        let _ = std::io::stdin().read_line(&mut sink);
    })
    .await;
    handle.shutdown().await;
    let lines = ran
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .join("\n");
    std::fs::write(ledger, lines).expect("ledger");
}

/// The CPU ticks of the `postgres` processes, and of the whole machine, from /proc.
fn cpu_ticks() -> (u64, u64) {
    let mut postgres = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if stat.contains("(postgres) ") {
            postgres += slotguard_benches::ticks_of(&stat);
        }
    }
    let total = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            let line = s.lines().next()?.to_owned();
            Some(
                line.split_whitespace()
                    .skip(1)
                    .filter_map(|f| f.parse::<u64>().ok())
                    .sum(),
            )
        })
        .unwrap_or(0);
    (postgres, total)
}

async fn run(shape: Shape) {
    let schema = TestSchema::with_prefix("sg_largest");
    PgBackend::builder(&database_url())
        .schema(&schema.name)
        .connect()
        .await
        .expect("migrate")
        .close()
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "largest: {} replicas, {} jobs × {} partitions ({} schedules), {} slots/s, {} s",
        shape.replicas,
        shape.jobs,
        shape.partitions,
        shape.jobs * shape.partitions,
        shape.jobs * shape.partitions / 120,
        shape.secs
    );
    let mut children: Vec<Child> = (0..shape.replicas)
        .map(|r| spawn(&schema.name, r, shape, &dir.path().join(format!("r{r}"))))
        .collect();
    for child in &mut children {
        let mut line = String::new();
        let out = child.stdout.as_mut().expect("stdout");
        BufReader::new(out).read_line(&mut line).expect("ready");
    }
    let started = Utc::now();
    let cpu0 = cpu_ticks();
    let connections = sample(Duration::from_secs(shape.secs)).await;
    let cpu1 = cpu_ticks();
    let stopped = Utc::now();
    // Every replica is told at once; then each is waited for.
    for child in &mut children {
        drop(child.stdin.take());
    }
    for mut child in children {
        let _ = child.wait();
    }
    let ledger = read_ledgers(dir.path(), shape.replicas);
    report(
        &ledger,
        shape,
        (started, stopped),
        (cpu0, cpu1),
        connections,
    );
    by_minute(&schema.name).await;
}

/// One minute and status: its runs, their most attempts, and the first attempt's lag p50 / p99.
type MinuteRow = (String, String, i32, i64, Option<f64>, Option<f64>);

/// What the store holds, minute by minute of slot time: runs by status and attempt, and the first
/// attempt's start lag (database clock), p50 and p99, so that a run that fell behind shows when.
async fn by_minute(schema: &str) {
    let mut conn = PgConnection::connect(&database_url())
        .await
        .expect("connect");
    let sql = format!(
        "SELECT to_char(date_trunc('minute', r.scheduled_at), 'HH24:MI') AS minute, r.status, \
                max(r.attempt) AS attempts, count(*) AS runs, \
                percentile_cont(0.5) WITHIN GROUP \
                    (ORDER BY extract(epoch FROM a.started_at - r.scheduled_at)) AS p50, \
                percentile_cont(0.99) WITHIN GROUP \
                    (ORDER BY extract(epoch FROM a.started_at - r.scheduled_at)) AS p99 \
         FROM \"{schema}\".job_runs r \
         LEFT JOIN \"{schema}\".job_run_attempts a ON a.run_id = r.id AND a.attempt = 1 \
         GROUP BY 1, 2 ORDER BY 1, 2"
    );
    let rows: Vec<MinuteRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default();
    println!("minute  status     attempts(max)  runs    first-attempt lag p50 / p99");
    for (minute, status, attempts, runs, p50, p99) in rows {
        let ms = |s: Option<f64>| s.map_or("-".to_owned(), |s| format!("{:.0} ms", s * 1_000.0));
        println!(
            "{minute}   {status:<10} {attempts:>13}  {runs:>6}  {} / {}",
            ms(p50),
            ms(p99)
        );
    }
}

fn spawn(schema: &str, r: usize, shape: Shape, ledger: &std::path::Path) -> Child {
    Command::new(std::env::current_exe().expect("exe"))
        .arg("--child")
        .arg(schema)
        .arg(format!("r{r}"))
        .arg(shape.jobs.to_string())
        .arg(shape.partitions.to_string())
        .arg(ledger)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Waits `secs`, sampling the replicas' sessions on the server every 5 s; the most seen.
async fn sample(secs: Duration) -> i64 {
    let mut conn = PgConnection::connect(&database_url())
        .await
        .expect("connect");
    let end = Instant::now() + secs;
    let mut most = 0;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(5).min(end - Instant::now())).await;
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'sg-largest-%'",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap_or(0);
        most = most.max(n);
        print!(".");
        let _ = std::io::stdout().flush();
    }
    println!();
    most
}

/// Every body's start: (job, slot in Unix seconds, partition) → start times in Unix µs.
type Ledger = HashMap<(String, i64, String), Vec<i64>>;

fn read_ledgers(dir: &std::path::Path, replicas: usize) -> Ledger {
    let mut ledger = Ledger::new();
    for r in 0..replicas {
        let text = std::fs::read_to_string(dir.join(format!("r{r}"))).unwrap_or_default();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let (Some(job), Some(slot), Some(part), Some(start)) =
                (f.first(), f.get(1), f.get(2), f.get(3))
            else {
                continue;
            };
            let (Ok(slot), Ok(start)) = (slot.parse(), start.parse()) else {
                continue;
            };
            ledger
                .entry(((*job).to_owned(), slot, (*part).to_owned()))
                .or_default()
                .push(start);
        }
    }
    ledger
}

fn report(
    ledger: &Ledger,
    shape: Shape,
    (started, stopped): (DateTime<Utc>, DateTime<Utc>),
    ((pg0, all0), (pg1, all1)): ((u64, u64), (u64, u64)),
    connections: i64,
) {
    let from = started.timestamp() + WARMUP.as_secs() as i64;
    let to = stopped.timestamp() - COOLDOWN.as_secs() as i64;
    let duplicates = ledger.values().filter(|s| s.len() > 1).count();
    let mut lags: Vec<i64> = ledger
        .iter()
        .filter(|((_, slot, _), _)| (from..to).contains(slot))
        .filter_map(|((_, slot, _), starts)| starts.iter().min().map(|s| s - slot * 1_000_000))
        .collect();
    lags.sort_unstable();
    let expected: usize = (from..to)
        .map(|t| {
            let (sec, min) = ((t % 60) as usize, ((t / 60) % 2) as usize);
            (0..shape.jobs)
                .filter(|&i| i % 60 == sec && (i / 60) % 2 == min)
                .count()
                * shape.partitions
        })
        .sum();
    let pct = |p: f64| {
        lags.get(((lags.len() as f64 * p) as usize).min(lags.len().saturating_sub(1)))
            .map_or(f64::NAN, |us| *us as f64 / 1_000.0)
    };
    let db_share = (pg1 - pg0) as f64 / (all1 - all0).max(1) as f64 * 100.0;
    println!(
        "window: {} s after {} s of warm-up",
        to - from,
        WARMUP.as_secs()
    );
    println!(
        "slots due in the window: {expected}; ran: {}; missing: {}",
        lags.len(),
        expected.saturating_sub(lags.len())
    );
    println!("duplicates (a slot and partition whose body ran twice): {duplicates}");
    println!(
        "lag (slot instant to body start): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        pct(0.50),
        pct(0.99),
        lags.last().map_or(f64::NAN, |us| *us as f64 / 1_000.0)
    );
    println!("database CPU: {db_share:.1} % of the machine's (both cores)");
    println!("replica sessions on the server, most seen: {connections}");
}
