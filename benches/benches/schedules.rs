//! 100,000 stored schedules (tenants) of one handler on PostgreSQL: a replica's start-up (until it
//! has read every schedule), its memory per schedule, its CPU while idle, and the time from an edit
//! to every one of three replicas having read it.
//!
//! ```text
//! cargo bench -p slotguard-benches --bench schedules            # 100,000 schedules
//! SCHEDULES=10000 cargo bench -p slotguard-benches --bench schedules
//! ```
//!
//! A harness rather than criterion: memory and CPU come from `/proc/self` (Linux), and "has read"
//! is the replica's own `schedules_read` event (its `seq`), caught by a tracing layer, per replica.
//! The schedules are written in one `INSERT … SELECT` (the bench's set-up, not what is measured);
//! each is `m h 1 1 *` in one of five zones, so nothing is due while idle CPU is measured.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slotguard::store::{ScheduleSpec, ScheduleStore, ScheduleWrite};
use slotguard::{GuardLevel, Job, JobContext, Scheduler, SchedulerHandle};
use slotguard_benches::{cpu_ticks, rss_bytes};
use slotguard_postgres::PgBackend;
use slotguard_tests::pg::{TestSchema, database_url};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

const JOB: &str = "tenant_report";

/// Every `schedules_read` event: replica, the last change read, when.
#[derive(Clone, Default)]
struct Reads(Arc<Mutex<Vec<(String, i64, Instant)>>>);

impl Reads {
    /// When `replica` first read up to `seq`.
    fn first(&self, replica: &str, seq: i64) -> Option<Instant> {
        let reads = self.0.lock().unwrap();
        reads
            .iter()
            .find(|(r, s, _)| r == replica && *s >= seq)
            .map(|(_, _, at)| *at)
    }
}

/// The replica a span names.
struct Replica(String);

#[derive(Default)]
struct Fields {
    replica: Option<String>,
    event: Option<String>,
    seq: Option<i64>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "replica" => self.replica = Some(format!("{value:?}")),
            "event" => self.event = Some(format!("{value:?}").trim_matches('"').to_owned()),
            _ => {}
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "event" {
            self.event = Some(value.to_owned());
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "seq" {
            self.seq = Some(value);
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Reads {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let (Some(replica), Some(span)) = (fields.replica, ctx.span(id)) {
            span.extensions_mut().insert(Replica(replica));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.event.as_deref() != Some("schedules_read") {
            return;
        }
        let replica = ctx.event_scope(event).and_then(|scope| {
            scope
                .into_iter()
                .find_map(|span| span.extensions().get::<Replica>().map(|r| r.0.clone()))
        });
        if let (Some(replica), Some(seq)) = (replica, fields.seq) {
            self.0.lock().unwrap().push((replica, seq, Instant::now()));
        }
    }
}

async fn connect(schema: &TestSchema) -> PgBackend {
    PgBackend::builder(&database_url())
        .schema(schema.name.clone())
        .pool_size(4)
        .connect()
        .await
        .expect("connect to PostgreSQL (see SLOTGUARD_TEST_DATABASE_URL)")
}

async fn replica(backend: PgBackend, name: &str) -> SchedulerHandle {
    let job = Job::new(JOB, "0 0 1 1 *", |_ctx: JobContext| async {}).guard(GuardLevel::Slot);
    Scheduler::builder()
        .backend(backend)
        .instance_id(name)
        .job(job)
        .build()
        .expect("build")
        .try_start()
        .await
        .expect("start")
}

/// `n` schedules of the job, one per tenant, in one statement; answers the last `seq`.
async fn fill(schema: &TestSchema, n: usize) -> i64 {
    let mut conn = PgConnection::connect(&database_url())
        .await
        .expect("connect");
    let sql = format!(
        "INSERT INTO {s}.job_schedules (schedule_id, version, removed, job_name, cron, zone, dst,
             partition_key, paused, pause_on_failure, effective_at, changed_by, changed_at, reason)
         SELECT 'tenant-' || i, 1, false, '{JOB}', (i % 60) || ' ' || (i / 60 % 24) || ' 1 1 *',
             (ARRAY['Asia/Seoul','America/New_York','Europe/Berlin','UTC','Australia/Sydney'])[i % 5 + 1],
             'vixie', 'tenant-' || i, false, false, now(), 'bench', now(), 'bench'
         FROM generate_series(1, {n}) AS i
         RETURNING seq",
        s = schema.name
    );
    let seqs: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(sql))
        .fetch_all(&mut conn)
        .await
        .expect("fill");
    seqs.into_iter().max().unwrap_or(0)
}

fn main() {
    let n: usize = std::env::var("SCHEDULES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let reads = Reads::default();
    let subscriber = tracing_subscriber::registry().with(reads.clone());
    tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(n, &reads));
}

async fn run(n: usize, reads: &Reads) {
    let schema = TestSchema::with_prefix("sg_bench_sched");
    // Migrate the schema before the fill, with a replica that follows nothing yet.
    let warm = replica(connect(&schema).await, "warm").await;
    warm.shutdown().await;
    let filled = Instant::now();
    let last = fill(&schema, n).await;
    println!(
        "schedules: {n}, written in {:.1} s (set-up)",
        filled.elapsed().as_secs_f64()
    );

    let rss_before = rss_bytes();
    let backend = connect(&schema).await;
    let started = Instant::now();
    let one = replica(backend.clone(), "one").await;
    while reads.first("one", last).is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ready = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss = rss_bytes().saturating_sub(rss_before);
    println!(
        "start-up until every schedule is read: {:.2} s; memory: {:.1} MiB, {} bytes per schedule",
        ready.as_secs_f64(),
        rss as f64 / 1_048_576.0,
        rss / n as u64
    );
    let ticks = cpu_ticks();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle = (cpu_ticks() - ticks) as f64 / 100.0 / 10.0;
    println!("idle CPU of the replica: {:.1} % of one core", idle * 100.0);

    propagation(&schema, one, backend, reads).await;
}

/// Two more replicas; then edits, each timed until all three have read it.
async fn propagation(schema: &TestSchema, one: SchedulerHandle, store: PgBackend, reads: &Reads) {
    let two = replica(connect(schema).await, "two").await;
    let three = replica(connect(schema).await, "three").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut spent = Vec::new();
    for round in 0..20_i64 {
        let cron = format!("{} 3 1 1 *", round % 60);
        let spec = ScheduleSpec::new(JOB, cron, "Asia/Seoul", "tenant-1");
        let written = Instant::now();
        let answer = store
            .write_schedule("tenant-1", round + 1, Some(&spec), "bench", "edit")
            .await
            .expect("edit");
        let ScheduleWrite::Written(version) = answer else {
            panic!("stale: {answer:?}");
        };
        loop {
            let all = ["one", "two", "three"].map(|r| reads.first(r, version.seq));
            if let [Some(a), Some(b), Some(c)] = all {
                spent.push(a.max(b).max(c) - written);
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(137)).await;
    }
    spent.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "edit to all 3 replicas: p50 {:.0} ms, max {:.0} ms (poll 250 ms; the fence is 500 ms)",
        ms(spent[spent.len() / 2]),
        ms(spent[spent.len() - 1])
    );
    for handle in [one, two, three] {
        handle.shutdown().await;
    }
}
