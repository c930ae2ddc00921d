//! Jobs on a business calendar, run by the scheduler on a paused clock: a moved payday runs on the
//! business day before and never on its nominal date; a `skip` calendar records each removed day
//! `skipped` with the holiday that removed it.

use std::sync::Arc;
use std::time::Duration;

use slotguard::store::{RunRecord, RunStatus};
use slotguard::{Adjust, Job, JobContext};

#[path = "support/one_job.rs"]
mod one_job;

use one_job::at;

/// Runs `job` on a memory store from `start` for `span` of paused time; the store's runs.
async fn run_for(job: Job, start: &str, span: Duration) -> Vec<RunRecord> {
    let (store, handle) = one_job::start(job, start).await;
    tokio::time::sleep(span).await;
    handle.shutdown().await;
    store.runs()
}

#[tokio::test(start_paused = true)]
async fn payday_moves_to_the_business_day_before_chuseok() {
    let job = Job::new("payday", "0 2 25 * *", |_ctx: JobContext| async {})
        .tz("Asia/Seoul")
        .calendar("KR")
        .adjust(Adjust::Preceding);
    // From Monday the 21st to the 28th, Seoul time: the 25th is Chuseok (24th–26th).
    let runs = run_for(job, "2026-09-20T15:00:00Z", Duration::from_secs(7 * 86_400)).await;
    let slots: Vec<_> = runs
        .iter()
        .map(|r| (r.key.scheduled_at, r.status, r.business_date))
        .collect();
    assert_eq!(
        slots,
        vec![(
            at("2026-09-22T17:00:00Z"),
            RunStatus::Succeeded,
            chrono::NaiveDate::from_ymd_opt(2026, 9, 23).unwrap()
        )],
        "one run, at 02:00 on Wednesday the 23rd"
    );
}

#[tokio::test(start_paused = true)]
async fn a_skip_calendar_records_each_removed_day_with_its_holiday() {
    let job = Job::new("settle", "0 2 * * *", |_ctx: JobContext| async {})
        .tz("Asia/Seoul")
        .calendar("KR");
    // Wednesday the 23rd 00:00 to Monday the 28th 03:00, Seoul time.
    let span = Duration::from_secs(5 * 86_400 + 3 * 3_600);
    let runs = run_for(job, "2026-09-22T15:00:00Z", span).await;
    let seen: Vec<_> = runs
        .iter()
        .map(|r| {
            let day = r.key.scheduled_at.format("%d").to_string();
            (day, r.status, r.error_message.clone().unwrap_or_default())
        })
        .collect();
    let row = |day: &str, status, why: &str| (day.to_owned(), status, why.to_owned());
    assert_eq!(
        seen,
        vec![
            row("22", RunStatus::Succeeded, ""),
            row(
                "23",
                RunStatus::Skipped,
                "calendar: The day preceding Chuseok"
            ),
            row("24", RunStatus::Skipped, "calendar: Chuseok"),
            row(
                "25",
                RunStatus::Skipped,
                "calendar: The second day of Chuseok"
            ),
            row("26", RunStatus::Skipped, "calendar: weekend"),
            row("27", RunStatus::Succeeded, ""),
        ],
        "UTC days of 02:00 Seoul time: the 23rd runs, the 24th–27th are recorded, the 28th runs"
    );
}

/// The log lines written while the guard lives, on this thread (the paused runtime's only one).
#[derive(Clone, Default)]
struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_calendar_that_runs_out_within_a_year_is_warned_about() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let job = |name: &str| {
        Job::new(name, "0 2 * * *", |_ctx: JobContext| async {})
            .tz("Asia/Seoul")
            .calendar("KR")
    };
    // The KR data ends with 2050: in mid-2049 a year ahead is still covered, in mid-2050 not.
    run_for(
        job("early"),
        "2049-06-01T00:00:00Z",
        Duration::from_secs(60),
    )
    .await;
    run_for(job("late"), "2050-06-01T00:00:00Z", Duration::from_secs(60)).await;
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    let warned: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("job_calendar_uncovered"))
        .collect();
    assert_eq!(warned.len(), 1, "{text}");
    assert!(
        warned[0].contains("job=late") && warned[0].contains("year=2051"),
        "{}",
        warned[0]
    );
}
