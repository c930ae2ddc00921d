//! A replica process for the multi-process tests, on a real store.
//!
//! ```text
//! sg-node --store sqlite:/tmp/x.db | postgres:postgres://...#schema | pgpooled:postgres://...#schema | none
//!         [--lock-store redis:redis://127.0.0.1:6379 [--lease-ms 1500]]
//!         --instance a --ledger /tmp/ledger --jobs 10 --cron "* * * * * *" --work-ms 50
//!         [--guard slot|lock] [--stale-ms 3000] [--recovery-ms 500] [--grace-ms 5000]
//!         [--lock-check-ms 500] [--namespace default] [--spread-ms 20]
//!         [--overlap skip,allow,buffer_one,replace] [--catch-up latest|all:<within_s>:<max>|skip,...]
//!         [--catch-up-rate 1] [--pool-size 5] [--skew-ms 0] [--fail-while PATH] [--max-attempts 5]
//!         [--names a,b,c] [--tz ZONE,...] [--dst vixie|skip|shift|instant,...]
//!         [--start-at RFC3339 [--start-at-real-ms UNIX_MS]]
//!         [--role all|scheduler|worker|admin] [--max-runs N] [--once SLOT|latest]
//! ```
//!
//! `--overlap`, `--catch-up`, `--tz` and `--dst` take a comma-separated list, `--cron` a
//! `;`-separated one: job `n` gets entry `n % len`. `--names` names the jobs (and sets their number;
//! default `job000`, `job001`, ...). The store URL may carry `?application_name=...`, so that a fault
//! test can find the replica's backends.
//! `--skew-ms` moves the replica's wall clock (the one slots are computed from) by that much;
//! `--jump-ms J --jump-after-ms A` steps it by J more after A; `--clock-sync follow|observe|off`
//! (default `follow`, the system clock's default) says what the scheduler does about it.
//! `--start-at` injects the scheduler's clock instead: it reads that instant when the process starts
//! (or at the real instant `--start-at-real-ms`, so that replicas started at different times share
//! one timeline) and advances with real time. It must not read ahead of the real clock. Like any
//! injected clock it is the truth (`ClockSync::Observe`): the database's clock is months ahead.
//! `--lock-store redis:URL` takes the jobs' locks from Redis (`slotguard-redis`, key prefix the
//! `--namespace`, lease TTL `--lease-ms`), in front of the store's slot rows; with `--store none` Redis
//! is all there is (give `--guard lock`), and the ledger's token is the lease's.
//! `--store pgpooled:URL#schema` reaches PostgreSQL through a transaction pooler: the backend built
//! with `transaction_pooler(true)`, its lock layer `PgLeaseLocks` lease rows (TTL `--lease-ms`).
//! `--spread-ms` is `SchedulerBuilder::load_spread` (the default of a scheduler on the system clock).
//! `--role` is `SchedulerBuilder::role` (default `all`: the replica schedules and runs); `--max-runs`
//! is `SchedulerBuilder::max_concurrent_runs` (default: no limit).
//! `--once SLOT` runs one slot of the first job with `Scheduler::run_once` instead of starting (a
//! pod of a Kubernetes CronJob): it prints `once code=<exit code> <outcome>` and exits with that code.
//! `--fail-while PATH`: the body fails (after writing `start`, then `failed ...`) while PATH exists.
//!
//! Every job body appends to the effects ledger before doing anything else (`start <job> <slot>
//! <attempt> <token> <instance> <pid> <unix_us> [<partition>]`, `unix_us` the real time of the
//! write, the partition only when the run has one: a stored schedule's slots are on its partition),
//! then works for `--work-ms` (or until told to stop), then
//! appends `end ...` or `lost ...` with whether its ownership was lost. Duplicates are counted from the
//! ledger, from what actually ran. Prints `ready` once started and `stopped ...` after a graceful
//! shutdown on SIGTERM or SIGINT.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use slotguard::{
    CatchUp, Clock, ClockSync, GuardLevel, Job, JobContext, JobError, Overlap, RetryPolicy, Role,
    Scheduler, SlotSource,
};

/// The system clock moved by an offset (in ms) that may change while running: a replica whose wall
/// clock is wrong, or is stepped.
#[derive(Debug, Clone, Default)]
struct SkewedClock(Arc<AtomicI64>);

impl Clock for SkewedClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now() + chrono::Duration::milliseconds(self.0.load(Ordering::Relaxed))
    }
}

fn clock_sync(spec: &str) -> Result<ClockSync, String> {
    match spec {
        "follow" => Ok(ClockSync::FOLLOW),
        "observe" => Ok(ClockSync::Observe),
        "off" => Ok(ClockSync::Off),
        _ => Err(format!("bad clock sync {spec} (follow, observe, off)")),
    }
}

/// An injected clock: it reads `at` at the real instant `real` and advances with real time (speed 1:
/// the timer sleeps on real time and leases are judged by the database clock, so a faster clock would
/// only make the timer overshoot its slots). The scheduler takes it as the truth.
#[derive(Debug, Clone, Copy)]
struct StartAtClock {
    at: chrono::DateTime<chrono::Utc>,
    real: chrono::DateTime<chrono::Utc>,
}

impl Clock for StartAtClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.at + (chrono::Utc::now() - self.real)
    }
}

fn catch_up(spec: &str) -> Result<CatchUp, String> {
    match spec.split(':').collect::<Vec<_>>().as_slice() {
        ["skip"] => Ok(CatchUp::Skip),
        ["latest"] => Ok(CatchUp::Latest),
        ["all", within, max] => Ok(CatchUp::All {
            within: Duration::from_secs(within.parse().map_err(|_| format!("bad {spec}"))?),
            max_slots: max.parse().map_err(|_| format!("bad {spec}"))?,
        }),
        _ => Err(format!("bad catch-up policy {spec}")),
    }
}

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

/// Appends `line`, the real time in microseconds (the system clock, not the scheduler's clock,
/// which `--skew-ms` and `--start-at` move), so that the checker can tell when bodies ran, and the
/// run's partition when it has one (a stored schedule's slots are on their partition).
fn append(ledger: &str, line: &str, partition: &str) {
    let at = chrono::Utc::now().timestamp_micros();
    let line = if partition.is_empty() {
        format!("{line} {at}\n")
    } else {
        format!("{line} {at} {partition}\n")
    };
    // One write per line with O_APPEND: lines of several processes never interleave.
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ledger)
    {
        let _ = f.write_all(line.as_bytes());
        let _ = f.sync_data();
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `builder` with the slot store `--store` names (`none`: no backend, a lock store alone).
async fn with_store(
    builder: slotguard::SchedulerBuilder,
    store: &str,
    args: &Args,
) -> Result<slotguard::SchedulerBuilder, Box<dyn std::error::Error>> {
    Ok(if let Some(path) = store.strip_prefix("sqlite:") {
        builder.backend(slotguard_sqlite::SqliteBackend::open(path).await?)
    } else if let Some(rest) = store.strip_prefix("postgres:") {
        builder.backend(postgres(rest, false, args).await?)
    } else if let Some(rest) = store.strip_prefix("pgpooled:") {
        // Through a transaction pooler: the slot rows unprepared, the locks as lease rows.
        // The backend first: it migrates the schema (through the pooler), the leases do not.
        let backend = postgres(rest, true, args).await?;
        let (url, schema) = rest.split_once('#').unwrap_or((rest, "slotguard"));
        let leases = slotguard_postgres::PgLeaseLocks::builder(url)
            .schema(schema)
            .lease_ttl(args.ms("lease-ms", 1_500))
            .connect()
            .await?;
        builder.backend(backend).lock_store(leases)
    } else if store == "none" {
        builder
    } else {
        return Err(format!("unknown store {store}").into());
    })
}

/// The backend at `spec` (`URL#schema`), built for a transaction pooler when `pooled`.
async fn postgres(
    spec: &str,
    pooled: bool,
    args: &Args,
) -> Result<slotguard_postgres::PgBackend, slotguard_postgres::PgError> {
    let (url, schema) = spec.split_once('#').unwrap_or((spec, "slotguard"));
    slotguard_postgres::PgBackend::builder(url)
        .schema(schema)
        .lock_liveness_interval(args.ms("lock-check-ms", 500))
        .pool_size(
            args.get("pool-size")
                .and_then(|v| v.parse().ok())
                .unwrap_or(5),
        )
        .transaction_pooler(pooled)
        .connect()
        .await
}

/// `builder` with the `--role` (default `all`) and the `--max-runs` room, if given.
fn with_role(
    builder: slotguard::SchedulerBuilder,
    args: &Args,
) -> Result<slotguard::SchedulerBuilder, Box<dyn std::error::Error>> {
    let builder = builder.role(args.get("role").unwrap_or("all").parse::<Role>()?);
    Ok(match args.get("max-runs") {
        Some(runs) => {
            builder.max_concurrent_runs(runs.parse().map_err(|_| {
                format!("bad --max-runs {runs}: a whole number of runs, at least 1")
            })?)
        }
        None => builder,
    })
}

/// `--once`: runs `slot` of `job` as a run-once process would (a CronJob's pod), says how it ended
/// and exits with the code that tells the platform.
async fn run_once(builder: slotguard::SchedulerBuilder, job: &str, slot: &str) -> ! {
    let done = match SlotSource::parse(slot) {
        Ok(source) => match builder.build() {
            Ok(scheduler) => scheduler.run_once(job, source).await,
            Err(e) => {
                say(&format!("once code=2 build: {e}"));
                std::process::exit(2);
            }
        },
        Err(e) => Err(e),
    };
    let (code, text) = match done {
        Ok(done) => (done.code(), done.to_string()),
        Err(e) => (e.code(), e.to_string()),
    };
    say(&format!("once code={code} {text}"));
    std::process::exit(i32::from(code));
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args(std::env::args().collect());
    let store = args.get("store").ok_or("--store is required")?.to_owned();
    let instance = args.get("instance").unwrap_or("node").to_owned();
    let ledger: Arc<str> = Arc::from(args.get("ledger").ok_or("--ledger is required")?);
    let names: Vec<String> = match args.get("names") {
        Some(list) => list.split(',').map(str::to_owned).collect(),
        None => {
            let jobs: usize = args.get("jobs").and_then(|v| v.parse().ok()).unwrap_or(1);
            (0..jobs).map(|n| format!("job{n:03}")).collect()
        }
    };
    let crons: Vec<String> = args
        .get("cron")
        .unwrap_or("* * * * * *")
        .split(';')
        .map(|c| c.trim().to_owned())
        .collect();
    // UTC and `vixie` are the scheduler's defaults: naming them changes nothing.
    let zones: Vec<&str> = args.get("tz").unwrap_or("UTC").split(',').collect();
    let dsts: Vec<slotguard::DstPolicy> = args
        .get("dst")
        .unwrap_or("vixie")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let work = args.ms("work-ms", 50);
    let guard = match args.get("guard").unwrap_or("slot") {
        "lock" => GuardLevel::Lock,
        _ => GuardLevel::Slot,
    };

    let overlaps: Vec<Overlap> = args
        .get("overlap")
        .unwrap_or("skip")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let catch_ups: Vec<CatchUp> = args
        .get("catch-up")
        .unwrap_or("skip")
        .split(',')
        .map(catch_up)
        .collect::<Result<_, _>>()?;
    let fail_while: Option<Arc<str>> = args.get("fail-while").map(Arc::from);
    let max_attempts: u32 = args
        .get("max-attempts")
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let skew_ms: i64 = args
        .get("skew-ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let clock = SkewedClock::default();
    clock.0.store(skew_ms, Ordering::Relaxed);
    if let Some(jump) = args.get("jump-ms").and_then(|v| v.parse::<i64>().ok()) {
        // The clock steps by `jump` ms after `--jump-after-ms`, like a clock set by hand.
        let (offset, after) = (Arc::clone(&clock.0), args.ms("jump-after-ms", 0));
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            offset.fetch_add(jump, Ordering::Relaxed);
            say(&format!("jumped {jump}"));
        });
    }

    let mut builder = Scheduler::builder()
        .instance_id(instance.clone())
        .stale_after(args.ms("stale-ms", 3_000))
        .recovery_interval(args.ms("recovery-ms", 500))
        .grace_period(args.ms("grace-ms", 5_000))
        .kill_after(Duration::from_millis(500))
        .lock_namespace(args.get("namespace").unwrap_or("default"))
        // The injected clock stands in for the system clock: the system clock's default spread.
        .load_spread(args.ms("spread-ms", 20));
    builder = match args.get("start-at") {
        Some(at) => {
            let at = chrono::DateTime::parse_from_rfc3339(at)?.to_utc();
            let real = match args.get("start-at-real-ms") {
                Some(ms) => chrono::DateTime::from_timestamp_millis(ms.parse()?)
                    .ok_or("--start-at-real-ms out of range")?,
                None => chrono::Utc::now(),
            };
            let clock = StartAtClock { at, real };
            if clock.now() > chrono::Utc::now() {
                return Err("--start-at must not put the clock ahead of the real clock".into());
            }
            builder.clock(clock)
        }
        None => builder
            .clock(clock)
            // The skewed clock stands in for the system clock, so it gets the system clock's default.
            .clock_sync(clock_sync(args.get("clock-sync").unwrap_or("follow"))?),
    };
    if let Some(rate) = args.get("catch-up-rate").and_then(|v| v.parse().ok()) {
        builder = builder.catch_up_rate(rate);
    }
    builder = with_role(builder, &args)?;
    builder = with_store(builder, &store, &args).await?;
    if let Some(spec) = args.get("lock-store") {
        let url = spec
            .strip_prefix("redis:")
            .ok_or_else(|| format!("unknown lock store {spec} (redis:URL)"))?;
        let locks = slotguard_redis::RedisLocks::new(url)?
            .lease_ttl(args.ms("lease-ms", 1_500))
            .prefix(args.get("namespace").unwrap_or("default"));
        builder = builder.lock_store(locks);
    }

    let first_job = names.first().cloned().unwrap_or_default();
    for (n, name) in names.into_iter().enumerate() {
        let ledger = Arc::clone(&ledger);
        let instance = instance.clone();
        let fail_while = fail_while.clone();
        let cron = &crons[n % crons.len()];
        builder = builder.job(
            Job::new(name, cron.clone(), move |ctx: JobContext| {
                let ledger = Arc::clone(&ledger);
                let instance = instance.clone();
                let fail_while = fail_while.clone();
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
                    let partition = ctx.partition().unwrap_or_default().to_owned();
                    let note = |line: &str| append(&ledger, line, &partition);
                    note(&format!("start {id}"));
                    if fail_while
                        .as_deref()
                        .is_some_and(|p| std::path::Path::new(p).exists())
                    {
                        note(&format!("failed {id}"));
                        return Err(JobError::from("told to fail"));
                    }
                    tokio::select! {
                        () = tokio::time::sleep(work) => {}
                        () = ctx.cancelled() => {}
                    }
                    if ctx.is_lost() {
                        note(&format!("lost {id}"));
                        return Err(JobError::from("ownership lost"));
                    }
                    if ctx.is_cancelled() {
                        note(&format!("cancelled {id}"));
                        return Err(JobError::from("stopped by shutdown"));
                    }
                    note(&format!("end {id}"));
                    Ok(())
                }
            })
            .guard(guard)
            .overlap(overlaps[n % overlaps.len()])
            .catch_up(catch_ups[n % catch_ups.len()])
            .retry(RetryPolicy::exponential(
                max_attempts,
                Duration::from_millis(200),
                Duration::from_secs(2),
            ))
            .tz(zones[n % zones.len()])
            .dst(dsts[n % dsts.len()]),
        );
    }
    if let Some(slot) = args.get("once") {
        run_once(builder, &first_job, slot).await;
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
