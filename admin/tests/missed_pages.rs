//! Missed slots a page at a time, across every job, in paused tokio time on the memory backend: the
//! pages together answer what one listing does, and their refusals.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{AdminStore, JobDefinition};
use slotguard::{MemoryBackend, TokioClock};
use slotguard_admin::{Admin, AdminError, BackfillOptions, ChangeRequest, MissedQuery};

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

async fn sleep(secs: f64) {
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
}

fn by() -> ChangeRequest {
    ChangeRequest::new("ops@example.com", "test")
}

/// Every job's missed slots, page after page of `limit`, following `next`.
async fn every_page(
    admin: &Admin,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: usize,
) -> Vec<(String, DateTime<Utc>)> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let query = MissedQuery {
            job: None,
            from,
            to,
            after,
            limit,
        };
        let page = admin.missed_page(query).await.unwrap();
        assert!(page.slots().count() <= limit);
        for part in &page.jobs {
            for slot in part.missed.as_ref().unwrap() {
                out.push((part.job.clone(), slot.scheduled_at));
            }
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return out,
        }
    }
}

/// Three jobs registered at 2026-03-01T00:00Z that no replica runs, and six hours later two of them
/// backfilled for the first three hours: the admin API over them, and the range 00:00..06:00.
async fn three_jobs_half_backfilled() -> (Admin, DateTime<Utc>, DateTime<Utc>) {
    let clock = TokioClock::starting_at(at("2026-03-01T00:00:00Z"));
    let store = MemoryBackend::with_clock(Arc::new(clock));
    let definitions: Vec<JobDefinition> = [
        ("hourly", "0 0 * * * *"),
        ("quarterly", "0 */15 * * * *"),
        ("new-year", "0 0 0 1 1 *"),
    ]
    .into_iter()
    .map(|(name, cron)| JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: "UTC".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: slotguard::Schedule::parse(cron, "UTC")
            .unwrap()
            .fingerprint(),
        calendar: None,
    })
    .collect();
    store.register_jobs(&definitions).await.unwrap();
    // No replica runs them: six hours later, every slot since the registration is missed.
    sleep(6.0 * 3600.0 + 0.5).await;
    let admin = Admin::new(store.clone()).with_clock(clock);
    let (from, to) = (at("2026-03-01T00:00:00Z"), at("2026-03-01T06:00:00Z"));
    let options = BackfillOptions {
        dry_run: false,
        per_second: 1_000.0,
        before_first_seen: false,
    };
    let half = at("2026-03-01T03:00:00Z");
    for job in ["hourly", "quarterly"] {
        admin
            .backfill(job, from, half, options, &by())
            .await
            .unwrap();
    }
    (admin, from, to)
}

#[tokio::test(start_paused = true)]
async fn missed_pages_answer_every_job_as_missed_does() {
    let (admin, from, to) = three_jobs_half_backfilled().await;
    let query = MissedQuery {
        job: None,
        from,
        to,
        after: None,
        limit: 1_000,
    };
    let all = admin.missed_page(query).await.unwrap();
    assert_eq!(all.next, None);
    let names: Vec<&str> = all.jobs.iter().map(|j| j.job.as_str()).collect();
    assert_eq!(names, ["hourly", "new-year", "quarterly"]);
    for part in &all.jobs {
        let one = admin.missed(&part.job, from, to).await;
        assert_eq!(part.missed, one, "{}", part.job);
    }
    let count = |name: &str| {
        let part = all.jobs.iter().find(|j| j.job == name).unwrap();
        part.missed.as_ref().unwrap().len()
    };
    assert_eq!(
        (count("hourly"), count("quarterly"), count("new-year")),
        (3, 12, 0)
    );
    // Pages of 1, 2 and 5 slots, followed to the end, hold the same slots in the same order.
    let whole = every_page(&admin, from, to, 1_000).await;
    assert_eq!(whole.len(), 15);
    for limit in [1, 2, 5] {
        assert_eq!(
            every_page(&admin, from, to, limit).await,
            whole,
            "limit {limit}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn missed_pages_refuse_an_empty_range_a_page_out_of_bounds_and_another_jobs_cursor() {
    let (admin, from, to) = three_jobs_half_backfilled().await;
    let backwards = MissedQuery {
        job: None,
        from: to,
        to: from,
        after: None,
        limit: 10,
    };
    assert!(matches!(
        admin.missed_page(backwards).await,
        Err(AdminError::Invalid { field: "range", .. })
    ));
    for limit in [0, 1_001] {
        let query = MissedQuery {
            job: None,
            from,
            to,
            after: None,
            limit,
        };
        assert!(matches!(
            admin.missed_page(query).await,
            Err(AdminError::Invalid { field: "limit", .. })
        ));
    }
    let elsewhere = MissedQuery {
        job: Some("hourly".to_owned()),
        from,
        to,
        after: Some(slotguard_admin::MissedCursor {
            job: "quarterly".to_owned(),
            from,
        }),
        limit: 10,
    };
    assert!(matches!(
        admin.missed_page(elsewhere).await,
        Err(AdminError::Invalid {
            field: "cursor",
            ..
        })
    ));
}
