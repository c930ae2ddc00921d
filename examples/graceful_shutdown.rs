//! Two-phase graceful shutdown wired to SIGTERM and Ctrl-C.
//!
//! ```text
//! cargo run --example graceful_shutdown    # then press Ctrl-C, or `kill -TERM <pid>`
//! ```
//!
//! A job that takes 4 seconds runs every 5. On the signal the scheduler stops claiming, waits up to the
//! 6-second grace period for the running job, and only then tells what is left to stop.

use std::time::Duration;

use slotguard::{Job, JobContext, JobError, Scheduler};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        // Colours only on a terminal: redirected logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();

    let handle = Scheduler::builder()
        .grace_period(Duration::from_secs(6))
        .job(Job::new(
            "export",
            "*/5 * * * * *",
            |ctx: JobContext| async move {
                println!(
                    "export {} started (pid {})",
                    ctx.scheduled_at(),
                    std::process::id()
                );
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(4)) => {
                        println!("export {} finished", ctx.scheduled_at());
                        Ok(())
                    }
                    () = ctx.cancelled() => {
                        println!("export {} told to stop; saving progress", ctx.scheduled_at());
                        Err(JobError::from("stopped by shutdown"))
                    }
                }
            },
        ))
        .build()?
        .start();

    wait_for_signal().await;
    let report = handle.shutdown().await;
    println!(
        "shutdown: in_flight={} finished_in_grace={} abandoned={} took={:?}",
        report.in_flight, report.finished_in_grace, report.abandoned, report.took
    );
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
