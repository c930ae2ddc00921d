//! A replica process for the process-level tests: one job, real signals.
//!
//! ```text
//! sg-replica <cron> <work-seconds> <grace-seconds> [kill-after-seconds]
//! ```
//!
//! Prints one line per event on stdout (`started <slot>`, `finished <slot>`, `cancelled <slot>`,
//! `signal`, `shutdown ...`) and shuts down gracefully on SIGTERM or SIGINT.

use std::io::Write;
use std::time::Duration;

use slotguard::{GuardLevel, Job, JobContext, JobError, Scheduler};

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn arg(n: usize) -> Option<String> {
    std::env::args().nth(n)
}

fn seconds(n: usize, default: f64) -> Duration {
    Duration::from_secs_f64(arg(n).and_then(|s| s.parse().ok()).unwrap_or(default))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cron = arg(1).unwrap_or_else(|| "* * * * * *".to_owned());
    let work = seconds(2, 1.0);
    let handle = Scheduler::builder()
        .grace_period(seconds(3, 5.0))
        .kill_after(seconds(4, 1.0))
        .job(
            Job::new("work", cron, move |ctx: JobContext| async move {
                let slot = ctx.scheduled_at().format("%H:%M:%S").to_string();
                say(&format!("started {slot}"));
                tokio::select! {
                    () = tokio::time::sleep(work) => {
                        say(&format!("finished {slot}"));
                        Ok(())
                    }
                    () = ctx.cancelled() => {
                        say(&format!("cancelled {slot}"));
                        Err(JobError::from("stopped by shutdown"))
                    }
                }
            })
            .guard(GuardLevel::Local),
        )
        .build()?
        .start();
    say("ready");

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    say("signal");
    let report = handle.shutdown().await;
    say(&format!(
        "shutdown in_flight={} finished_in_grace={} abandoned={}",
        report.in_flight, report.finished_in_grace, report.abandoned
    ));
    Ok(())
}
