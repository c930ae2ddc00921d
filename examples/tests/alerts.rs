//! End to end: a real Prometheus scrapes the axum example and evaluates the shipped alert rules
//! (`deploy/prometheus/slotguard.rules.yml`). The example's store (a throwaway PostgreSQL cluster)
//! goes away; its per-second job stops starting, and `SlotguardJobSilent` fires for it.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use slotguard_process_tests::Cluster;

mod support;
use support::example;

/// A child process killed when the test ends, passing or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The body of `GET path` on 127.0.0.1:`port`, or `None` while nothing answers.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}

/// The axum example on `database`, and the port it listens on.
fn start_example(database: &str) -> (Killed, u16) {
    let mut child = Command::new(example("axum_server"))
        .args(["--addr", "127.0.0.1:0"])
        .env("DATABASE_URL", database)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the example starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("the example prints its address");
    let port = first
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    (Killed(child), port)
}

/// A Prometheus server scraping 127.0.0.1:`target` every second with the shipped rules.
fn start_prometheus(dir: &Path, target: u16) -> (Killed, u16) {
    let rules =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus/slotguard.rules.yml");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: [{:?}]\n\
             scrape_configs:\n  - job_name: app\n    static_configs: [{{targets: ['127.0.0.1:{target}']}}]\n",
            rules.canonicalize().expect("the rules file")
        ),
    )
    .expect("write the config");
    let port = free_port();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus starts");
    (Killed(child), port)
}

/// The state (`pending`, `firing`) of `alert` for `job`, if Prometheus has it.
fn alert_state(port: u16, alert: &str, job: &str) -> Option<String> {
    let body = get(port, "/api/v1/alerts")?;
    let answer: Value = serde_json::from_str(&body).ok()?;
    answer["data"]["alerts"]
        .as_array()?
        .iter()
        .find(|a| a["labels"]["alertname"] == alert && a["labels"]["job_name"] == job)
        .and_then(|a| a["state"].as_str().map(str::to_owned))
}

/// Polls `check` every 250 ms for up to `limit`.
fn wait_for(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    false
}

#[test]
fn a_job_whose_store_went_away_fires_the_silent_alert() {
    let tools = Command::new("prometheus").arg("--version").output().is_ok();
    let Some(cluster) = tools.then(Cluster::start).flatten() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "prometheus or the PostgreSQL server binaries are missing: .ci/run installs them"
        );
        println!("skipped: needs Debian's prometheus and postgresql packages");
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let (_app, app_port) = start_example(&cluster.url());
    let (_prometheus, port) = start_prometheus(dir.path(), app_port);
    let query = "/api/v1/query?query=job_last_start_timestamp%7Bjob_name%3D%22refresh-rates%22%7D";
    let scraped = wait_for(Duration::from_secs(60), || {
        get(port, query).is_some_and(|b| b.contains("refresh-rates"))
    });
    assert!(scraped, "Prometheus never scraped the example's starts");
    // Healthy: the job starts every second, so the alert is neither pending nor firing.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        alert_state(port, "SlotguardJobSilent", "refresh-rates"),
        None
    );

    cluster.stop();
    let stopped = Instant::now();
    let fired = wait_for(Duration::from_secs(60), || {
        alert_state(port, "SlotguardJobSilent", "refresh-rates").as_deref() == Some("firing")
    });
    assert!(
        fired,
        "SlotguardJobSilent did not fire within 60 s of the store going away"
    );
    // Three periods of 1 s, plus a scrape and an evaluation: well under 30 s.
    let took = stopped.elapsed();
    assert!(took < Duration::from_secs(30), "{took:?}");
    println!("SlotguardJobSilent fired {took:?} after the store went away");
}
