//! The dashboard's second round (issue 23, point 4): counts at a glance per job and in all, the
//! jobs page's search and filters, "wait for resume" on a paused job's queue, and a job's durations
//! over time with their p95.
#![cfg(feature = "dashboard")]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use axum::Router;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use slotguard::store::{
    AdminStore, Claim, ClaimRequest, Finish, JobDefinition, SlotKey, SlotStore, SlotStoreExt as _,
    Trigger,
};
use slotguard::{ErrorClass, MemoryBackend, Overlap, Schedule};
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::http::Actor;
use slotguard_admin::{Admin, ChangeRequest, MissedCount};

#[path = "support/page.rs"]
mod page;
use page::get;

/// The system clock moved by a number of milliseconds the test sets.
#[derive(Debug, Default)]
struct Shifted(AtomicI64);

impl Shifted {
    fn set(&self, millis: i64) {
        self.0.store(millis, Ordering::Relaxed);
    }
}

impl slotguard::Clock for Shifted {
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + TimeDelta::milliseconds(self.0.load(Ordering::Relaxed))
    }
}

fn definition(name: &str, cron: &str, zone: &str, guard: &str) -> JobDefinition {
    JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: zone.to_owned(),
        dst: "vixie".to_owned(),
        guard: guard.to_owned(),
        fingerprint: Schedule::parse(cron, zone).unwrap().fingerprint(),
        calendar: None,
    }
}

fn request(job: &str, slot: DateTime<Utc>) -> ClaimRequest {
    ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: slot,
            partition: String::new(),
        },
        trigger: Trigger::Schedule,
        zone: "UTC".to_owned(),
        wall: slot.naive_utc(),
        business_date: slot.date_naive(),
        fingerprint: 7,
        stale_after: Duration::from_secs(30),
        overlap: Overlap::Allow,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    }
}

/// Claims `slot` of `job` and fails it after `millis` of the store's clock.
async fn failed_after(
    backend: &MemoryBackend,
    clock: &Shifted,
    job: &str,
    slot: DateTime<Utc>,
    millis: i64,
) {
    clock.set(0);
    let lease = match backend
        .claim("w", &[request(job, slot)])
        .await
        .unwrap()
        .pop()
    {
        Some(Claim::Won(lease)) => lease,
        other => panic!("not won: {other:?}"),
    };
    clock.set(millis);
    let failed = Finish::failed(ErrorClass::Transient, "bank timed out", None);
    assert!(backend.finish_one("w", &lease, &failed).await.unwrap());
    clock.set(0);
}

/// Three jobs registered a day and a half ago: `alpha-report` hourly in UTC (guard `slot`) with two
/// failed runs in the last day (1.5 s and 0.5 s) and one three days back; `beta-sync` daily in
/// Seoul (guard `lock`), paused with two manual runs queued; `gamma` daily in Berlin (guard `local`).
async fn setup() -> (Admin, Router) {
    let clock = Arc::new(Shifted::default());
    let backend = MemoryBackend::with_clock(clock.clone());
    clock.set(-36 * 3_600_000);
    let jobs = [
        definition("alpha-report", "0 * * * *", "UTC", "slot"),
        definition("beta-sync", "0 2 * * *", "Asia/Seoul", "lock"),
        definition("gamma", "30 4 * * *", "Europe/Berlin", "local"),
    ];
    backend.register_jobs(&jobs).await.unwrap();
    let hour = Utc::now().duration_trunc(TimeDelta::hours(1)).unwrap();
    failed_after(
        &backend,
        &clock,
        "alpha-report",
        hour - TimeDelta::hours(3),
        1_500,
    )
    .await;
    failed_after(
        &backend,
        &clock,
        "alpha-report",
        hour - TimeDelta::hours(2),
        500,
    )
    .await;
    failed_after(
        &backend,
        &clock,
        "alpha-report",
        hour - TimeDelta::days(3),
        900,
    )
    .await;
    let admin = Admin::new(backend.clone());
    let by = ChangeRequest::new("alice", "bank maintenance");
    admin.pause("beta-sync", &by).await.unwrap();
    for _ in 0..2 {
        admin.trigger("beta-sync", &by).await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let app = Router::new()
        .nest("/ui", Dashboard::new(admin.clone()).router())
        .layer(axum::Extension(Actor("alice".to_owned())));
    (admin, app)
}

/// The text of the right-aligned count cells of `job`'s row: running, queued, failed, missed.
fn counts_of(page: &str, job: &str) -> Vec<String> {
    let row = page
        .split("<tr>")
        .find(|r| r.contains(&format!(r#"class="job" href="/ui/jobs/{job}""#)))
        .unwrap_or_else(|| panic!("no row of {job}: {page}"));
    row.split(r#"<td class="n"#)
        .skip(1)
        .map(|cell| {
            let cell = &cell[cell.find('>').unwrap() + 1..cell.find("</td>").unwrap()];
            text(cell)
        })
        .collect()
}

/// `html` without its tags.
fn text(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

#[tokio::test]
async fn the_jobs_page_counts_running_queued_failed_and_missed_per_job_and_in_all() {
    let (admin, app) = setup().await;
    let page = get(&app, "/ui").await;
    // Hourly: 24 slots in the last day, two of them failed (rows), 22 with no row.
    assert_eq!(counts_of(&page, "alpha-report"), ["0", "0", "2", "22"]);
    // Daily: one slot in any day, none ran; the two manual runs wait for the resume.
    assert_eq!(
        counts_of(&page, "beta-sync"),
        ["0", "2wait for resume", "0", "1"]
    );
    assert_eq!(counts_of(&page, "gamma"), ["0", "0", "0", "1"]);
    let glance = page.split(r#"<ul class="glance""#).nth(1).unwrap();
    let glance = text(&glance[..glance.find("</ul>").unwrap()]);
    for total in [
        "3 jobs",
        "1 paused",
        "0 running",
        "2 queued",
        "2 failed",
        "24 missed",
    ] {
        assert!(glance.contains(total), "{total}: {glance}");
    }
    // The same numbers from the admin API.
    let now = Utc::now();
    let counts = admin
        .missed_counts(now - TimeDelta::hours(24), now, 1_000)
        .await
        .unwrap();
    assert_eq!(counts.of("alpha-report"), MissedCount::Counted(22));
    assert_eq!(counts.total(), (24, true));
}

#[tokio::test]
async fn missed_counts_past_their_budget_say_at_least() {
    let (admin, app) = setup().await;
    let now = Utc::now();
    // 10 slots looked at: part of alpha's 24, none of the others'.
    let counts = admin
        .missed_counts(now - TimeDelta::hours(24), now, 10)
        .await
        .unwrap();
    assert!(
        matches!(counts.of("alpha-report"), MissedCount::AtLeast(n) if n <= 10),
        "{counts:?}"
    );
    assert_eq!(counts.of("gamma"), MissedCount::AtLeast(0));
    assert!(!counts.total().1);
    // The page's budget holds every slot here.
    let page = get(&app, "/ui").await;
    assert!(!page.contains("≥"), "{page}");
}

#[tokio::test]
async fn the_jobs_page_searches_and_filters() {
    let (_admin, app) = setup().await;
    let rows = |page: &str| -> Vec<&str> {
        ["alpha-report", "beta-sync", "gamma"]
            .into_iter()
            .filter(|job| page.contains(&format!(r#"class="job" href="/ui/jobs/{job}""#)))
            .collect()
    };
    for (query, expected) in [
        ("", vec!["alpha-report", "beta-sync", "gamma"]),
        ("?q=ALPHA", vec!["alpha-report"]),
        ("?q=a", vec!["alpha-report", "beta-sync", "gamma"]),
        ("?state=paused", vec!["beta-sync"]),
        ("?state=active", vec!["alpha-report", "gamma"]),
        ("?zone=Europe%2FBerlin", vec!["gamma"]),
        ("?guard=lock", vec!["beta-sync"]),
        (
            "?q=a&guard=slot&zone=UTC&state=active",
            vec!["alpha-report"],
        ),
        ("?q=nothing-like-it", vec![]),
        ("?state=bogus", vec![]),
    ] {
        let page = get(&app, &format!("/ui{query}")).await;
        assert_eq!(rows(&page), expected, "{query}");
        if !query.is_empty() {
            let said = format!("{} of 3 jobs match", expected.len());
            assert!(page.contains(&said), "{query}: {page}");
        }
        if expected.is_empty() {
            assert!(page.contains("No job matches the filters."), "{query}");
        }
    }
    // The filters keep what was asked for.
    let page = get(&app, "/ui?zone=Asia%2FSeoul&q=sync").await;
    assert!(
        page.contains(r#"<option value="Asia/Seoul" selected>"#),
        "{page}"
    );
    assert!(page.contains(r#"name="q" value="sync""#), "{page}");
}

#[tokio::test]
async fn a_job_page_charts_durations_with_their_p95() {
    let (_admin, app) = setup().await;
    let page = get(&app, "/ui/jobs/alpha-report").await;
    let chart = page
        .split(r#"<svg class="durations""#)
        .nth(1)
        .unwrap_or_else(|| panic!("{page}"));
    let chart = &chart[..chart.find("</svg>").unwrap()];
    // Three finished runs, oldest first, each linking to its run.
    assert_eq!(chart.matches("<circle").count(), 3, "{chart}");
    let links: Vec<&str> = chart
        .split(r#"<a href=""#)
        .skip(1)
        .map(|a| &a[..a.find('"').unwrap()])
        .collect();
    assert_eq!(links.len(), 3);
    assert!(
        links
            .iter()
            .all(|l| l.starts_with("/ui/jobs/alpha-report/runs/")),
        "{links:?}"
    );
    assert!(
        links[0] < links[1] && links[1] < links[2],
        "oldest first: {links:?}"
    );
    // Nearest-rank p95 of 0.9, 1.5 and 0.5 s is the slowest; the top of the axis says the same.
    assert!(chart.contains("p95 1.5 s"), "{chart}");
    assert!(chart.contains(r#"class="pt s-failed""#), "{chart}");
    // The facts count the last day: two failed, 22 missed.
    assert!(
        text(&page).contains("0 running · 0 queued · last 24 h: 2 failed · 22 missed"),
        "{page}"
    );
    // A job with no finished run says so instead.
    let page = get(&app, "/ui/jobs/gamma").await;
    assert!(page.contains("No finished run to chart yet."), "{page}");
}
