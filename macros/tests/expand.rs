//! What `#[scheduled]` generates, exercised through the runtime: the function stays callable, the job
//! carries every argument, and `.discover()` finds and runs it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use slotguard::{
    DstPolicy, GuardLevel, JobContext, JobError, MemoryBackend, ScheduledJob, Scheduler,
    TokioClock, jobs, scheduled,
};

static TICKS: AtomicUsize = AtomicUsize::new(0);

/// Every second, so the run test sees it fire.
#[scheduled("* * * * * *", guard = local)]
async fn ticker(ctx: JobContext) {
    assert_eq!(ctx.job_name(), "ticker");
    TICKS.fetch_add(1, Ordering::SeqCst);
}

/// Every argument, on a public function (the generated type is public too, and hidden from docs).
#[scheduled(
    "0 2 * * *",
    tz = "Asia/Seoul",
    name = "daily-settlement",
    guard = slot,
    dst = skip,
    lock_key = 42,
)]
pub async fn daily_settlement(ctx: JobContext) -> Result<(), JobError> {
    let _ = ctx.idempotency_key();
    Ok(())
}

#[scheduled("@hourly", guard = none)]
async fn no_context() -> Result<(), std::io::Error> {
    Ok(())
}

mod nested {
    use slotguard::scheduled;

    #[scheduled("30 4 * * 1-5", dst = instant, guard = local)]
    pub(crate) async fn weekday_report() {}
}

#[tokio::test]
async fn functions_stay_callable() {
    assert!(no_context().await.is_ok());
    nested::weekday_report().await;
}

#[test]
fn jobs_carry_their_arguments() {
    let listed = jobs![daily_settlement, no_context, ticker];
    let names: Vec<&str> = listed.iter().map(|job| job.name()).collect();
    assert_eq!(names, ["daily-settlement", "no_context", "ticker"]);
    assert_eq!(daily_settlement::job().cron(), "0 2 * * *");

    let scheduler = Scheduler::builder()
        .jobs(listed)
        .backend(MemoryBackend::new())
        .build()
        .unwrap();
    let settlement = scheduler
        .jobs()
        .find(|job| job.name == "daily-settlement")
        .unwrap();
    assert_eq!(settlement.guard, GuardLevel::Slot);
    assert_eq!(settlement.lock_key, 42);
    assert_eq!(settlement.schedule.zone(), slotguard::Tz::Asia__Seoul);
    assert_eq!(settlement.schedule.dst(), DstPolicy::Skip);
    let no_context = scheduler
        .jobs()
        .find(|job| job.name == "no_context")
        .unwrap();
    assert_eq!(no_context.guard, GuardLevel::None);
    assert_eq!(no_context.schedule.zone(), slotguard::Tz::UTC);
}

#[test]
fn a_job_listed_and_discovered_is_added_once() {
    let scheduler = Scheduler::builder()
        .jobs(jobs![ticker, nested::weekday_report])
        .discover()
        .backend(MemoryBackend::new())
        .build()
        .unwrap();
    let mut names: Vec<&str> = scheduler.jobs().map(|job| job.name).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["daily-settlement", "no_context", "ticker", "weekday_report"]
    );
}

#[tokio::test(start_paused = true)]
async fn discovered_jobs_run() {
    use chrono::{TimeZone, Utc};

    let start = Utc.with_ymd_and_hms(2026, 3, 8, 6, 59, 0).unwrap();
    let scheduler = Scheduler::builder()
        .discover()
        .backend(MemoryBackend::new())
        .clock(TokioClock::starting_at(start))
        .build()
        .unwrap();
    let mut names: Vec<&str> = scheduler.jobs().map(|job| job.name).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["daily-settlement", "no_context", "ticker", "weekday_report"]
    );

    let before = TICKS.load(Ordering::SeqCst);
    let handle = scheduler.start();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let report = handle.shutdown().await;
    let ticks = TICKS.load(Ordering::SeqCst) - before;
    assert!(
        (3..=4).contains(&ticks),
        "ticker ran {ticks} times in 3.5 s"
    );
    assert_eq!(report.abandoned, 0);
}
