//! The partitioned history beside the plain table (issue 24), for docs/PERFORMANCE.md: a history
//! of N finished runs (10,000,000 by default) of 100 jobs over the last 31 days, each with its
//! attempt, then on each layout, one after the other in a fresh schema:
//!
//! - **claim**: 200 slots at now claimed and finished one after another, p50 / p99 of the pair;
//! - **drain**: 10,000 queued slots of 10 jobs (then `ANALYZE`, as autovacuum would have),
//!   claimed 16 at a time by 4 tasks and finished;
//! - **dashboard pages**: the newest 50 runs of every job, one job's newest 50, the failed runs'
//!   newest 50, and the run counts per job, each the median of 20 reads;
//! - **retention** of the day past a 30-day keep: the time to delete it (the plain table: batches
//!   of 500 without the pass's pause; partitioned: the drop, then the batches), then the history's
//!   size on disk and its dead rows; on the plain table also the `VACUUM` that makes the space
//!   reusable, and the conversion of the 30 days left to the partitioned layout, timed while the
//!   backend that seeded it claims and finishes a slot every 100 ms (its longest claim is the
//!   time the conversion held the tables).
//!
//! ```text
//! cargo bench -p slotguard-benches --bench history                          # 10,000,000 runs
//! cargo bench -p slotguard-benches --bench history -- 1000000 plain day    # fewer; two layouts
//! ```
//!
//! The layouts: `plain` (the table as migrated), `day` and `week` (partitioned by day or by ISO
//! week); all three by default.
//!
//! Override the server with `SLOTGUARD_TEST_DATABASE_URL`; the schemas are dropped afterwards.

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use slotguard::Overlap;
use slotguard::store::{
    AdminStore, Claim, DueSpec, Finish, PruneSpec, QueueStore, RetentionStore, RunFilter,
    RunStatus, SlotStore,
};
use slotguard_postgres::{HistoryPartitions, PgBackend};
use slotguard_tests::pg::{TestSchema, database_url};
use slotguard_tests::request;
use sqlx::AssertSqlSafe;

/// Jobs in the history, and days of it.
const JOBS: u64 = 100;
const DAYS: i64 = 31;

fn main() {
    let args = slotguard_benches::bench_args();
    let runs: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let layouts: Vec<Layout> = args
        .iter()
        .skip(1)
        .filter_map(|a| Layout::parse(a))
        .collect();
    let layouts = if layouts.is_empty() {
        vec![Layout::Plain, Layout::Daily, Layout::Weekly]
    } else {
        layouts
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        println!("history of {runs} runs, {JOBS} jobs, {DAYS} days");
        for layout in layouts {
            measure(runs, layout).await;
        }
    });
}

/// How the history is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Plain,
    Daily,
    Weekly,
}

impl Layout {
    fn parse(arg: &str) -> Option<Self> {
        match arg {
            "plain" => Some(Layout::Plain),
            "day" => Some(Layout::Daily),
            "week" => Some(Layout::Weekly),
            _ => None,
        }
    }

    fn partitions(self) -> Option<HistoryPartitions> {
        match self {
            Layout::Plain => None,
            Layout::Daily => Some(HistoryPartitions::daily()),
            Layout::Weekly => Some(HistoryPartitions::weekly()),
        }
    }
}

/// Every figure of one layout, printed as it comes.
async fn measure(runs: u64, layout: Layout) {
    println!("\n== {layout:?}");
    let schema = TestSchema::with_prefix("sg_history");
    let mut builder = PgBackend::builder(&database_url())
        .schema(schema.name.clone())
        .pool_size(8);
    if let Some(partitions) = layout.partitions() {
        builder = builder.partitioned_history(partitions);
    }
    let backend = builder.connect().await.expect("connect");
    if layout != Layout::Plain {
        let now = Utc::now();
        backend
            .make_history_partitions(now - TimeDelta::days(DAYS + 1), now)
            .await
            .expect("partitions");
    }
    let started = Instant::now();
    seed(&backend, runs, layout == Layout::Plain).await;
    println!("seeded in {:.0} s", started.elapsed().as_secs_f64());

    claims(&backend).await;
    drain(&backend).await;
    pages(&backend).await;
    retention(&backend, layout).await;
    if layout == Layout::Plain {
        convert(&backend).await;
    }
    backend.close().await;
}

/// The conversion of what is left to the partitioned layout, while the backend that seeded it
/// claims and finishes a slot every 100 ms: how long the conversion took, and the longest a claim
/// and its finish took meanwhile (they wait for the conversion's exclusive lock).
async fn convert(backend: &PgBackend) {
    let stop = tokio_util::sync::CancellationToken::new();
    let probe = tokio::spawn({
        let (backend, stop) = (backend.clone(), stop.clone());
        async move {
            let mut longest = Duration::ZERO;
            let mut at = Utc::now() - TimeDelta::hours(1);
            while !stop.is_cancelled() {
                at += TimeDelta::seconds(1);
                let started = Instant::now();
                let claims = backend
                    .claim(
                        "probe",
                        &[request("probe", &at.to_rfc3339(), Duration::from_secs(60))],
                    )
                    .await
                    .expect("claim during the conversion");
                if let Claim::Won(lease) = &claims[0] {
                    backend
                        .finish("probe", &[(lease.clone(), Finish::succeeded())])
                        .await
                        .expect("finish during the conversion");
                }
                longest = longest.max(started.elapsed());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            longest
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let converted = PgBackend::builder(&database_url())
        .schema(backend.schema())
        .pool_size(1)
        .partitioned_history(HistoryPartitions::daily())
        .connect()
        .await
        .expect("convert");
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    let longest = probe.await.expect("probe");
    println!(
        "conversion of what is left to the partitioned layout: {:.1} s; the longest claim and \
         finish of another backend meanwhile: {:.1} s",
        took.as_secs_f64(),
        longest.as_secs_f64()
    );
    converted.close().await;
}

/// Runs `sql`, `{s}` standing for the schema.
async fn exec(backend: &PgBackend, sql: &str) {
    let sql = sql.replace("{s}", &format!("\"{}\"", backend.schema()));
    sqlx::raw_sql(AssertSqlSafe(sql))
        .execute(backend.pool())
        .await
        .expect("statement");
}

/// `runs` finished runs (one in 1,000 failed) evenly over the last 31 days from midnight UTC, in
/// ten statements, then their attempts, then `ANALYZE`.
async fn seed(backend: &PgBackend, runs: u64, plain: bool) {
    let per_job = (runs / JOBS).max(1);
    let chunk = (runs / 10).max(1);
    let mut from = 0;
    while from < runs {
        let to = (from + chunk).min(runs);
        exec(
            backend,
            &format!(
                "INSERT INTO {{s}}.job_runs (job_name, scheduled_at, status, attempt, owner,
                     fencing_token, stale_after, heartbeat_at, started_at, finished_at, zone,
                     wall_time, business_date, \"trigger\", schedule_fingerprint)
                 SELECT 'h' || (g % {JOBS}), t,
                        CASE WHEN g % 1000 = 7 THEN 'failed' ELSE 'succeeded' END, 1, 'w',
                        nextval('{{s}}.fencing_tokens'), interval '30 seconds', t, t,
                        t + interval '1 second', 'UTC', t AT TIME ZONE 'UTC',
                        (t AT TIME ZONE 'UTC')::date, 'schedule', 1
                 FROM generate_series({from}, {to} - 1) AS g,
                 LATERAL (SELECT date_trunc('day', now() - interval '{DAYS} days', 'UTC')
                          + (g / {JOBS}) * (interval '{DAYS} days' / {per_job}) AS t) x"
            ),
        )
        .await;
        from = to;
    }
    // On the plain table the attempts have no slot time, as those written before migration 17:
    // the conversion measured at the end gives them theirs.
    let slot = if plain { "NULL" } else { "scheduled_at" };
    exec(
        backend,
        &format!(
            "INSERT INTO {{s}}.job_run_attempts
                 (run_id, attempt, owner, fencing_token, status, started_at, finished_at,
                  scheduled_at)
             SELECT id, 1, 'w', fencing_token, status, started_at, finished_at, {slot}
             FROM {{s}}.job_runs;
             ANALYZE {{s}}.job_runs; ANALYZE {{s}}.job_run_attempts;"
        ),
    )
    .await;
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

/// 200 claims of one slot in the last 200 seconds, each finished, one after another.
async fn claims(backend: &PgBackend) {
    let now = Utc::now() - TimeDelta::seconds(200);
    let mut times = Vec::new();
    for i in 0..200 {
        let at = (now + TimeDelta::seconds(i)).to_rfc3339();
        let job = format!("h{}", i % JOBS as i64);
        let started = Instant::now();
        let claims = backend
            .claim("bench", &[request(&job, &at, Duration::from_secs(60))])
            .await
            .expect("claim");
        let Claim::Won(lease) = &claims[0] else {
            panic!("claim lost: {claims:?}")
        };
        backend
            .finish("bench", &[(lease.clone(), Finish::succeeded())])
            .await
            .expect("finish");
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "claim + finish of one slot: p50 {:.2} ms, p99 {:.2} ms",
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    );
}

/// 10,000 queued slots of 10 jobs, drained by 4 tasks claiming 16 at a time.
async fn drain(backend: &PgBackend) {
    let now = Utc::now();
    let requests: Vec<_> = (0..10_000)
        .map(|i| {
            let at = (now - TimeDelta::milliseconds(10_000 - i)).to_rfc3339();
            request(&format!("q{}", i % 10), &at, Duration::from_secs(60))
        })
        .collect();
    for batch in requests.chunks(1000) {
        backend.enqueue_slots(batch, &[]).await.expect("enqueue");
    }
    // The statistics as autovacuum keeps them in a steady state: with the queue in them.
    exec(backend, "ANALYZE {s}.job_runs").await;
    let specs: Vec<DueSpec> = (0..10)
        .map(|i| DueSpec {
            job: format!("q{i}"),
            max_attempts: 3,
            overlap: Overlap::Allow,
            limit: None,
            cluster_limit: None,
            ahead: std::time::Duration::ZERO,
        })
        .collect();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..4 {
        let (backend, specs) = (backend.clone(), specs.clone());
        tasks.spawn(async move {
            let owner = format!("w{w}");
            let mut done = 0_u64;
            loop {
                let due = backend
                    .claim_due(&owner, &specs, 16)
                    .await
                    .expect("claim due");
                if due.is_empty() {
                    return done;
                }
                let finishes: Vec<_> = due
                    .iter()
                    .map(|d| (d.lease.clone(), Finish::succeeded()))
                    .collect();
                backend.finish(&owner, &finishes).await.expect("finish");
                done += due.len() as u64;
            }
        });
    }
    let done: u64 = tasks.join_all().await.into_iter().sum();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "drain of {done} queued slots: {:.0} runs/s",
        done as f64 / secs
    );
}

/// The dashboard's reads, each the median of 20.
async fn pages(backend: &PgBackend) {
    let now = Utc::now();
    let filters = [
        (
            "newest 50 runs of every job",
            RunFilter {
                limit: 50,
                ..RunFilter::default()
            },
        ),
        (
            "one job's newest 50",
            RunFilter {
                job: Some("h7".into()),
                limit: 50,
                ..RunFilter::default()
            },
        ),
        (
            "failed runs, newest 50",
            RunFilter {
                status: Some(RunStatus::Failed),
                limit: 50,
                ..RunFilter::default()
            },
        ),
    ];
    for (name, filter) in filters {
        let mut times = Vec::new();
        for _ in 0..20 {
            let started = Instant::now();
            let runs = AdminStore::runs(backend, &filter).await.expect("runs");
            times.push(started.elapsed());
            assert_eq!(runs.len(), 50, "{name}");
        }
        times.sort();
        println!("page: {name}: {:.2} ms", percentile(&times, 0.5));
    }
    let mut times = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        backend
            .run_counts(now - TimeDelta::days(1))
            .await
            .expect("counts");
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "page: run counts per job: {:.2} ms",
        percentile(&times, 0.5)
    );
}

/// The history's size on disk (every partition, indexes included) and dead rows.
async fn size(backend: &PgBackend) -> (f64, i64, i64) {
    tokio::time::sleep(Duration::from_secs(2)).await; // statistics are flushed about each second
    let schema = backend.schema();
    let (bytes, dead, live): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT sum(pg_total_relation_size(relid))::bigint FROM (
                     SELECT relid FROM pg_partition_tree(format('%I.job_runs', $1)::regclass)
                     UNION
                     SELECT relid FROM pg_partition_tree(format('%I.job_run_attempts', $1)::regclass)
                     UNION
                     SELECT format('%I.job_runs', $1)::regclass
                     UNION
                     SELECT format('%I.job_run_attempts', $1)::regclass
                 ) t),
                coalesce(sum(n_dead_tup), 0)::bigint, coalesce(sum(n_live_tup), 0)::bigint
         FROM pg_stat_user_tables
         WHERE schemaname = $1 AND relname LIKE 'job_run%'",
    )
    .bind(schema)
    .fetch_one(backend.pool())
    .await
    .expect("size");
    (bytes as f64 / 1e9, dead, live)
}

/// The day past a 30-day keep, deleted; sizes before and after.
async fn retention(backend: &PgBackend, layout: Layout) {
    let specs: Vec<PruneSpec> = (0..JOBS)
        .map(|j| PruneSpec {
            job: format!("h{j}"),
            keep: Duration::from_secs(30 * 24 * 3600),
        })
        .collect();
    let (gb, dead, live) = size(backend).await;
    println!("before retention: {gb:.2} GB, {live} live rows, {dead} dead");
    let started = Instant::now();
    let mut deleted: u64 = backend
        .prune_partitions(&specs)
        .await
        .expect("partitions")
        .iter()
        .map(|p| p.runs)
        .sum();
    let dropped = deleted;
    let drop_time = started.elapsed();
    loop {
        let batch: u64 = backend
            .prune_runs(&specs, 500)
            .await
            .expect("prune")
            .iter()
            .map(|p| p.runs)
            .sum();
        deleted += batch;
        if batch < 500 {
            break;
        }
    }
    println!(
        "retention: {deleted} runs deleted in {:.2} s; of them {dropped} by dropping partitions \
         in {:.2} s",
        started.elapsed().as_secs_f64(),
        drop_time.as_secs_f64()
    );
    let (gb, dead, live) = size(backend).await;
    println!("after retention: {gb:.2} GB, {live} live rows, {dead} dead");
    if layout == Layout::Plain {
        let started = Instant::now();
        exec(backend, "VACUUM {s}.job_runs, {s}.job_run_attempts").await;
        let (gb, dead, live) = size(backend).await;
        println!(
            "VACUUM: {:.1} s; after it {gb:.2} GB, {live} live rows, {dead} dead",
            started.elapsed().as_secs_f64()
        );
    }
}
