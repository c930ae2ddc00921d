//! Jobs on a business calendar as operators see them: `missed` reads the stored calendar, so a
//! moved slot is expected where it moved to and a removed one is not expected at all; a calendar
//! built in code, which this process cannot rebuild, makes `missed` say so instead of guessing.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{AdminStore, JobDefinition};
use slotguard::{
    Adjust, BusinessRule, Calendar, CalendarDefinition, MemoryBackend, Schedule, TokioClock,
    Weekend,
};
use slotguard_admin::{Admin, AdminError};

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn definition(name: &str, cron: &str, rule: BusinessRule) -> JobDefinition {
    let schedule = Schedule::parse(cron, "Asia/Seoul")
        .unwrap()
        .with_calendar(rule.clone());
    JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: "Asia/Seoul".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: schedule.fingerprint(),
        calendar: Some(CalendarDefinition::of(&rule)),
    }
}

/// An admin over jobs registered at `registered` that nothing runs, `days` later.
async fn nothing_ran(registered: &str, days: u64, jobs: &[JobDefinition]) -> Admin {
    let clock = TokioClock::starting_at(at(registered));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    store.register_jobs(jobs).await.unwrap();
    tokio::time::sleep(Duration::from_secs(days * 86_400)).await;
    Admin::new(store).with_clock(clock)
}

fn kr(adjust: Adjust) -> BusinessRule {
    BusinessRule::new(Calendar::builtin("KR").unwrap(), adjust)
}

#[tokio::test(start_paused = true)]
async fn missed_expects_moved_slots_where_they_moved_and_no_removed_ones() {
    let payday = definition("payday", "0 2 25 * *", kr(Adjust::Preceding));
    let daily = definition("daily", "0 2 * * *", kr(Adjust::Skip));
    let admin = nothing_ran("2026-09-20T00:00:00Z", 10, &[payday, daily]).await;
    let (from, to) = (at("2026-09-20T00:00:00Z"), at("2026-09-28T00:00:00Z"));
    let missed = |job: &'static str| {
        let admin = &admin;
        async move {
            let slots = admin.missed(job, from, to).await.unwrap();
            slots.iter().map(|s| s.scheduled_at).collect::<Vec<_>>()
        }
    };
    // Payday moved from Chuseok (Friday the 25th) to Wednesday the 23rd, 02:00 Seoul time.
    assert_eq!(missed("payday").await, [at("2026-09-22T17:00:00Z")]);
    // Monday the 21st to Wednesday the 23rd, then Monday the 28th: Chuseok (24th–26th) and
    // Sunday the 27th are removed.
    assert_eq!(
        missed("daily").await,
        [
            at("2026-09-20T17:00:00Z"),
            at("2026-09-21T17:00:00Z"),
            at("2026-09-22T17:00:00Z"),
            at("2026-09-27T17:00:00Z"),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_calendar_built_in_code_is_named_not_guessed() {
    let acme = Calendar::new("acme", Weekend::SAT_SUN);
    let job = definition("close", "0 6 * * *", BusinessRule::new(acme, Adjust::Skip));
    let admin = nothing_ran("2026-09-20T00:00:00Z", 3, &[job]).await;
    let err = admin
        .missed(
            "close",
            at("2026-09-20T00:00:00Z"),
            at("2026-09-23T00:00:00Z"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, AdminError::Invalid { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("its business calendar `acme` is not a builtin one"),
        "{err}"
    );
}

/// An admin over `payday` (`KR`, `preceding`) registered on 1 November 2026, whose 25th an
/// operator makes a holiday after `before` days; `after` days later.
async fn holiday_added(before: u64, after: u64) -> Admin {
    let payday = definition("payday", "0 2 25 * *", kr(Adjust::Preceding));
    let admin = nothing_ran("2026-11-01T00:00:00Z", before, &[payday]).await;
    let by = slotguard_admin::ChangeRequest::new("kim", "decree");
    let date = chrono::NaiveDate::from_ymd_opt(2026, 11, 25).unwrap();
    admin
        .add_holiday("KR", date, "임시공휴일", &by)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(after * 86_400)).await;
    admin
}

#[tokio::test(start_paused = true)]
async fn missed_and_next_slots_follow_an_operators_holiday() {
    let admin = holiday_added(0, 0).await;
    let jobs = admin.jobs().await.unwrap();
    assert_eq!(
        jobs[0].next_slots[0],
        at("2026-11-23T17:00:00Z"),
        "the next payday is Tuesday the 24th"
    );
    tokio::time::sleep(Duration::from_secs(30 * 86_400)).await;
    let (from, to) = (at("2026-11-01T00:00:00Z"), at("2026-12-01T00:00:00Z"));
    let missed = admin.missed("payday", from, to).await.unwrap();
    let missed: Vec<_> = missed.iter().map(|s| s.scheduled_at).collect();
    assert_eq!(
        missed,
        [at("2026-11-23T17:00:00Z")],
        "the 24th, not the 25th"
    );
}

#[tokio::test(start_paused = true)]
async fn a_holiday_added_after_the_slot_leaves_it_expected_where_it_was() {
    // The holiday is added on the 26th, after payday's slot on the 25th.
    let admin = holiday_added(25, 5).await;
    let (from, to) = (at("2026-11-01T00:00:00Z"), at("2026-12-01T00:00:00Z"));
    let missed = admin.missed("payday", from, to).await.unwrap();
    let missed: Vec<_> = missed.iter().map(|s| s.scheduled_at).collect();
    assert_eq!(missed, [at("2026-11-24T17:00:00Z")]);
}
