//! The quick start: a few jobs on seconds-level schedules, then a clean shutdown.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! Runs for about 15 seconds, or until Ctrl-C / SIGTERM, on the in-process memory backend: no setup.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use slotguard::{GuardLevel, Job, JobContext, JobError, MemoryBackend, Scheduler};

/// Application state the jobs look up by type.
struct App {
    started: Instant,
    flaky_calls: AtomicU32,
}

impl App {
    fn say(&self, ctx: &JobContext, what: &str) {
        println!(
            "{:>5.1}s  {:<12} slot {}  {}",
            self.started.elapsed().as_secs_f64(),
            ctx.job_name(),
            ctx.scheduled_at().format("%H:%M:%S"),
            what
        );
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Warnings and errors from the scheduler (a failed run, a skipped tick) show up in the output.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "slotguard=warn".into()),
        )
        .with_target(false)
        .compact()
        .init();

    let backend = MemoryBackend::new();
    let app = Arc::new(App {
        started: Instant::now(),
        flaky_calls: AtomicU32::new(0),
    });

    let scheduler = Scheduler::builder()
        .backend(backend.clone())
        .state(Arc::clone(&app))
        .default_tz("Asia/Seoul")
        .grace_period(Duration::from_secs(5))
        // Every 3 seconds, once per slot, with a fencing token and an idempotency key.
        .job(Job::new(
            "settlement",
            "*/3 * * * * *",
            |ctx: JobContext| async move {
                let app = ctx.state::<Arc<App>>()?;
                app.say(
                    &ctx,
                    &format!(
                        "settles business date {} as {} (token {})",
                        ctx.business_date(),
                        ctx.idempotency_key(),
                        ctx.fencing_token().unwrap_or_default()
                    ),
                );
                Ok::<(), JobError>(())
            },
        ))
        // Every 2 seconds but takes 3: the running flag skips the overlapping ticks.
        .job(
            Job::new(
                "slow_report",
                "*/2 * * * * *",
                |ctx: JobContext| async move {
                    let app = ctx.state::<Arc<App>>()?;
                    app.say(
                        &ctx,
                        "report started (takes 3 s; overlapping ticks are skipped)",
                    );
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    app.say(&ctx, "report done");
                    Ok::<(), JobError>(())
                },
            )
            .guard(GuardLevel::Local),
        )
        // Every 5 seconds; fails every other time. Failures are recorded, never fatal.
        .job(Job::new(
            "flaky_sync",
            "*/5 * * * * *",
            |ctx: JobContext| async move {
                let app = ctx.state::<Arc<App>>()?;
                let n = app.flaky_calls.fetch_add(1, Ordering::Relaxed);
                if n % 2 == 1 {
                    app.say(&ctx, "fails this time");
                    return Err(JobError::from("upstream returned 503"));
                }
                app.say(&ctx, "synced");
                Ok(())
            },
        ))
        .build()?;

    println!("slotguard quick start: 3 jobs, zone Asia/Seoul, ~15 s (Ctrl-C to stop early)\n");
    for job in scheduler.jobs() {
        println!(
            "  {:<12} {:<16} guard {:<5}",
            job.name,
            job.schedule.expr().source(),
            job.guard
        );
    }
    println!();

    let handle = scheduler.start();
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(15)) => {}
        () = shutdown_signal() => println!("\nsignal received"),
    }

    println!("\nshutting down: no new claims, waiting for running jobs ...");
    let report = handle.shutdown().await;
    println!(
        "stopped in {:.1}s: {} job(s) were running, finished in grace: {}, abandoned: {}",
        report.took.as_secs_f64(),
        report.in_flight,
        report.finished_in_grace,
        report.abandoned
    );

    let runs = backend.runs();
    println!("\nrecorded runs (slot level):");
    for run in &runs {
        println!(
            "  {:<12} {}  {:<9} attempts {}",
            run.key.job,
            run.key.scheduled_at.format("%H:%M:%S"),
            run.status,
            run.attempts.len()
        );
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
