//! One function per system: start R replicas of the same app (in this process; graphile-worker's as
//! Node.js processes), let them run the job for D seconds (every second) or M minutes (every minute),
//! stop them, and return the measured window and what "slot" means.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use crate::ledger::Ledger;
use crate::{Args, Window};

type Outcome = Result<(Window, String), String>;

pub async fn run(system: &str, args: &Args, run_id: &str, ledger: &Ledger) -> Outcome {
    match system {
        "slotguard" => slotguard(system, args, run_id, ledger, None, false).await,
        "slotguard-claim-ahead" => {
            slotguard(
                system,
                args,
                run_id,
                ledger,
                Some(Duration::from_millis(100)),
                false,
            )
            .await
        }
        "slotguard-minute" => slotguard(system, args, run_id, ledger, None, true).await,
        "graphile-worker" => crate::graphile::run(system, args, run_id, ledger, false).await,
        "graphile-worker-restart" => crate::graphile::run(system, args, run_id, ledger, true).await,
        "tokio-cron-scheduler" => tokio_cron_scheduler(system, args, ledger, true).await,
        "tokio-cron-scheduler-memory" => tokio_cron_scheduler(system, args, ledger, false).await,
        "apalis" => apalis(system, args, run_id, ledger, false).await,
        "apalis-idempotency" => apalis(system, args, run_id, ledger, true).await,
        other => Err(format!("unknown system {other}")),
    }
}

/// Runs for `seconds` from now and returns the window: the first whole second at least one second
/// after `started` (start-up slack) to the last whole second at least one second before the stop.
async fn measure(seconds: u64, started: DateTime<Utc>) -> Window {
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let stopped = Utc::now();
    let first = started.duration_trunc(TimeDelta::seconds(1)).unwrap() + TimeDelta::seconds(2);
    let last = stopped.duration_trunc(TimeDelta::seconds(1)).unwrap() - TimeDelta::seconds(1);
    Window {
        first,
        last,
        step_secs: 1,
        margin: 2,
    }
}

/// The window of an every-minute system that ran from `started` to `stopped`: every whole minute
/// from the first one at least 5 s after the start to the last one at least 10 s before the stop.
/// Missed slots are counted over all of it (the slack is in those 5 and 10 s).
pub(crate) fn minute_window(started: DateTime<Utc>, stopped: DateTime<Utc>) -> Window {
    let minute = TimeDelta::minutes(1);
    let first = (started + TimeDelta::seconds(5) - TimeDelta::milliseconds(1))
        .duration_trunc(minute)
        .unwrap()
        + minute;
    let last = (stopped - TimeDelta::seconds(10))
        .duration_trunc(minute)
        .unwrap();
    Window {
        first,
        last,
        step_secs: 60,
        margin: 0,
    }
}

/// Runs for `seconds` (every-second systems) or `minutes` (every-minute systems) from now and
/// returns the window.
async fn measure_for(system: &str, args: &Args, started: DateTime<Utc>) -> Window {
    if crate::is_minute_system(system) {
        tokio::time::sleep(Duration::from_secs(args.minutes * 60)).await;
        minute_window(started, Utc::now())
    } else {
        measure(args.seconds, started).await
    }
}

fn trunc_second(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::seconds(1)).unwrap()
}

async fn drop_schema(ledger: &Ledger, schema: &str) {
    let res = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
    )))
    .execute(ledger.pool())
    .await;
    if let Err(e) = res {
        eprintln!("peers: could not drop schema {schema}: {e}");
    }
}

// ---------------------------------------------------------------------------------------------------
// slotguard
// ---------------------------------------------------------------------------------------------------

async fn slotguard(
    system: &str,
    args: &Args,
    run_id: &str,
    ledger: &Ledger,
    claim_ahead: Option<Duration>,
    every_minute: bool,
) -> Outcome {
    use slotguard::{Job, Scheduler};
    use slotguard_postgres::PgBackend;

    let schema = format!(
        "peers_{run_id}_sg{}{}",
        if claim_ahead.is_some() { "ca" } else { "" },
        if every_minute { "min" } else { "" }
    );
    // The same schedule as graphile-worker's crontab line for the every-minute row (5 fields: the
    // slot's second is 0).
    let (job_name, schedule) = if every_minute {
        ("peers-every-minute", "* * * * *")
    } else {
        ("peers-every-second", "*/1 * * * * *")
    };
    let mut handles = Vec::new();
    let mut backends = Vec::new();
    let result = async {
        for replica in 0..args.replicas {
            // Each replica: its own backend (own pool, own lock connection), the same schema.
            let backend = PgBackend::builder(&args.url)
                .schema(schema.clone())
                .connect()
                .await
                .map_err(|e| format!("PgBackend::connect: {e}"))?;
            backends.push(backend.clone());
            let ledger = ledger.clone();
            let name = system.to_owned();
            let job = Job::new(job_name, schedule, move |ctx| {
                let started = Utc::now();
                let ledger = ledger.clone();
                let name = name.clone();
                async move {
                    ledger
                        .record(&name, replica, ctx.scheduled_at(), started)
                        .await;
                }
            });
            let mut builder = Scheduler::builder()
                .backend(backend)
                .job(job)
                .instance_id(format!("peers-r{replica}"));
            if let Some(lead) = claim_ahead {
                builder = builder.claim_ahead(lead);
            }
            let scheduler = builder.build().map_err(|e| format!("build: {e}"))?;
            let handle = scheduler
                .try_start()
                .await
                .map_err(|e| format!("try_start: {e}"))?;
            handles.push(handle);
        }
        Ok::<_, String>(())
    }
    .await;
    let started = Utc::now();
    let window = match result {
        Ok(()) => Ok(measure_for(system, args, started).await),
        Err(e) => Err(e),
    };
    for handle in &handles {
        handle.shutdown().await;
    }
    for backend in &backends {
        backend.close().await;
    }
    drop_schema(ledger, &schema).await;
    window.map(|w| (w, "scheduled time (`ctx.scheduled_at()`)".to_owned()))
}

// ---------------------------------------------------------------------------------------------------
// tokio-cron-scheduler, PostgreSQL metadata and notification stores
// ---------------------------------------------------------------------------------------------------

/// `postgres`: the PostgreSQL stores shared by all replicas; otherwise each replica's default
/// in-memory store (no coordination at all, the reference for what the shared store changes).
async fn tokio_cron_scheduler(
    system: &str,
    args: &Args,
    ledger: &Ledger,
    postgres: bool,
) -> Outcome {
    use tokio::sync::RwLock;
    use tokio_cron_scheduler::{
        JobBuilder, JobScheduler, PostgresMetadataStore, PostgresNotificationStore, PostgresStore,
        SimpleJobCode, SimpleNotificationCode,
    };

    // One job id for all replicas: the same job of the same app, one row in the shared store.
    let job_id = uuid::Uuid::new_v4();
    let schema = ledger.schema().to_owned();
    let mut schedulers: Vec<JobScheduler> = Vec::new();
    let result = async {
        for replica in 0..args.replicas {
            let sched = if postgres {
                let metadata = PostgresMetadataStore {
                    store: Arc::new(RwLock::new(PostgresStore::Created(args.url.clone()))),
                    init_tables: true,
                    table: format!("{schema}.tcs_job"),
                };
                let notifications = PostgresNotificationStore {
                    store: Arc::new(RwLock::new(PostgresStore::Created(args.url.clone()))),
                    init_tables: true,
                    table: format!("{schema}.tcs_notification"),
                    states_table: format!("{schema}.tcs_notification_state"),
                };
                JobScheduler::new_with_storage_and_code(
                    Box::new(metadata),
                    Box::new(notifications),
                    Box::new(SimpleJobCode::default()),
                    Box::new(SimpleNotificationCode::default()),
                    200,
                )
                .await
                .map_err(|e| format!("JobScheduler::new_with_storage_and_code: {e:?}"))?
            } else {
                JobScheduler::new()
                    .await
                    .map_err(|e| format!("JobScheduler::new: {e:?}"))?
            };
            let ledger = ledger.clone();
            let name = system.to_owned();
            let job = JobBuilder::new()
                .with_timezone(Utc)
                .with_cron_job_type()
                .with_job_id(job_id.into())
                .with_schedule("*/1 * * * * *")
                .map_err(|e| format!("with_schedule: {e:?}"))?
                .with_run_async(Box::new(move |_uuid, _sched| {
                    let started = Utc::now();
                    let ledger = ledger.clone();
                    let name = name.clone();
                    Box::pin(async move {
                        // No scheduled time is passed to the body: the slot is the start second.
                        ledger
                            .record(&name, replica, trunc_second(started), started)
                            .await;
                    })
                }))
                .build()
                .map_err(|e| format!("JobBuilder::build: {e:?}"))?;
            sched
                .add(job)
                .await
                .map_err(|e| format!("JobScheduler::add: {e:?}"))?;
            schedulers.push(sched);
        }
        // Its tick loop polls every 500 ms from `start()`. Replicas started in the same millisecond
        // poll in lockstep; real replicas start at unrelated times, so spread the starts over one
        // polling period (replica i at i × 500/R ms).
        let spread = Duration::from_millis(500 / args.replicas as u64);
        for (i, sched) in schedulers.iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(spread).await;
            }
            sched
                .start()
                .await
                .map_err(|e| format!("JobScheduler::start: {e:?}"))?;
        }
        Ok::<_, String>(())
    }
    .await;
    let started = Utc::now();
    let window = match result {
        Ok(()) => Ok(measure(args.seconds, started).await),
        Err(e) => Err(e),
    };
    for sched in &mut schedulers {
        if let Err(e) = sched.shutdown().await {
            eprintln!("peers: tokio-cron-scheduler shutdown: {e:?}");
        }
    }
    window.map(|w| {
        (
            w,
            "start time truncated to the second (the body gets no scheduled time)".to_owned(),
        )
    })
}

// ---------------------------------------------------------------------------------------------------
// apalis-cron piped into apalis-postgres
// ---------------------------------------------------------------------------------------------------

#[derive(Clone)]
struct ApalisCtx {
    ledger: Ledger,
    name: String,
    replica: usize,
}

async fn apalis_tick(
    tick: apalis_cron::Tick,
    ctx: apalis::prelude::Data<ApalisCtx>,
) -> Result<(), apalis::prelude::BoxDynError> {
    let started = Utc::now();
    let slot = DateTime::<Utc>::from_timestamp(tick.get_timestamp() as i64, 0)
        .ok_or("tick out of range")?;
    ctx.ledger
        .record(&ctx.name, ctx.replica, slot, started)
        .await;
    Ok(())
}

/// `idempotency`: instead of `pipe_to`, each replica's cron stream pushes each tick with the
/// idempotency key `tick-<unix second>` (apalis-postgres's unique jobs: a unique index on
/// `(job_type, idempotency_key)`), so the storage keeps one task per tick; the workers consume the
/// storage through its LISTEN/NOTIFY strategy (`with_pubsub`). This is our composition of apalis' own parts, not a recipe from its docs.
async fn apalis(
    system: &str,
    args: &Args,
    run_id: &str,
    ledger: &Ledger,
    idempotency: bool,
) -> Outcome {
    use apalis::prelude::*;
    use apalis_cron::CronScheduler;
    use apalis_postgres::{Config, PostgresStorage};
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
    use std::str::FromStr;

    // apalis-postgres keeps its tables and its migration table in the schema `apalis` (fixed by its
    // migrations). When this run creates that schema, it drops it again at the end (unless --keep).
    // Nothing goes into `public`: see the search path below.
    let existed: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'apalis')")
            .fetch_one(ledger.pool())
            .await
            .map_err(|e| e.to_string())?;
    // Its migrations create the extensions `hstore` and (older ones) `pgcrypto` in the first schema
    // of the search path, i.e. the run's schema (dropped with it), unless they already exist
    // elsewhere: then that schema must be on the search path too.
    let ext_schemas: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
         WHERE e.extname IN ('hstore', 'pgcrypto')",
    )
    .fetch_all(ledger.pool())
    .await
    .map_err(|e| e.to_string())?;
    let mut search_path = vec![ledger.schema().to_owned()];
    search_path.extend(ext_schemas.into_iter().map(|s| format!("\"{s}\"")));
    search_path.push("public".to_owned());
    let options = PgConnectOptions::from_str(&args.url)
        .map_err(|e| e.to_string())?
        .options([("search_path", search_path.join(","))]);
    let pool = PgPoolOptions::new()
        .max_connections(4 * args.replicas as u32 + 2)
        .connect_with(options)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    PostgresStorage::<()>::setup(&pool)
        .await
        .map_err(|e| format!("PostgresStorage::setup: {e}"))?;

    let queue = format!("peers-{run_id}-{system}");
    let (stop_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut workers = Vec::new();
    let mut producers = Vec::new();
    let duplicates_refused = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for replica in 0..args.replicas {
        let duplicates_refused = duplicates_refused.clone();
        // Each replica: its own cron stream piped into the shared storage, and a worker on it
        // (apalis-cron's README, "Persistence": "Distribute cronjobs between multiple servers").
        let schedule = cron::Schedule::from_str("*/1 * * * * *").map_err(|e| e.to_string())?;
        let storage = PostgresStorage::<apalis_cron::Tick>::new(&pool)
            .with_config(Config::default().queue(&queue));
        let ctx = ApalisCtx {
            ledger: ledger.clone(),
            name: system.to_owned(),
            replica,
        };
        let worker_name = format!("peers-{run_id}-{system}-r{replica}");
        let mut stop = stop_tx.subscribe();
        let signal = async move {
            let _ = stop.recv().await;
            Ok::<(), std::io::Error>(())
        };
        let run = if idempotency {
            let mut sink = storage.clone();
            let mut ticks = CronScheduler::new(schedule).into_stream();
            let mut stop_producer = stop_tx.subscribe();
            producers.push(tokio::spawn(async move {
                use futures_util::StreamExt;
                loop {
                    let tick = tokio::select! {
                        _ = stop_producer.recv() => break,
                        tick = ticks.next() => tick,
                    };
                    let Some(Ok(tick)) = tick else { break };
                    let key = format!("tick-{}", tick.get_timestamp());
                    let task = TaskBuilder::new(tick).idempotency_key(key).build();
                    // A second replica's push of the same tick fails on the unique index.
                    if sink.push_task(task).await.is_err() {
                        duplicates_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }));
            // A bare storage only fetches when woken (the pipe wakes it); tasks pushed by the other
            // replicas need LISTEN/NOTIFY (apalis-postgres's pubsub strategy).
            let worker = WorkerBuilder::new(worker_name)
                .backend(storage.with_pubsub())
                .data(ctx)
                .build(apalis_tick);
            tokio::spawn(worker.run_until(signal))
        } else {
            let worker = WorkerBuilder::new(worker_name)
                .backend(CronScheduler::new(schedule).pipe_to(storage))
                .data(ctx)
                .build(apalis_tick);
            tokio::spawn(worker.run_until(signal))
        };
        workers.push(tokio::spawn(async move {
            match run.await {
                Ok(Err(e)) => eprintln!("peers: apalis worker {replica}: {e}"),
                Err(e) => eprintln!("peers: apalis worker {replica}: {e}"),
                Ok(Ok(())) => {}
            }
        }));
    }
    let started = Utc::now();
    let window = measure(args.seconds, started).await;
    let _ = stop_tx.send(());
    for w in workers.into_iter().chain(producers) {
        let _ = tokio::time::timeout(Duration::from_secs(10), w).await;
    }
    if idempotency {
        eprintln!(
            "peers: {system}: {} pushes refused by the idempotency key",
            duplicates_refused.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
    let pending: Result<i64, _> = sqlx::query_scalar(
        "SELECT count(*) FROM apalis.jobs WHERE job_type = $1 AND status = 'Pending'",
    )
    .bind(&queue)
    .fetch_one(&pool)
    .await;
    if let Ok(n) = pending {
        eprintln!("peers: {system}: {n} tasks still pending in the queue at the stop");
    }
    if args.keep {
        // --keep: leave the tasks (and the schema) for inspection.
    } else if existed {
        let _ = sqlx::query("DELETE FROM apalis.jobs WHERE job_type = $1")
            .bind(&queue)
            .execute(&pool)
            .await;
    } else {
        drop_schema(ledger, "apalis").await;
    }
    pool.close().await;
    Ok((
        window,
        "scheduled time (`Tick::get_timestamp()`)".to_owned(),
    ))
}
