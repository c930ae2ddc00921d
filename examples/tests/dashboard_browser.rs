//! The dashboard in a real browser: headless Chromium, driven over WebDriver by chromedriver, against a
//! real server (axum on loopback, a running scheduler) on a real SQLite file and a real PostgreSQL
//! schema. An operator opens the jobs page, opens a job, retries a failed slot and sees the new
//! attempt appear, pauses and resumes with a reason, previews and runs a backfill, adds a stored
//! schedule and pauses and resumes it on its page, skips a slot and undoes the skip, adds a holiday
//! to a business calendar on the holidays page, and sees a hostile job name rendered as text.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them). With
//! `SLOTGUARD_SCREENSHOTS=docs/screenshots` the SQLite walk saves screenshots of the main pages there.

#![cfg(unix)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use chrono::{Datelike, TimeZone, Utc};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use slotguard::store::Backend;
use slotguard::{Job, JobContext, JobError, RetryPolicy, Scheduler, SchedulerHandle};
use slotguard_admin::dashboard::Dashboard;
use slotguard_admin::http::{self, Actor};

const FLAKY: &str = "flaky-export";
const SETTLEMENT: &str = "daily-settlement";
const HOSTILE: &str = "<script>alert('x')</script>";
const SCHEDULE: &str = "acme-report";

/// One browser at a time: two cores do not run two Chromiums and two schedulers well.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// chromedriver on a free loopback port, killed when dropped.
struct Driver {
    child: Child,
    port: u16,
    profile: tempfile::TempDir,
}

impl Driver {
    fn start() -> Driver {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (Debian: apt-get install chromium chromium-driver)");
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().expect("a profile directory");
        Driver {
            child,
            port,
            profile,
        }
    }

    async fn browser(&self) -> Client {
        let mut args = vec![
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,860",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        args.push(format!("--user-data-dir={}", self.profile.path().display()));
        let mut options = json!({ "args": args });
        if std::path::Path::new("/usr/bin/chromium").exists() {
            options["binary"] = json!("/usr/bin/chromium");
        }
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert("goog:chromeOptions".into(), options);
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a browser session")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A browser left behind by chromedriver (a test that failed before closing it): every
        // process started with this test's own profile directory, and no other.
        let profile = self.profile.path().display().to_string();
        for pid in processes_mentioning(&profile) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// The processes whose command line contains `text`.
fn processes_mentioning(text: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains(text))
        })
        .collect()
}

/// A job that fails its first attempt and succeeds when retried.
async fn flaky(ctx: JobContext) -> Result<(), JobError> {
    if ctx.attempt() == 1 {
        Err(JobError::from("<b>upstream</b> said 503"))
    } else {
        Ok(())
    }
}

/// The scheduler and the dashboard (at `/internal/dashboard`, operator `alice`) on `backend`.
async fn serve(backend: impl Backend) -> (SocketAddr, SchedulerHandle) {
    let scheduler = Scheduler::builder()
        .backend(backend)
        .recovery_interval(Duration::from_millis(500))
        .jobs([
            Job::new(FLAKY, "*/2 * * * * *", flaky).retry(RetryPolicy::never()),
            Job::new(SETTLEMENT, "0 2 * * *", |_: JobContext| async {}).tz("Asia/Seoul"),
            Job::new(HOSTILE, "0 3 * * *", |_: JobContext| async {}),
        ])
        .build()
        .expect("a scheduler");
    let admin = slotguard_admin::Admin::of(&scheduler).expect("a store");
    let handle = scheduler.try_start().await.expect("started");
    let internal = http::router(admin.clone()).nest("/dashboard", Dashboard::new(admin).router());
    // The application's authentication, reduced to its outcome: the operator is alice.
    let app = Router::new()
        .nest("/internal", internal)
        .layer(axum::Extension(Actor("alice".into())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, handle)
}

/// Polls `check` every 200 ms for at most `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn script(c: &Client, js: &str) -> Value {
    c.execute(js, vec![]).await.expect(js)
}

/// How many elements match `css`; 0 while the page is being replaced.
async fn count(c: &Client, css: &str) -> u64 {
    let js = format!("return document.querySelectorAll({}).length", json!(css));
    let answer = c.execute(&js, vec![]).await.ok();
    answer.and_then(|v| v.as_u64()).unwrap_or(0)
}

/// Waits until an element matches `css`, across navigations.
async fn shows(c: &Client, css: &str, within: Duration) {
    eventually(within, css, || async { count(c, css).await > 0 }).await;
}

async fn text(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .expect("text")
}

/// Fills the reason of form `#form-{action}`, submits it, and confirms on the page that follows.
async fn change(c: &Client, action: &str, reason: &str) {
    let form = format!("#form-{action}");
    c.find(Locator::Css(&format!("{form} input[name=reason]")))
        .await
        .unwrap_or_else(|e| panic!("{form}: {e}"))
        .send_keys(reason)
        .await
        .unwrap();
    c.find(Locator::Css(&format!("{form} button")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    confirm(c, action).await;
}

async fn confirm(c: &Client, action: &str) {
    shows(c, "#confirm", Duration::from_secs(10)).await;
    assert_eq!(text(c, "h1").await, format!("Confirm: {action}"));
    let button = c.find(Locator::Css("#confirm button")).await.unwrap();
    button.click().await.unwrap();
    let done = format!("done={action}");
    eventually(
        Duration::from_secs(10),
        "the page after the change",
        || async {
            let url = c.current_url().await.expect("url");
            url.as_str().contains(&done)
        },
    )
    .await;
    shows(c, ".notice", Duration::from_secs(10)).await;
}

struct Shots(Option<PathBuf>);

impl Shots {
    async fn take(&self, c: &Client, name: &str) {
        if let Some(dir) = &self.0 {
            std::fs::create_dir_all(dir).expect("screenshot directory");
            let png = c.screenshot().await.expect("a screenshot");
            std::fs::write(dir.join(format!("{name}.png")), png).expect("screenshot written");
        }
    }
}

/// The operator's walk through the dashboard at `addr`.
async fn walk(c: &Client, addr: SocketAddr, shots: &Shots) {
    let home = format!("http://{addr}/internal/dashboard");
    c.goto(&home).await.unwrap();
    assert_eq!(c.title().await.unwrap(), "Jobs · slotguard");
    // The hostile name is a link whose text is the name, not a script that ran.
    let hostile = c
        .find(Locator::LinkText(HOSTILE))
        .await
        .expect("hostile link");
    assert_eq!(hostile.text().await.unwrap(), HOSTILE);
    assert_eq!(
        count(c, "script").await,
        1,
        "only the dashboard's own script"
    );
    assert!(c.get_alert_text().await.is_err(), "no alert ran");

    // A job: the timeline fills in by itself (live refresh) until a failed slot shows, while a
    // half-typed reason and the scroll position stay as they were.
    c.find(Locator::LinkText(FLAKY))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    shows(c, "#form-pause", Duration::from_secs(10)).await;
    let reason = c
        .find(Locator::Css("#form-pause input[name=reason]"))
        .await
        .unwrap();
    reason.send_keys("half typed").await.unwrap();
    let js = "window.scrollTo(0, 150); delete document.documentElement.dataset.refreshed; \
              return window.scrollY";
    let scrolled = script(c, js).await;
    assert!(scrolled.as_u64().unwrap_or(0) > 0, "the page scrolls");
    shows(c, "html[data-refreshed]", Duration::from_secs(12)).await;
    assert_eq!(
        reason.prop("value").await.unwrap().as_deref(),
        Some("half typed")
    );
    assert_eq!(script(c, "return window.scrollY").await, scrolled);
    shows(c, ".timeline a.k-failed", Duration::from_secs(20)).await;

    // Retry it and see the second attempt appear on the run's page.
    let failed = c.find(Locator::Css(".timeline a.k-failed")).await.unwrap();
    failed.click().await.unwrap();
    assert_eq!(count(c, "table.attempts tbody tr").await, 1);
    change(c, "retry", "upstream is back").await;
    eventually(Duration::from_secs(20), "the retried attempt", || async {
        count(c, "table.attempts tbody tr").await == 2
            && text(c, "#attempts").await.contains("succeeded")
    })
    .await;
    assert!(text(c, "table.audit").await.contains("upstream is back"));
    shots.take(c, "run").await;

    pause_resume_and_backfill(c, &home, shots).await;
    stored_schedule(c, &home, shots).await;
    skip_and_unskip(c, &home).await;
    add_a_holiday(c, &home).await;

    // The hostile job's own page shows its name as text.
    c.goto(&home).await.unwrap();
    c.find(Locator::LinkText(HOSTILE))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(text(c, "h1 .name").await, HOSTILE);
    assert_eq!(count(c, "script").await, 1);
    assert!(c.get_alert_text().await.is_err(), "no alert ran");

    c.goto(&format!("{home}/replicas")).await.unwrap();
    let replicas = text(c, "#replicas").await;
    assert!(
        replicas.contains("alive") && replicas.contains(FLAKY),
        "{replicas}"
    );

    c.goto(&format!("{home}/failures")).await.unwrap();
    assert!(text(c, "#failures").await.contains(FLAKY));
    shots.take(c, "failures").await;
    c.goto(&format!("{home}/jobs/{FLAKY}")).await.unwrap();
    // The retried run finished: its duration is a point of the chart, linking to the run.
    assert!(count(c, "svg.durations a circle").await >= 1);
    assert!(text(c, "#durations").await.contains("p95"));
    shots.take(c, "job").await;
    c.goto(&home).await.unwrap();
    shots.take(c, "jobs").await;
    search(c).await;
    at_a_phones_width(c, &home, shots).await;
}

/// The jobs page's search narrows the table to the job typed, and says how many match.
async fn search(c: &Client) {
    assert!(text(c, "ul.glance").await.contains("missed"));
    let q = c.find(Locator::Css("input[name=q]")).await.unwrap();
    q.send_keys(&FLAKY[..4]).await.unwrap();
    c.find(Locator::Css("form.search button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    shows(c, "p.count", Duration::from_secs(10)).await;
    assert_eq!(count(c, "table.jobs tbody tr").await, 1);
    assert!(text(c, "p.count").await.starts_with("1 of "));
    assert!(text(c, "table.jobs").await.contains(FLAKY));
}

/// The elements whose right edge is past the window's, innermost first (at most 8), but those
/// inside a table or a `.scroll`, which scroll inside themselves.
const WIDER_THAN_THE_WINDOW: &str = "return Array.from(document.querySelectorAll('body *'))\
    .filter(e => e.getBoundingClientRect().right > window.innerWidth && !e.closest('table, .scroll'))\
    .reverse().slice(0, 8)\
    .map(e => e.tagName.toLowerCase() + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))";

/// At a phone's width (390 × 844) no page scrolls sideways: wide tables scroll inside themselves.
async fn at_a_phones_width(c: &Client, home: &str, shots: &Shots) {
    c.set_window_size(390, 844)
        .await
        .expect("a phone-sized window");
    for page in [
        home.to_owned(),
        format!("{home}/jobs/{FLAKY}"),
        format!("{home}/jobs/{SETTLEMENT}"),
        format!("{home}/failures"),
        format!("{home}/missed"),
        format!("{home}/audit"),
        format!("{home}/replicas"),
        format!("{home}/schedules/{SCHEDULE}"),
    ] {
        c.goto(&page).await.unwrap();
        let widths = script(
            c,
            "return [document.documentElement.scrollWidth, window.innerWidth]",
        )
        .await;
        let (page_width, window) = (widths[0].as_u64().unwrap(), widths[1].as_u64().unwrap());
        assert!(window <= 420, "the window is a phone's: {window}");
        if page_width > window {
            // What sticks out, for the message.
            let wide = script(c, WIDER_THAN_THE_WINDOW).await;
            panic!("{page}: {page_width} px wide in {window}: {wide}");
        }
    }
    c.goto(&format!("{home}/jobs/{FLAKY}")).await.unwrap();
    shots.take(c, "phone-job").await;
    c.set_window_size(1280, 860).await.expect("the window back");
}

async fn pause_resume_and_backfill(c: &Client, home: &str, shots: &Shots) {
    c.goto(&format!("{home}/jobs/{SETTLEMENT}")).await.unwrap();
    change(c, "pause", "bank maintenance").await;
    let state = text(c, "#pause").await;
    assert!(state.contains("paused"), "{state}");
    assert!(state.contains("by alice"), "{state}");
    assert!(state.contains("bank maintenance"), "{state}");
    change(c, "resume", "maintenance over").await;
    assert!(text(c, "#pause").await.contains("active"));

    // The last three nights at 02:00 in Seoul (17:00 UTC), from before the job was first registered
    // (so the form says so): the preview lists them, nothing is made.
    let now = Utc::now();
    let from = now - chrono::Duration::days(3);
    let set = format!(
        "document.querySelector('#form-backfill [name=from]').value = {};\
         document.querySelector('#form-backfill [name=per_second]').value = '10';\
         document.querySelector('#form-backfill [name=before_first_seen]').checked = true;",
        json!(from.format("%Y-%m-%dT%H:%M:%S").to_string())
    );
    script(c, &set).await;
    c.find(Locator::Css("#form-backfill input[name=reason]"))
        .await
        .unwrap()
        .send_keys("replay the bank's outage")
        .await
        .unwrap();
    c.find(Locator::Css("#form-backfill button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    shows(c, "#preview", Duration::from_secs(10)).await;
    let preview = text(c, "#preview").await;
    let nights = (0..4)
        .map(|d| now.date_naive() - chrono::Duration::days(d))
        .map(|d| {
            Utc.with_ymd_and_hms(d.year(), d.month(), d.day(), 17, 0, 0)
                .unwrap()
        })
        .filter(|slot| *slot >= from && *slot < now)
        .count();
    assert_eq!(nights, 3);
    assert!(preview.contains("3 slot(s) would be created"), "{preview}");
    shots.take(c, "backfill-preview").await;
    confirm(c, "backfill").await;
    eventually(Duration::from_secs(20), "the backfilled runs", || async {
        text(c, "#runs").await.matches("backfill").count() == 3
    })
    .await;
}

/// A stored schedule of the settlement job, added through its page's form (09:00 in New York for
/// tenant acme, three runs): its page shows its fields, its next slots and its history; it is paused
/// with a note and resumed.
async fn stored_schedule(c: &Client, home: &str, shots: &Shots) {
    c.goto(&format!("{home}/jobs/{SETTLEMENT}")).await.unwrap();
    assert!(text(c, "#schedules").await.contains("No stored schedule"));
    c.find(Locator::Css("details.add summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let zone = c
        .find(Locator::Css("#form-add-schedule [name=tz]"))
        .await
        .unwrap();
    zone.clear().await.unwrap();
    zone.send_keys("America/New_York").await.unwrap();
    for (name, value) in [
        ("id", SCHEDULE),
        ("cron", "0 9 * * *"),
        ("partition", "acme"),
    ] {
        let field = format!("#form-add-schedule [name={name}]");
        let field = c.find(Locator::Css(&field)).await.unwrap();
        field.send_keys(value).await.unwrap();
    }
    let runs = "#form-add-schedule [name=remaining_runs]";
    let runs = c.find(Locator::Css(runs)).await.unwrap();
    runs.send_keys("3").await.unwrap();
    change(c, "add-schedule", "onboarding acme").await;
    assert_eq!(text(c, "h1 .name").await, SCHEDULE);
    assert_eq!(count(c, "#next li").await, 3, "its three runs");
    assert!(text(c, "#next").await.contains("EST") || text(c, "#next").await.contains("EDT"));
    assert!(text(c, "#history").await.contains("onboarding acme"));
    assert_eq!(count(c, "script").await, 1);

    let note = c
        .find(Locator::Css("#form-pause input[name=note]"))
        .await
        .unwrap();
    note.send_keys("month-end freeze").await.unwrap();
    change(c, "pause", "freeze").await;
    let facts = text(c, "#schedule").await;
    assert!(
        facts.contains("paused") && facts.contains("month-end freeze"),
        "{facts}"
    );
    change(c, "resume", "freeze over").await;
    assert!(text(c, "#schedule").await.contains("active"));
    assert_eq!(count(c, "#history tbody tr").await, 3);
    shots.take(c, "schedule").await;
    c.goto(&format!("{home}/jobs/{SETTLEMENT}")).await.unwrap();
    let listed = text(c, "#schedules").await;
    assert!(
        listed.contains(SCHEDULE) && listed.contains("acme"),
        "{listed}"
    );
}

/// The settlement job's next slot is skipped from its page, then the skip is undone from the run's
/// page, reached from the skipped row.
async fn skip_and_unskip(c: &Client, home: &str) {
    c.goto(&format!("{home}/jobs/{SETTLEMENT}")).await.unwrap();
    change(c, "skip", "bank holiday").await;
    eventually(Duration::from_secs(10), "the skipped row", || async {
        text(c, "#runs")
            .await
            .contains("skipped by an operator: bank holiday")
    })
    .await;
    c.find(Locator::Css("#runs a.unskip"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    shows(c, "#form-unskip", Duration::from_secs(10)).await;
    change(c, "unskip", "not a holiday").await;
    assert!(!text(c, "#runs").await.contains("skipped by an operator"));
}

/// A holiday is added to Korea's calendar through the holidays page's form, and listed there.
async fn add_a_holiday(c: &Client, home: &str) {
    c.goto(&format!("{home}/holidays")).await.unwrap();
    let calendar = "#form-add-holiday [name=calendar]";
    let calendar = c.find(Locator::Css(calendar)).await.unwrap();
    calendar.select_by_value("KR").await.unwrap();
    for (name, value) in [("date", "2026-10-02"), ("name", "Temporary holiday")] {
        let field = format!("#form-add-holiday [name={name}]");
        let field = c.find(Locator::Css(&field)).await.unwrap();
        field.send_keys(value).await.unwrap();
    }
    change(c, "add-holiday", "decree of 2026-09-15").await;
    let listed = text(c, "table.holidays").await;
    for part in [
        "KR",
        "2026-10-02",
        "added: Temporary holiday",
        "alice",
        "decree",
    ] {
        assert!(listed.contains(part), "{part}: {listed}");
    }
}

async fn browser_walk(backend: impl Backend, shots: Shots) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let driver = Driver::start();
    let (addr, handle) = serve(backend).await;
    let client = driver.browser().await;
    walk(&client, addr, &shots).await;
    client.close().await.expect("browser closed");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_works_through_the_dashboard_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let backend = slotguard_sqlite::SqliteBackend::open(dir.path().join("slots.db"))
        .await
        .expect("SQLite");
    let shots = Shots(std::env::var_os("SLOTGUARD_SCREENSHOTS").map(PathBuf::from));
    browser_walk(backend, shots).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_works_through_the_dashboard_on_postgres() {
    let url = std::env::var("SLOTGUARD_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = format!("sg_dashboard_{}", std::process::id());
    let backend = slotguard_postgres::PgBackend::builder(&url)
        .schema(schema.clone())
        .connect()
        .await
        .expect("PostgreSQL");
    let pool = backend.pool().clone();
    // Run in a task of its own so that the schema is dropped whether the walk passes or panics.
    let walk = tokio::spawn(browser_walk(backend, Shots(None))).await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"
    )))
    .execute(&pool)
    .await
    .expect("schema dropped");
    if let Err(panic) = walk {
        std::panic::resume_unwind(panic.into_panic());
    }
}
