//! 10,000 registered jobs: start-up time, memory per job, and CPU while idle.
//!
//! ```text
//! cargo bench -p slotguard-benches --bench startup
//! ```
//!
//! A harness rather than criterion: memory and idle CPU are read from `/proc/self` (Linux), and the
//! start-up figure is the median of several fresh builds.

use std::time::{Duration, Instant};

use slotguard::{GuardLevel, Job, JobContext, MemoryBackend, Scheduler};
use slotguard_benches::{cpu_ticks, rss_bytes};

const JOBS: usize = 10_000;

/// A realistic mix: daily, hourly, every few minutes, weekdays, month-end, each in a different zone.
fn jobs(far_future: bool) -> Vec<Job> {
    let zones = [
        "Asia/Seoul",
        "America/New_York",
        "Europe/Berlin",
        "UTC",
        "Australia/Lord_Howe",
    ];
    (0..JOBS)
        .map(|i| {
            let cron = if far_future {
                // Fires on January 1st only: nothing is due while the idle figure is measured.
                format!("{} {} 1 1 *", i % 60, i / 60 % 24)
            } else {
                match i % 5 {
                    0 => format!("{} 2 * * *", i % 60),
                    1 => format!("{} * * * *", i % 60),
                    2 => "*/15 * * * *".to_owned(),
                    3 => format!("0 {} * * MON-FRI", i % 24),
                    _ => "0 0 L * *".to_owned(),
                }
            };
            Job::new(format!("job_{i}"), cron, |_ctx: JobContext| async {})
                .tz(zones[i % zones.len()])
                .guard(GuardLevel::Local)
        })
        .collect()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");

    // Memory first, in a fresh process, so freed memory of earlier builds cannot hide the growth:
    // RSS growth for 10,000 jobs built and running (idle schedules).
    let before = rss_bytes();
    let defs = jobs(true);
    let handle = runtime.block_on(async {
        let scheduler = Scheduler::builder()
            .backend(MemoryBackend::new())
            .jobs(defs)
            .build()
            .expect("valid jobs");
        scheduler.start()
    });
    std::thread::sleep(Duration::from_millis(200));
    let after = rss_bytes();
    let per_job = after.saturating_sub(before) as f64 / JOBS as f64;

    // Idle CPU: nothing is due until January 1st, so nothing should wake up.
    let idle_for = Duration::from_secs(5);
    let ticks_before = cpu_ticks();
    std::thread::sleep(idle_for);
    let idle_ticks = cpu_ticks() - ticks_before;
    runtime.block_on(handle.shutdown());

    // Start-up: from job definitions to a running timer with every job's next slot computed.
    let mut builds = Vec::new();
    for _ in 0..7 {
        let defs = jobs(false);
        let started = Instant::now();
        let scheduler = Scheduler::builder().jobs(defs).build().expect("valid jobs");
        // The timer's first act: every job's next slot. Done here too, so it is inside the figure.
        let now = chrono::Utc::now();
        let due = scheduler
            .jobs()
            .filter_map(|j| j.schedule.next_after(now))
            .count();
        assert_eq!(due, JOBS);
        let handle = runtime.block_on(async { scheduler.start() });
        builds.push(started.elapsed());
        runtime.block_on(handle.shutdown());
    }
    builds.sort();
    let median = builds[builds.len() / 2];

    println!("slotguard start-up with {JOBS} jobs (5 expression shapes, 5 zones)");
    println!(
        "  build + start, median of {}: {:.1} ms (min {:.1}, max {:.1})",
        builds.len(),
        median.as_secs_f64() * 1e3,
        builds[0].as_secs_f64() * 1e3,
        builds[builds.len() - 1].as_secs_f64() * 1e3
    );
    println!("  memory per job (RSS growth / jobs): {per_job:.0} bytes");
    println!(
        "  CPU while idle for {} s: {} ticks ({} ms)",
        idle_for.as_secs(),
        idle_ticks,
        idle_ticks * 10
    );
}
