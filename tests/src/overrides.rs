//! Operators' holiday overrides through real schedulers on a real store, in real time: what the
//! SQLite and PostgreSQL tests run. Two replicas follow an added and then a removed holiday, and
//! every slot is decided by the overrides in force at its instant, whichever replica took it.

use std::time::Duration;

use chrono::{DateTime, Days, Utc};
use slotguard::store::{Backend, CalendarOverride, RunRecord, RunStatus};
use slotguard::{Calendar, Job, Scheduler, Weekend};
use slotguard_admin::{Admin, ChangeRequest};

use crate::history::runs;

/// Adds (or with `remove`, removes) a holiday on today and tomorrow (UTC), so that a test run
/// across midnight still sees it; answers when today's takes effect.
async fn override_days(admin: &Admin, today: DateTime<Utc>, remove: bool) -> DateTime<Utc> {
    let by = ChangeRequest::new("kim", "maintenance window");
    let mut first: Option<CalendarOverride> = None;
    for days in [0, 1] {
        let date = (today + Days::new(days)).date_naive();
        let written = if remove {
            admin.remove_holiday("ops", date, &by).await
        } else {
            admin.add_holiday("ops", date, "maintenance", &by).await
        };
        let written = written.expect("override");
        first.get_or_insert(written);
    }
    first.expect("two").effective_at
}

/// Two replicas run a per-second job on a calendar with no weekend and no holiday (convention
/// `skip`); an operator makes today a holiday, then not. Every slot in force under the holiday is
/// recorded `skipped` with its name, every other one runs, and the change reaches both replicas
/// within about a second.
pub async fn two_replicas_follow_an_added_and_removed_holiday<B>(backend: B)
where
    B: Backend + Clone,
{
    let mut handles = Vec::new();
    for id in ["cal-a", "cal-b"] {
        let calendar = Calendar::new("ops", Weekend::NONE);
        let tick = Job::new("tick", "* * * * * *", |_| async {}).calendar(calendar);
        let scheduler = Scheduler::builder()
            .backend(backend.clone())
            .instance_id(id)
            .job(tick)
            .build()
            .expect("build");
        handles.push(scheduler.try_start().await.expect("start"));
    }
    let admin = Admin::new(backend.clone());
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let now = backend.store_now().await.expect("store clock");
    let added = override_days(&admin, now, false).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let removed = override_days(&admin, now, true).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    for handle in handles {
        handle.shutdown().await;
    }
    let runs = runs(&backend).await;
    let holiday = |r: &RunRecord| r.key.scheduled_at >= added && r.key.scheduled_at < removed;
    let (on, off): (Vec<&RunRecord>, Vec<&RunRecord>) = runs.iter().partition(|r| holiday(r));
    assert!(on.len() >= 2, "slots under the holiday: {runs:#?}");
    for r in &on {
        let why = r.error_message.as_deref();
        assert_eq!(
            (r.status, why),
            (RunStatus::Skipped, Some("calendar: maintenance"))
        );
    }
    assert!(
        off.iter().all(|r| r.status != RunStatus::Skipped),
        "{runs:#?}"
    );
    let after = off.iter().filter(|r| r.key.scheduled_at >= removed).count();
    assert!(after >= 1, "runs again once removed: {runs:#?}");
}
