//! Operators' holiday overrides, followed by a running scheduler on a paused clock: an added
//! holiday moves the slots after it takes effect (or removes them, recorded with its name), a
//! removed one gives its day a run, a slot already run stays where it was, and a replica that
//! cannot read the overrides holds its calendar jobs' slots until it can.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use slotguard::store::{
    CalendarOverride, CalendarStore, OverrideChanges, OverrideKind, OverrideSpec, RunStatus, Store,
    StoreError,
};
use slotguard::{Adjust, Job, JobContext, MemoryBackend, Scheduler, TokioClock};

#[path = "support/one_job.rs"]
mod one_job;

use one_job::{at, start};

/// Writes an override of calendar `KR` on `date`.
async fn write(store: &MemoryBackend, date: &str, kind: OverrideKind, name: &str) {
    let spec = OverrideSpec {
        calendar: "KR".to_owned(),
        date: NaiveDate::parse_from_str(date, "%Y-%m-%d").unwrap(),
        kind,
        name: name.to_owned(),
    };
    store
        .write_override(&spec, "kim", "announced late")
        .await
        .unwrap();
}

fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3_600)
}

/// The runs' UTC instants, statuses and messages.
fn seen(store: &MemoryBackend) -> Vec<(DateTime<Utc>, RunStatus, String)> {
    store
        .runs()
        .into_iter()
        .map(|r| {
            (
                r.key.scheduled_at,
                r.status,
                r.error_message.unwrap_or_default(),
            )
        })
        .collect()
}

fn payday() -> Job {
    Job::new("payday", "0 2 25 * *", |_ctx: JobContext| async {})
        .tz("Asia/Seoul")
        .calendar("KR")
        .adjust(Adjust::Preceding)
}

#[tokio::test(start_paused = true)]
async fn a_holiday_added_while_running_moves_payday_to_the_day_before() {
    // 01:00 on Tuesday 2026-11-24, Seoul; the 25th is a Wednesday and no holiday in the shipped
    // data, so without the override nothing runs on the 24th.
    let (store, handle) = start(payday(), "2026-11-23T16:00:00Z").await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    write(&store, "2026-11-25", OverrideKind::Add, "임시공휴일").await;
    tokio::time::sleep(hours(2)).await;
    handle.shutdown().await;
    assert_eq!(
        seen(&store),
        [(
            at("2026-11-23T17:00:00Z"),
            RunStatus::Succeeded,
            String::new()
        )],
        "payday at 02:00 on Tuesday the 24th"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slot_already_run_stays_when_its_day_becomes_a_holiday() {
    // 01:30 on the 25th: the slot runs at 02:00, the holiday is added at 03:30.
    let (store, handle) = start(payday(), "2026-11-24T16:30:00Z").await;
    tokio::time::sleep(hours(2)).await;
    write(&store, "2026-11-25", OverrideKind::Add, "임시공휴일").await;
    tokio::time::sleep(hours(2)).await;
    handle.shutdown().await;
    assert_eq!(
        seen(&store),
        [(
            at("2026-11-24T17:00:00Z"),
            RunStatus::Succeeded,
            String::new()
        )],
        "the run of the 25th stays, and the 24th (already past) gets none"
    );
}

fn settle() -> Job {
    Job::new("settle", "0 2 * * *", |_ctx: JobContext| async {})
        .tz("Asia/Seoul")
        .calendar("KR")
}

#[tokio::test(start_paused = true)]
async fn a_skip_calendar_records_an_added_day_with_the_operators_holiday() {
    // 01:00 on Wednesday 2026-12-23, Seoul.
    let (store, handle) = start(settle(), "2026-12-22T16:00:00Z").await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    write(&store, "2026-12-23", OverrideKind::Add, "임시공휴일").await;
    tokio::time::sleep(hours(2)).await;
    handle.shutdown().await;
    let why = "calendar: 임시공휴일".to_owned();
    assert_eq!(
        seen(&store),
        [(at("2026-12-22T17:00:00Z"), RunStatus::Skipped, why)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_removed_holiday_gets_its_run() {
    // 01:00 on Christmas 2026 (a shipped holiday), Seoul.
    let (store, handle) = start(settle(), "2026-12-24T16:00:00Z").await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    write(&store, "2026-12-25", OverrideKind::Remove, "").await;
    tokio::time::sleep(hours(2)).await;
    handle.shutdown().await;
    assert_eq!(
        seen(&store),
        [(
            at("2026-12-24T17:00:00Z"),
            RunStatus::Succeeded,
            String::new()
        )]
    );
}

/// The memory store's overrides, unreadable while `down` is set; its other calls unaffected.
struct Flaky {
    inner: MemoryBackend,
    down: AtomicBool,
}

#[async_trait::async_trait]
impl CalendarStore for Flaky {
    async fn write_override(
        &self,
        spec: &OverrideSpec,
        by: &str,
        reason: &str,
    ) -> Result<CalendarOverride, StoreError> {
        self.inner.write_override(spec, by, reason).await
    }

    async fn override_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<OverrideChanges, StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::unavailable("overrides down"));
        }
        self.inner.override_changes(after, limit).await
    }
}

#[tokio::test(start_paused = true)]
async fn slots_of_a_calendar_job_wait_while_the_overrides_cannot_be_read() {
    let clock = TokioClock::starting_at(at("2026-12-21T16:00:00Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let flaky = Arc::new(Flaky {
        inner: store.clone(),
        down: AtomicBool::new(false),
    });
    let plain = Job::new("plain", "0 2 * * *", |_ctx: JobContext| async {}).tz("Asia/Seoul");
    let handle = Scheduler::builder()
        .store(Store::full(Arc::new(store.clone())).with_calendars(flaky.clone()))
        .clock(clock)
        .jobs(vec![settle(), plain])
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    flaky.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(hours(2)).await;
    let jobs = |store: &MemoryBackend| {
        let mut jobs: Vec<_> = store.runs().into_iter().map(|r| r.key.job).collect();
        jobs.sort();
        jobs
    };
    assert_eq!(jobs(&store), ["plain"], "the calendar job's 02:00 waits");
    flaky.down.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    handle.shutdown().await;
    assert_eq!(
        jobs(&store),
        ["plain", "settle"],
        "and runs once they are read"
    );
}

fn following_payday() -> Job {
    Job::new("payday", "0 2 25 * *", |_ctx: JobContext| async {})
        .tz("Asia/Seoul")
        .calendar("KR")
        .adjust(Adjust::Following)
}

/// The nominal dates, calendar and version each run recorded.
fn stamps(store: &MemoryBackend) -> Vec<(Vec<NaiveDate>, String, String)> {
    store
        .runs()
        .into_iter()
        .map(|r| {
            let s = r
                .calendar
                .expect("a calendar job's run records its calendar");
            (s.nominal_dates, s.calendar, s.version)
        })
        .collect()
}

fn date(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

#[tokio::test(start_paused = true)]
async fn payday_made_a_holiday_after_it_ran_is_not_paid_again_the_day_after() {
    // 01:30 on Wednesday the 25th: payday runs at 02:00; at 03:30 the 25th becomes a holiday, which
    // under `following` moves the 25th to Thursday the 26th.
    let (store, handle) = start(following_payday(), "2026-11-24T16:30:00Z").await;
    tokio::time::sleep(hours(2)).await;
    write(&store, "2026-11-25", OverrideKind::Add, "임시공휴일").await;
    tokio::time::sleep(hours(24)).await;
    handle.shutdown().await;
    let why =
        "calendar: its nominal date 2026-11-25 already ran in the slot of 2026-11-24T17:00:00Z";
    assert_eq!(
        seen(&store),
        [
            (
                at("2026-11-24T17:00:00Z"),
                RunStatus::Succeeded,
                String::new()
            ),
            (at("2026-11-25T17:00:00Z"), RunStatus::Skipped, why.into()),
        ],
        "the 26th stands for the 25th, which was paid"
    );
    let stamps = stamps(&store);
    assert_eq!(stamps[0].0, [date("2026-11-25")]);
    assert_eq!(stamps[0].1, "KR");
    assert!(stamps[0].2.starts_with("holidays "), "{:?}", stamps[0]);
    assert!(!stamps[0].2.contains("override"), "{:?}", stamps[0]);
    assert_eq!(stamps[1].0, [date("2026-11-25")], "the 26th's nominal date");
    assert!(stamps[1].2.ends_with("+ override #1"), "{:?}", stamps[1]);
}

#[tokio::test(start_paused = true)]
async fn a_holiday_removed_after_payday_moved_before_it_is_not_paid_again() {
    // An operator's holiday on the 25th moves payday (`preceding`) to Tuesday the 24th, where it
    // runs; at 03:00 on the 24th the holiday is withdrawn, which puts the 25th back on the 25th.
    let (store, handle) = start(payday(), "2026-11-23T16:00:00Z").await;
    write(&store, "2026-11-25", OverrideKind::Add, "임시공휴일").await;
    tokio::time::sleep(hours(2)).await;
    write(&store, "2026-11-25", OverrideKind::Remove, "").await;
    tokio::time::sleep(hours(24)).await;
    handle.shutdown().await;
    let statuses: Vec<_> = seen(&store).into_iter().map(|(at, s, _)| (at, s)).collect();
    assert_eq!(
        statuses,
        [
            (at("2026-11-23T17:00:00Z"), RunStatus::Succeeded),
            (at("2026-11-24T17:00:00Z"), RunStatus::Skipped),
        ],
        "paid on the 24th, and not again on the 25th"
    );
    assert_eq!(stamps(&store)[0].0, [date("2026-11-25")]);
}

#[tokio::test(start_paused = true)]
async fn a_slot_on_its_own_date_records_it_as_nominal() {
    let (store, handle) = start(payday(), "2026-11-24T16:30:00Z").await;
    tokio::time::sleep(hours(1)).await;
    handle.shutdown().await;
    assert_eq!(stamps(&store).len(), 1);
    assert_eq!(stamps(&store)[0].0, [date("2026-11-25")]);
}

#[tokio::test(start_paused = true)]
async fn a_stored_schedule_follows_the_operators_holiday_too() {
    use slotguard::store::{ScheduleSpec, ScheduleStore};
    // The job's code schedule is yearly; a tenant's payday is a schedule stored at run time on the
    // job's calendar (`KR`, `preceding`).
    let job = Job::new("payroll", "0 0 1 1 *", |_ctx: JobContext| async {})
        .tz("Asia/Seoul")
        .calendar("KR")
        .adjust(Adjust::Preceding)
        .guard(slotguard::GuardLevel::Slot);
    let (store, handle) = start(job, "2026-11-23T16:00:00Z").await;
    let spec = ScheduleSpec::new("payroll", "0 2 25 * *", "Asia/Seoul", "acme");
    (store.write_schedule("acme-payday", 0, Some(&spec), "kim", "tenant payday"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    write(&store, "2026-11-25", OverrideKind::Add, "임시공휴일").await;
    tokio::time::sleep(hours(2)).await;
    handle.shutdown().await;
    let runs: Vec<_> = store
        .runs()
        .into_iter()
        .map(|r| (r.key.scheduled_at, r.key.partition, r.status, r.calendar))
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let (at_, partition, status, stamp) = runs.into_iter().next().unwrap();
    assert_eq!(
        (at_, partition.as_str(), status),
        (at("2026-11-23T17:00:00Z"), "acme", RunStatus::Succeeded),
        "the tenant is paid on Tuesday the 24th"
    );
    let stamp = stamp.unwrap();
    assert_eq!(stamp.nominal_dates, [date("2026-11-25")]);
    assert!(stamp.version.ends_with("+ override #1"), "{stamp:?}");
}

#[tokio::test(start_paused = true)]
async fn a_korean_holiday_reaches_a_company_calendar_built_on_korea() {
    use slotguard::{Calendar, Weekend};
    // The company's calendar: Korea's, plus its own shutdown days; the override names `KR`.
    let acme = Calendar::new("acme", Weekend::NONE)
        .with_holiday(date("2026-12-28"), "shutdown week")
        .extend(&Calendar::builtin("KR").unwrap());
    let job = Job::new("payday", "0 2 25 * *", |_ctx: JobContext| async {})
        .tz("Asia/Seoul")
        .calendar(acme)
        .adjust(Adjust::Preceding);
    let (store, handle) = start(job, "2026-11-23T16:00:00Z").await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    write(&store, "2026-11-25", OverrideKind::Add, "임시공휴일").await;
    tokio::time::sleep(hours(2)).await;
    handle.shutdown().await;
    let statuses: Vec<_> = seen(&store).into_iter().map(|(at, s, _)| (at, s)).collect();
    assert_eq!(
        statuses,
        [(at("2026-11-23T17:00:00Z"), RunStatus::Succeeded)],
        "payday moves to Tuesday the 24th on the company calendar too"
    );
    assert_eq!(stamps(&store)[0].1, "acme");
}
