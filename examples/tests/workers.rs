//! Trigger apart from execution, with real processes: the `workers` example (a scheduler process and
//! three worker processes) runs each slot once, and the `cronjob` example started the way a
//! Kubernetes CronJob starts pods — eight at once for one slot, a pod killed with SIGKILL mid-run and
//! started again, a slot older than the catch-up window — runs each slot's body once.

#![cfg(unix)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};

/// A compiled example of this package; built when this test target runs alone.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let path = profile.join("examples").join(name);
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "slotguard-examples", "--example", name])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build --example {name}");
    }
    path
}

fn cronjob(store: &str, slot: &str, ledger: &Path, work_ms: u64) -> Command {
    let mut cmd = Command::new(example("cronjob"));
    cmd.args([
        "--store",
        store,
        "--slot",
        slot,
        "--work-ms",
        &work_ms.to_string(),
    ])
    .arg("--ledger")
    .arg(ledger)
    .env("RUST_LOG", "warn")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// The latest whole minute: a slot of `* * * * *` that is due.
fn this_minute() -> DateTime<Utc> {
    let now = Utc::now();
    now.with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .expect("a minute")
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn eight_pods_for_one_slot_run_the_body_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite:{}", dir.path().join("slots.db").display());
    let ledger = dir.path().join("ledger.txt");
    let slot = this_minute().to_rfc3339();
    let children: Vec<Child> = (0..8)
        .map(|_| {
            cronjob(&store, &slot, &ledger, 1_500)
                .spawn()
                .expect("spawn")
        })
        .collect();
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();
    let ran = lines(&ledger);
    assert_eq!(ran.len(), 1, "one body ran: {ran:?}");
    let mut codes: HashMap<Option<i32>, usize> = HashMap::new();
    for output in &outputs {
        *codes.entry(output.status.code()).or_default() += 1;
    }
    assert_eq!(codes.get(&Some(0)), Some(&8), "all exit 0: {codes:?}");
    let said: Vec<String> = outputs.iter().map(text).collect();
    assert_eq!(
        said.iter()
            .filter(|s| s.contains("succeeded (attempt 1)"))
            .count(),
        1,
        "{said:#?}"
    );
    let suppressed: Vec<&String> = said.iter().filter(|s| s.contains("suppressed")).collect();
    assert_eq!(suppressed.len(), 7, "{said:#?}");
    assert!(
        suppressed.iter().all(|s| s.contains("has it, succeeded")),
        "the others followed the run to its end and name its owner: {suppressed:#?}"
    );
}

#[test]
fn a_pod_killed_mid_run_is_taken_over_as_the_next_attempt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite:{}", dir.path().join("slots.db").display());
    let ledger = dir.path().join("ledger.txt");
    let slot = this_minute().to_rfc3339();
    let mut first = cronjob(&store, &slot, &ledger, 60_000)
        .spawn()
        .expect("spawn");
    let started = std::time::Instant::now();
    while lines(&ledger).is_empty() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(lines(&ledger).len(), 1, "the first pod started the body");
    // The node dies: the pod is gone without a word; its row stays `running` until stale (3 s).
    first.kill().expect("SIGKILL");
    first.wait().expect("reaped");
    let retry = cronjob(&store, &slot, &ledger, 200).output().expect("run");
    assert_eq!(retry.status.code(), Some(0), "{}", text(&retry));
    assert!(
        text(&retry).contains("succeeded (attempt 2)"),
        "{}",
        text(&retry)
    );
    assert_eq!(lines(&ledger).len(), 2);
}

#[tokio::test]
async fn a_slot_older_than_the_catch_up_window_is_refused_and_recorded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("slots.db");
    let store = format!("sqlite:{}", db.display());
    let ledger = dir.path().join("ledger.txt");
    let old = this_minute() - chrono::Duration::hours(1);
    let out = cronjob(&store, &old.to_rfc3339(), &ledger, 10)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("older than the job's catch-up window"),
        "{}",
        text(&out)
    );
    assert!(lines(&ledger).is_empty(), "nothing ran");
    let backend = slotguard_sqlite::SqliteBackend::open(&db)
        .await
        .expect("open");
    let rows = backend.runs(None).await.expect("runs");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].key.scheduled_at, old);
    assert_eq!(rows[0].status, slotguard::store::RunStatus::Skipped);
    let bad = cronjob(&store, "2026-01-01T00:00:30Z", &ledger, 10)
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(2), "not a slot: {}", text(&bad));
    assert!(
        text(&bad).contains("is not a slot of the job's schedule"),
        "{}",
        text(&bad)
    );
}

#[test]
fn the_workers_example_runs_each_slot_once_on_the_workers() {
    let out = Command::new(example("workers"))
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .output()
        .expect("run");
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let summary = said
        .lines()
        .find(|l| l.contains("duplicates (counted from what the bodies did)"))
        .unwrap_or_else(|| panic!("no summary: {said}"));
    assert!(summary.contains(" 0 duplicates"), "{summary}");
    let slots: usize = summary
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count");
    assert!(
        slots >= 30,
        "about 20 s of a per-second job and 6 invoices per 5 s: {summary}"
    );
    assert!(
        !said.contains("ran on scheduler"),
        "the scheduler runs no body"
    );
    let workers = ["worker-1", "worker-2", "worker-3"];
    let busy = workers
        .iter()
        .filter(|w| said.contains(&format!("ran on {w}")))
        .count();
    assert!(busy >= 2, "the slots spread over the workers: {said}");
}

#[test]
fn a_pod_retried_after_its_body_failed_runs_the_next_attempt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite:{}", dir.path().join("slots.db").display());
    let ledger = dir.path().join("ledger.txt");
    let slot = this_minute().to_rfc3339();
    let first = cronjob(&store, &slot, &ledger, 10)
        .args(["--fail-attempts", "1"])
        .output()
        .expect("run");
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    assert!(
        text(&first).contains("failed (attempt 1)"),
        "{}",
        text(&first)
    );
    // backoffLimit starts the pod again: it waits for the run's retry (about 1 s) and runs it.
    let second = cronjob(&store, &slot, &ledger, 10).output().expect("run");
    assert_eq!(second.status.code(), Some(0), "{}", text(&second));
    assert!(
        text(&second).contains("succeeded (attempt 2)"),
        "{}",
        text(&second)
    );
    assert_eq!(lines(&ledger).len(), 2);
}

/// Issue 21, point 4: a pod whose store cannot be reached (PostgreSQL down, an SQLite path that
/// cannot be opened) exits 4, which Kubernetes retries; 2 would fail the Job for good.
#[test]
fn a_pod_whose_store_cannot_be_reached_exits_4() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("ledger.txt");
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, "x").expect("write a file");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let slot = this_minute().to_rfc3339();
    for store in [
        format!("sqlite:{}", file.join("slots.db").display()),
        format!("postgres:sg_down:postgres://postgres@127.0.0.1:{port}/test"),
    ] {
        let out = cronjob(&store, &slot, &ledger, 10).output().expect("run");
        assert_eq!(out.status.code(), Some(4), "{store}: {}", text(&out));
    }
    let out = cronjob("redis:nowhere", &slot, &ledger, 10)
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(2),
        "a bad store name: {}",
        text(&out)
    );
    assert!(lines(&ledger).is_empty(), "nothing ran");
}
