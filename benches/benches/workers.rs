//! Schedulers and workers on PostgreSQL, as separate OS processes on the shared server.
//!
//! ```text
//! cargo bench -p slotguard-benches --bench workers                 # floor, drain, lag, fanout
//! cargo bench -p slotguard-benches --bench workers -- drain 100000 # one, with its size
//! cargo bench -p slotguard-benches --bench workers -- floor 20000  # the floor, then the drain
//! ```
//!
//! 1. drain: N trivial slots (overlap `allow`) queued with `enqueue_slots`, then drained by 4 worker
//!    processes with room for 16 bodies each; executions per second from the first start to the
//!    last finish (the stores' own timestamps), and the enqueue cost per slot. Then
//!    graphile-worker's drain of the same size, when it is installed (not in `floor`).
//! 2. floor (run before the drain, in the same process): the least SQL a correct queue needs for
//!    the drain's work, on the drain's own tables and rows, from 4 connections each claiming 16
//!    (`FOR UPDATE SKIP LOCKED`, attempt rows inserted in the same statement) and finishing them
//!    (one statement); then the same loop with slotguard's `claim_due` and `finish`, and
//!    slotguard's drain, each as a fraction of the floor. What the floor leaves out is listed in
//!    `workers/floor.rs`. Each prints the statements per run and what the server counted on the
//!    two tables (updates, HOT updates, index growth).
//! 3. lag: one scheduler process and 4 workers, 20 jobs every second for 20 s; due instant → body
//!    start (each body prints its own, system clock) p50/p99/max, and due instant → claim (the
//!    attempt's `started_at`, database clock; below zero for slots the workers claimed ahead).
//! 4. fanout: one slot of a job with 10,000 partitions, queued by a scheduler process, 4 workers
//!    × 16: time from the slot until all are claimed and until all have finished.
//!
//! Each scenario runs in a fresh schema, dropped afterwards. Override the server with
//! `SLOTGUARD_TEST_DATABASE_URL`.

#[path = "workers/floor.rs"]
mod floor;

use slotguard::store::QueueStore;
use slotguard_benches::quantile;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Timelike, Utc};
use slotguard::store::{ClaimRequest, SlotKey, SlotStore, Trigger};
use slotguard::{Job, JobContext, Overlap, Role, Scheduler};
use slotguard_postgres::PgBackend;
use slotguard_tests::pg::{TestSchema, database_url};
use sqlx::{Connection, PgConnection};

const WORKERS: usize = 4;
const ROOM: usize = 16;
const LAG_JOBS: usize = 20;
const LAG_RUN: Duration = Duration::from_secs(20);
const FANOUT: usize = 10_000;

fn main() {
    let args = slotguard_benches::bench_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if args.first().map(String::as_str) == Some("--child") {
        runtime.block_on(child(&args[1], &args[2], &args[3]));
        return;
    }
    let only = args.first().cloned();
    let n: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(100_000);
    runtime.block_on(async {
        let floor = match only.as_deref() {
            None | Some("floor") => Some((floor::floor(n).await, floor::store_calls(n).await)),
            Some(_) => None,
        };
        if only.as_deref().is_none_or(|o| o == "drain" || o == "floor") {
            let workers = std::env::var("BENCH_WORKERS")
                .ok()
                .and_then(|w| w.parse().ok())
                .unwrap_or(WORKERS);
            let slotguard = drain(n, workers).await;
            if let Some((floor, calls)) = floor {
                compare(&floor, &calls, &slotguard, workers);
            }
            if only.as_deref() != Some("floor") {
                graphile_drain(n, workers).await;
            }
        }
        if only.as_deref().is_none_or(|o| o == "lag") {
            lag().await;
        }
        if only.as_deref().is_none_or(|o| o == "fanout") {
            fanout().await;
        }
        if only.as_deref() == Some("calls") {
            calls(n).await;
        }
    });
}

/// A process of the cluster: `role` on `schema` with the jobs of `scenario` (`queue`: the drain's
/// and the fan-out's; `lag`: the lag scenario's 20; `all`: both, as every process had them before
/// 2026-12-04), until its stdin closes.
async fn child(role: &str, schema: &str, scenario: &str) {
    let role: Role = role.parse().expect("a role");
    let backend = PgBackend::builder(&database_url())
        .schema(schema)
        .pool_size(6)
        .connect()
        .await
        .expect("connect");
    let mut builder = Scheduler::builder()
        .backend(backend)
        .role(role)
        .max_concurrent_runs(ROOM)
        .stale_after(Duration::from_secs(30));
    if scenario != "lag" {
        builder = builder
            .job(Job::new("drain", "0 0 1 1 *", |_| async {}).overlap(Overlap::Allow))
            .job(
                Job::new("fanout", "0 0 1 1 *", |_: JobContext| async {})
                    .overlap(Overlap::Allow)
                    .partitions(|| async {
                        Ok::<_, slotguard::JobError>((0..FANOUT).map(|i| format!("t{i:05}")))
                    }),
            );
    }
    if scenario != "queue" {
        for i in 0..LAG_JOBS {
            // Each body prints when it started, for the parent: its slot and its lag in µs.
            builder = builder.job(Job::new(
                format!("lag_{i:02}"),
                "* * * * * *",
                |ctx: JobContext| async move {
                    let slot = ctx.scheduled_at();
                    let lag = (Utc::now() - slot).num_microseconds().unwrap_or(i64::MAX);
                    println!("lag {} {lag}", slot.timestamp());
                },
            ));
        }
    }
    let handle = builder
        .build()
        .expect("build")
        .try_start()
        .await
        .expect("start");
    // The parent closes our stdin to stop us.
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = String::new();
        let _ = std::io::stdin().read_line(&mut sink);
    })
    .await;
    handle.shutdown().await;
}

/// A child process (see [`child`]); `BENCH_ALL_JOBS=1` gives every process every scenario's jobs.
fn spawn(role: &str, schema: &str, scenario: &str) -> Child {
    let scenario = if std::env::var_os("BENCH_ALL_JOBS").is_some() {
        "all"
    } else {
        scenario
    };
    Command::new(std::env::current_exe().expect("exe"))
        .args(["--child", role, schema, scenario])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Stops `children` (their stdin closes) and answers what they printed, line by line.
fn stop(mut children: Vec<Child>) -> Vec<String> {
    for child in &mut children {
        drop(child.stdin.take());
    }
    let mut lines = Vec::new();
    for child in children {
        if let Ok(out) = child.wait_with_output() {
            lines.extend(
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(str::to_owned),
            );
        }
    }
    lines
}

async fn connect(schema: &TestSchema) -> (PgBackend, PgConnection) {
    let backend = PgBackend::builder(&database_url())
        .schema(&schema.name)
        .connect()
        .await
        .expect("connect");
    let conn = PgConnection::connect(&database_url())
        .await
        .expect("connect");
    (backend, conn)
}

fn request(job: &str, at: DateTime<Utc>, partition: String) -> ClaimRequest {
    ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: at,
            partition,
        },
        trigger: Trigger::Schedule,
        zone: "UTC".to_owned(),
        wall: at.naive_utc(),
        business_date: at.date_naive(),
        fingerprint: 1,
        stale_after: Duration::from_secs(30),
        overlap: Overlap::Allow,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    }
}

/// `ANALYZE table`, as autovacuum would after a bulk load; then a `CHECKPOINT`, so that the timed
/// part that follows starts with the server's whole WAL budget. A drain of 100,000 and the floor
/// before it write about 1 GB of WAL, PostgreSQL's default `max_wal_size`: without it one requested
/// checkpoint fell inside every run.
async fn analyze(conn: &mut PgConnection, table: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("ANALYZE {table}")))
        .execute(&mut *conn)
        .await
        .expect("analyze");
    if let Err(e) = sqlx::raw_sql("CHECKPOINT").execute(conn).await {
        eprintln!("no checkpoint before the timed part ({e}): figures may carry one");
    }
}

async fn scalar_f64(conn: &mut PgConnection, sql: String) -> f64 {
    sqlx::query_scalar::<_, Option<f64>>(sqlx::AssertSqlSafe(sql))
        .fetch_one(conn)
        .await
        .expect("query")
        .unwrap_or(f64::NAN)
}

async fn count(conn: &mut PgConnection, schema: &str, filter: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM \"{schema}\".job_runs WHERE {filter}");
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql))
        .fetch_one(conn)
        .await
        .expect("count")
}

/// Waits until `filter` counts `n` rows, or `limit` passes.
async fn wait_for(conn: &mut PgConnection, schema: &str, filter: &str, n: i64, limit: Duration) {
    let started = Instant::now();
    while count(conn, schema, filter).await < n && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Queues `n` slots of `drain`, one a second from 400 days ago, in batches of 1,000.
async fn queue_past_slots(backend: &PgBackend, n: usize) {
    let base = Utc::now().with_nanosecond(0).expect("second") - chrono::Duration::days(400);
    for chunk in (0..n).collect::<Vec<_>>().chunks(1_000) {
        let requests: Vec<ClaimRequest> = chunk
            .iter()
            .map(|&i| {
                request(
                    "drain",
                    base + chrono::Duration::seconds(i as i64),
                    String::new(),
                )
            })
            .collect();
        backend
            .enqueue_slots(&requests, &[])
            .await
            .expect("enqueue");
    }
}

/// slotguard's drain of `n` queued slots by `workers` worker processes; prints its lines.
async fn drain(n: usize, workers: usize) -> floor::Drained {
    let schema = TestSchema::with_prefix("sg_bench_drain");
    let (backend, mut conn) = connect(&schema).await;
    let started = Instant::now();
    queue_past_slots(&backend, n).await;
    let enqueue = started.elapsed();
    // As autovacuum would within a minute of such a load: a claim's plan needs statistics.
    analyze(&mut conn, &format!("\"{}\".job_runs", schema.name)).await;
    let before = floor::settled(&mut conn, &schema.name, n as i64, 0, 0).await;
    let (cpu, wall) = (floor::cpu_seconds().1, Instant::now());
    let children: Vec<Child> = (0..workers)
        .map(|_| spawn("worker", &schema.name, "queue"))
        .collect();
    wait_for(
        &mut conn,
        &schema.name,
        "status = 'succeeded'",
        n as i64,
        Duration::from_secs(900),
    )
    .await;
    let wall = wall.elapsed();
    stop(children);
    // The workers' CPU, from spawning them until they exited.
    let cpu = floor::cpu_seconds().1 - cpu;
    let drained = floor::figures(&mut conn, &schema.name, wall, cpu, before, n as i64).await;
    println!(
        "drain: slotguard: {} of {n} trivial slots by {workers} workers x {ROOM}: {:.0} executions/s \
         from spawning the workers to the last success ({:.2} s), {:.0}/s from the first start to the \
         last finish ({:.2} s); enqueue {:.1} us/slot in batches of 1,000\n  drain: {}",
        drained.runs,
        drained.wall_rate(),
        wall.as_secs_f64(),
        drained.rate(),
        drained.span,
        enqueue.as_secs_f64() * 1e6 / n as f64,
        drained.writes()
    );
    backend.close().await;
    drained
}

/// slotguard's drain, and its statements in the floor's loop, as fractions of the floor's rate,
/// measured in the same run.
fn compare(
    floor: &floor::Drained,
    calls: &floor::Drained,
    slotguard: &floor::Drained,
    workers: usize,
) {
    let share = |d: &floor::Drained| 100.0 * d.rate() / floor.rate();
    println!(
        "floor vs drain, from the first start to the last finish: floor {:.0}/s ({WORKERS} connections x {ROOM}); \
         slotguard's statements in the floor's loop {:.0}/s, {:.1} %; slotguard's drain {:.0}/s, {:.1} % \
         ({workers} worker processes x {ROOM}; from spawning the workers {:.0}/s, {:.1} % of the floor's {:.0}/s \
         from starting its loops)",
        floor.rate(),
        calls.rate(),
        share(calls),
        slotguard.rate(),
        share(slotguard),
        slotguard.wall_rate(),
        100.0 * slotguard.wall_rate() / floor.wall_rate(),
        floor.wall_rate()
    );
}

/// graphile-worker's package beside the peers harness (`npm ci` there installs it).
const GRAPHILE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/graphile");

/// The same drain on graphile-worker (`peers/graphile/drain.js`): `n` trivial jobs, `workers` Node.js
/// processes with concurrency [`ROOM`], its defaults otherwise; from spawning the workers to an
/// empty queue. Skipped, with the reason, when Node.js or the package is missing.
async fn graphile_drain(n: usize, workers: usize) {
    let dir = std::path::Path::new(GRAPHILE_DIR);
    if !dir.join("node_modules/graphile-worker").exists() {
        println!("drain: graphile-worker: skipped (run `npm ci` in benches/peers/graphile)");
        return;
    }
    let schema = TestSchema::with_prefix("sg_bench_gw");
    let node = |args: &[&str]| {
        let mut cmd = Command::new("node");
        cmd.arg("drain.js")
            .args(args)
            .current_dir(dir)
            .env("PEERS_DATABASE_URL", database_url())
            .env("PEERS_GW_SCHEMA", &schema.name);
        cmd
    };
    let filled = Instant::now();
    match node(&["fill", &n.to_string()]).status() {
        Ok(status) if status.success() => {}
        other => {
            println!("drain: graphile-worker: skipped (`node drain.js fill` failed: {other:?})");
            return;
        }
    }
    let filled = filled.elapsed();
    let mut conn = PgConnection::connect(&database_url())
        .await
        .expect("connect");
    analyze(&mut conn, &format!("\"{}\"._private_jobs", schema.name)).await;
    let left = format!("SELECT count(*) FROM \"{}\"._private_jobs", schema.name);
    let wall = Instant::now();
    let children: Vec<Child> = (0..workers)
        .map(|_| {
            node(&["work", &ROOM.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .expect("node")
        })
        .collect();
    loop {
        let remaining: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(left.clone()))
            .fetch_one(&mut conn)
            .await
            .expect("count");
        if remaining == 0 || wall.elapsed() > Duration::from_secs(900) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wall = wall.elapsed();
    stop(children);
    println!(
        "drain: graphile-worker 0.17: {n} trivial jobs by {workers} workers x {ROOM}: {:.0} executions/s \
         from spawning the workers to an empty queue ({:.2} s); addJobs {:.1} us/job in batches of 1,000",
        n as f64 / wall.as_secs_f64(),
        wall.as_secs_f64(),
        filled.as_secs_f64() * 1e6 / n as f64
    );
    // graphile-worker's schema is not the library's: drop it with everything in it.
    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
        schema.name
    )))
    .execute(&mut conn)
    .await;
}

async fn lag() {
    let schema = TestSchema::with_prefix("sg_bench_lag");
    let (backend, mut conn) = connect(&schema).await;
    let mut children = vec![spawn("scheduler", &schema.name, "lag")];
    children.extend((0..WORKERS).map(|_| spawn("worker", &schema.name, "lag")));
    tokio::time::sleep(LAG_RUN).await;
    let printed = stop(children);
    let q = |p: f64| {
        format!(
            "SELECT (percentile_cont({p}) WITHIN GROUP (ORDER BY extract(epoch FROM a.started_at - r.scheduled_at)) * 1000)::float8
             FROM \"{s}\".job_run_attempts a JOIN \"{s}\".job_runs r ON r.id = a.run_id
             WHERE a.attempt = 1 AND r.job_name LIKE 'lag_%'
               AND r.scheduled_at > (SELECT min(scheduled_at) + interval '2 seconds' FROM \"{s}\".job_runs)",
            s = schema.name
        )
    };
    let (p50, p99, max) = (
        scalar_f64(&mut conn, q(0.5)).await,
        scalar_f64(&mut conn, q(0.99)).await,
        scalar_f64(&mut conn, q(1.0)).await,
    );
    let runs = count(
        &mut conn,
        &schema.name,
        "job_name LIKE 'lag_%' AND status = 'succeeded'",
    )
    .await;
    println!(
        "lag: 1 scheduler + {WORKERS} workers, {LAG_JOBS} jobs every second, {runs} runs: due -> claim \
         (the attempt's started_at; below 0 when claimed ahead) p50 {p50:.2} ms, p99 {p99:.2} ms, \
         max {max:.2} ms (first 2 s left out)"
    );
    let started = body_lags(&printed);
    println!(
        "lag: due -> body start (the bodies' clock), {} bodies: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms \
         (first 2 s left out)",
        started.len(),
        quantile(&started, 0.5),
        quantile(&started, 0.99),
        quantile(&started, 1.0),
    );
    backend.close().await;
}

/// The lags in ms the lag bodies printed (`lag <slot> <µs>`), leaving out the first 2 s of slots;
/// sorted.
fn body_lags(printed: &[String]) -> Vec<f64> {
    let parsed: Vec<(i64, i64)> = printed
        .iter()
        .filter_map(|line| {
            let mut words = line.strip_prefix("lag ")?.split(' ');
            Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect();
    let Some(first) = parsed.iter().map(|(slot, _)| *slot).min() else {
        return Vec::new();
    };
    let mut lags: Vec<f64> = parsed
        .iter()
        .filter(|(slot, _)| *slot > first + 2)
        .map(|(_, us)| *us as f64 / 1000.0)
        .collect();
    lags.sort_by(f64::total_cmp);
    lags
}

async fn fanout() {
    let schema = TestSchema::with_prefix("sg_bench_fanout");
    let (backend, mut conn) = connect(&schema).await;
    // The fan-out job's slot, 2 s ahead: queued through the store's `enqueue_slots` with one
    // request per partition, as a scheduler's tick queues it.
    let slot = Utc::now().with_nanosecond(0).expect("second") + chrono::Duration::seconds(2);
    let children: Vec<Child> = (0..WORKERS)
        .map(|_| spawn("worker", &schema.name, "queue"))
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let requests: Vec<ClaimRequest> = (0..FANOUT)
        .map(|i| request("fanout", slot, format!("t{i:05}")))
        .collect();
    // One call for the whole slot, as the scheduler's tick makes it.
    let enqueue = Instant::now();
    backend
        .enqueue_slots(&requests, &[])
        .await
        .expect("enqueue");
    let enqueue = enqueue.elapsed();
    wait_for(
        &mut conn,
        &schema.name,
        "job_name = 'fanout' AND status = 'succeeded'",
        FANOUT as i64,
        Duration::from_secs(300),
    )
    .await;
    stop(children);
    let at = |what: &str| {
        format!(
            "SELECT extract(epoch FROM max({what}) - min(scheduled_at))::float8 FROM \"{}\".job_runs WHERE job_name = 'fanout'",
            schema.name
        )
    };
    let claimed = scalar_f64(&mut conn, at("started_at")).await;
    let finished = scalar_f64(&mut conn, at("finished_at")).await;
    println!(
        "fanout: {FANOUT} partitions of one slot, {WORKERS} workers x {ROOM}: all claimed {claimed:.2} s and all \
         finished {finished:.2} s after the slot (enqueued in {:.0} ms, one call)",
        enqueue.as_secs_f64() * 1000.0
    );
    backend.close().await;
}

/// The store calls a worker makes per round, timed one by one over a queue of `n` slots.
async fn calls(n: usize) {
    use slotguard::store::{DueSpec, Finish};
    let schema = TestSchema::with_prefix("sg_bench_calls");
    let (backend, _conn) = connect(&schema).await;
    queue_past_slots(&backend, n).await;
    let specs = [DueSpec::new("drain", 3).with_overlap(Overlap::Allow)];
    let (mut due_jobs, mut claim, mut finish, mut next) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..50 {
        let t = Instant::now();
        backend.due_jobs(&specs).await.expect("due jobs");
        due_jobs.push(t.elapsed());
        let t = Instant::now();
        let claimed = backend.claim_due("w", &specs, ROOM).await.expect("claim");
        claim.push(t.elapsed());
        let done: Vec<_> = claimed
            .iter()
            .map(|c| (c.lease.clone(), Finish::succeeded()))
            .collect();
        let t = Instant::now();
        backend.finish("w", &done).await.expect("finish");
        finish.push(t.elapsed());
        let t = Instant::now();
        backend.next_due(&specs).await.expect("next due");
        next.push(t.elapsed());
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1000.0
    };
    println!(
        "calls over a queue of {n}: due_jobs {:.2} ms, claim_due({ROOM}) {:.2} ms, finish({ROOM}) {:.2} ms, next_due {:.2} ms (medians of 50)",
        median(&mut due_jobs),
        median(&mut claim),
        median(&mut finish),
        median(&mut next)
    );
    backend.close().await;
    if std::env::var_os("BENCH_KEEP").is_some() {
        println!("kept schema {}", schema.name);
        std::mem::forget(schema);
    }
}
