//! The examples as a user runs them: compiled example binaries started as child processes, spoken to
//! over HTTP/1.1 on loopback, and stopped with SIGTERM.
//!
//! `cargo test` builds a package's examples before it runs its tests, into `target/<profile>/examples/`,
//! next to the `deps/` directory this test binary runs from; that is where they are looked for. When a
//! test target is run on its own (`cargo test --test examples`), examples are not built: the missing
//! one (or one older than its source) is built then with `cargo build --example`.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use slotguard_tests::otlp::{self, Receiver, Span};

mod support;
use support::example;

/// The examples run one at a time: each is timing-sensitive (the settlement demo freezes a replica
/// past its stale threshold), and two cores shared by three servers make timings meaningless.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A server example running as a child process; killed if a test fails before stopping it.
struct Server {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts `name` on a free port with a fresh SQLite store, and waits for its first line on stdout.
    fn start(name: &str) -> Server {
        Server::start_with(name, &[])
    }

    /// [`start`](Server::start), with `env` set for the example.
    fn start_with(name: &str, env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut child = Command::new(example(name))
            .args(["--addr", "127.0.0.1:0", "--db"])
            .arg(dir.path().join("slots.db"))
            // A developer's DATABASE_URL would switch the store to PostgreSQL, an OTLP endpoint
            // would send traces.
            .env_remove("DATABASE_URL")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("ADDR")
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the example starts");

        // Read stdout on a thread: the first line names the address, and the pipe must keep draining.
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{name} printed no address: {e}"));
        let port = first
            .strip_prefix("listening on http://")
            .and_then(|addr| addr.rsplit(':').next())
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line from {name}: {first:?}"));
        Server {
            child,
            port,
            _dir: dir,
        }
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        http(self.port, "GET", path, headers, None)
    }

    fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        http(self.port, "POST", path, headers, Some(body))
    }

    fn patch(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        http(self.port, "PATCH", path, headers, Some(body))
    }

    /// Sends SIGTERM and waits for the process to exit.
    fn terminate(mut self, within: Duration) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed");
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("the child can be waited for") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {within:?} of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// An HTTP answer: status and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), read to the end.
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the example");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        request.push_str("Content-Type: application/json\r\n");
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("\r\n");
    request.push_str(body.unwrap_or(""));
    stream
        .write_all(request.as_bytes())
        .expect("send the request");

    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the answer");
    let text = String::from_utf8(raw).expect("a UTF-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a header block");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let chunked = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Answer { status, body }
}

/// Decodes a `Transfer-Encoding: chunked` body.
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .expect("a chunk size");
        if size == 0 {
            break;
        }
        body.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    body
}

/// Polls `check` every 200 ms until it holds, for at most `within`.
fn eventually(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The actix example's stand-in authentication.
const OPERATOR: (&str, &str) = ("x-operator", "alice");
/// The axum example's basic auth: `alice:change-me`.
const ALICE: (&str, &str) = ("authorization", "Basic YWxpY2U6Y2hhbmdlLW1l");
/// The seed article's retry call, for a slot that has no run.
const SEED_RETRY: &str =
    r#"{"scheduleSlot": "2026-03-08T17:00:00Z", "reason": "bank API was down"}"#;

#[test]
fn axum_server_serves_health_admin_and_metrics_and_stops_on_sigterm() {
    let _alone = one_at_a_time();
    let server = Server::start("axum_server");

    let health = server.get("/health", &[]);
    assert_eq!((health.status, health.body.as_str()), (200, "ok"));

    // The admin API needs an operator, on every path under /internal.
    assert_eq!(server.get("/internal/jobs", &[]).status, 401);
    assert_eq!(server.get("/internal/no-such-route", &[]).status, 401);
    let wrong = server.get(
        "/internal/jobs",
        &[("authorization", "Basic YWxpY2U6d3Jvbmc=")],
    );
    assert_eq!(wrong.status, 401, "alice:wrong");
    assert_eq!(server.get("/internal/dashboard", &[]).status, 401);
    let jobs = server.get("/internal/jobs", &[ALICE]);
    assert_eq!(jobs.status, 200, "{}", jobs.body);
    let jobs = jobs.json();
    let names: Vec<&str> = jobs["jobs"]
        .as_array()
        .expect("a list of jobs")
        .iter()
        .filter_map(|job| job["name"].as_str())
        .collect();
    assert!(names.contains(&"daily-settlement"), "{jobs}");
    assert!(names.contains(&"refresh-rates"), "{jobs}");

    // The seed's retry call, for a slot that never ran: a JSON 404 that names the job.
    let retry = server.post(
        "/internal/jobs/daily-settlement/retry",
        &[ALICE],
        SEED_RETRY,
    );
    assert_eq!(retry.status, 404, "{}", retry.body);
    assert_eq!(retry.json()["error"], "unknown_run");

    // A manual run: audited under the operator the middleware authenticated, and run within seconds.
    let triggered = server.post(
        "/internal/jobs/daily-settlement/trigger",
        &[ALICE],
        r#"{"reason": "example test", "actor": "mallory"}"#,
    );
    assert_eq!(triggered.status, 200, "{}", triggered.body);
    let audit = server
        .get("/internal/audit?job=daily-settlement", &[ALICE])
        .json();
    assert_eq!(audit["audit"][0]["action"], "trigger", "{audit}");
    assert_eq!(audit["audit"][0]["actor"], "alice", "{audit}");
    eventually(
        Duration::from_secs(15),
        "the manual settlement succeeds",
        || {
            let runs = server
                .get("/internal/jobs/daily-settlement/runs", &[ALICE])
                .json();
            runs["runs"][0]["status"] == "succeeded"
        },
    );

    // The dashboard's jobs page, as the README's curl line fetches it.
    let page = server.get("/internal/dashboard", &[ALICE]);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("daily-settlement"), "{}", page.body);
    assert!(page.body.contains("daily at 02:00"), "{}", page.body);

    // The job that fires every second shows up in the scheduler's metrics.
    eventually(Duration::from_secs(15), "metrics of a run", || {
        let metrics = server.get("/metrics", &[]);
        metrics.status == 200
            && metrics
                .body
                .contains(r#"job_run_started_total{job_name="refresh-rates"}"#)
    });

    let status = server.terminate(Duration::from_secs(15));
    assert!(status.success(), "exit after SIGTERM: {status}");
}

/// A schedule added over HTTP for one of the example's jobs, on a partition of its own, runs within
/// 2 s of the answer; a change read at an old version is refused with 409 and changes nothing.
#[test]
fn axum_server_runs_a_schedule_added_over_http_within_two_seconds() {
    let _alone = one_at_a_time();
    let server = Server::start("axum_server");
    let body = r#"{"id": "acme-every-second", "job": "daily-settlement", "cron": "* * * * * *",
        "tz": "Asia/Seoul", "partition": "acme", "reason": "example test"}"#;
    let added = server.post("/internal/schedules", &[ALICE], body);
    let answered = Instant::now();
    assert_eq!(added.status, 201, "{}", added.body);
    let added = added.json();
    assert_eq!(added["version"], 1, "{added}");
    assert_eq!(added["changedBy"], "alice", "{added}");
    assert_eq!(added["next"].as_array().map(Vec::len), Some(5), "{added}");
    let ran = || {
        let runs = server
            .get(
                "/internal/jobs/daily-settlement/runs?partition=acme",
                &[ALICE],
            )
            .json();
        runs["runs"].as_array().is_some_and(|runs| {
            runs.iter()
                .any(|r| r["status"] == "succeeded" || r["status"] == "running")
        })
    };
    let deadline = answered + Duration::from_secs(2);
    while !ran() {
        assert!(
            Instant::now() < deadline,
            "the added schedule did not run within 2 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let stale = r#"{"version": 0, "cron": "*/5 * * * * *", "reason": "read long ago"}"#;
    let refused = server.patch("/internal/schedules/acme-every-second", &[ALICE], stale);
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.json()["error"], "stale_version");
    let current = server
        .get("/internal/schedules/acme-every-second", &[ALICE])
        .json();
    assert_eq!(
        (current["version"].as_i64(), current["cron"].as_str()),
        (Some(1), Some("* * * * * *"))
    );
    let fresh = r#"{"version": 1, "paused": true, "note": "demo over", "reason": "example test"}"#;
    let paused = server.patch("/internal/schedules/acme-every-second", &[ALICE], fresh);
    assert_eq!(paused.status, 200, "{}", paused.body);
    assert_eq!(paused.json()["version"], 2);

    let status = server.terminate(Duration::from_secs(15));
    assert!(status.success(), "exit after SIGTERM: {status}");
}

#[test]
fn actix_server_serves_health_and_admin_and_stops_on_sigterm() {
    let _alone = one_at_a_time();
    let server = Server::start("actix_server");

    let health = server.get("/health", &[]);
    assert_eq!((health.status, health.body.as_str()), (200, "ok"));
    assert_eq!(server.get("/internal/jobs", &[]).status, 401);
    let jobs = server.get("/internal/jobs", &[OPERATOR]);
    assert_eq!(jobs.status, 200, "{}", jobs.body);
    assert!(jobs.body.contains("daily-settlement"), "{}", jobs.body);
    let retry = server.post(
        "/internal/jobs/daily-settlement/retry",
        &[OPERATOR],
        SEED_RETRY,
    );
    assert_eq!(retry.status, 404, "{}", retry.body);
    assert_eq!(retry.json()["error"], "unknown_run");
    let unknown = server.post("/internal/jobs/no-such-job/retry", &[OPERATOR], SEED_RETRY);
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert_eq!(unknown.json()["error"], "unknown_job");
    eventually(Duration::from_secs(15), "metrics of a run", || {
        let metrics = server.get("/metrics", &[]);
        metrics.status == 200 && metrics.body.contains("job_run_started_total")
    });

    let status = server.terminate(Duration::from_secs(15));
    assert!(status.success(), "exit after SIGTERM: {status}");
}

#[test]
fn settlement_pays_every_slot_exactly_once() {
    let _alone = one_at_a_time();
    let mut child = Command::new(example("settlement"))
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .spawn()
        .expect("the example starts");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        let _ = tx.send(out);
    });
    let out = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(out) => out,
        Err(_) => {
            let _ = child.kill();
            panic!("the settlement example did not finish within 60 s");
        }
    };
    let status = child.wait().expect("the child can be waited for");
    let last = out.lines().last().unwrap_or_default();
    assert!(status.success(), "exit {status}; output:\n{out}");
    assert!(
        last.starts_with("settled ")
            && last.contains("each exactly once")
            && last.contains("1 late write refused")
            && last.contains("already paid"),
        "closing line {last:?}; output:\n{out}"
    );
}

/// Runs the quick start for `seconds` with `env` and its temporary directory in `tmp`; returns its
/// output (stdout and stderr, in that order).
fn quickstart(seconds: u64, tmp: &std::path::Path, env: &[(&str, &str)]) -> String {
    let mut command = Command::new(example("quickstart"));
    command
        .env_remove("DATABASE_URL")
        .env_remove("RUST_LOG")
        .env("QUICKSTART_SECONDS", seconds.to_string())
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command.spawn().expect("the quick start starts");
    let output = child.wait_with_output().expect("the quick start ends");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "exit {}; output:\n{text}",
        output.status
    );
    assert!(text.contains(", 0 duplicate executions"), "{text}");
    text
}

/// The number before `marker` on the line that holds it.
fn count_before(text: &str, marker: &str) -> usize {
    let line = text
        .lines()
        .find(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no line with {marker:?} in:\n{text}"));
    let head = &line[..line.find(marker).expect("found")];
    head.split_whitespace()
        .last()
        .and_then(|n| n.trim_start_matches('(').parse().ok())
        .unwrap_or_else(|| panic!("no number before {marker:?} in {line:?}"))
}

/// Issue 15, item 14: the quick start keeps its SQLite file, ends with CLI commands to try on it,
/// uses "run" for one job's one slot throughout its summary, and writes no colour codes into a pipe.
#[test]
fn quickstart_keeps_its_store_and_ends_with_commands_to_try() {
    let _alone = one_at_a_time();
    let tmp = tempfile::tempdir().expect("a temp dir");
    let out = quickstart(6, tmp.path(), &[]);
    assert!(!out.contains('\u{1b}'), "colour codes in a pipe:\n{out}");
    let executed = count_before(&out, " runs executed (");
    let attempts = count_before(&out, " attempts: a retry is a second attempt");
    let recorded = count_before(&out, " runs (skipped slots included)");
    assert!(executed > 0 && attempts >= executed, "{out}");
    assert!(recorded >= executed, "{out}");
    assert!(!out.contains("runs (attempts included)"), "{out}");
    let db = std::fs::read_dir(tmp.path())
        .expect("the temp dir")
        .filter_map(Result::ok)
        .map(|e| e.path().join("slots.db"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no slots.db kept in {}:\n{out}", tmp.path().display()));
    let cli = format!("slotguard --database-url sqlite:{} ", db.display());
    for command in ["jobs", "runs sync --limit 5", "audit"] {
        assert!(
            out.contains(&format!("  {cli}{command}")),
            "no `{command}`:\n{out}"
        );
    }
    assert!(out.contains("cargo install --path cli"), "{out}");
}

/// Issue 15, bug 7: each PostgreSQL quick start works in a fresh schema, named in its output, so a
/// second run neither counts nor runs the first one's rows.
#[test]
fn postgres_quickstart_uses_a_fresh_schema_each_run() {
    let _alone = one_at_a_time();
    let url = std::env::var("SLOTGUARD_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let tmp = tempfile::tempdir().expect("a temp dir");
    let schema_of = |out: &str| -> String {
        out.split("--schema ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no schema named:\n{out}"))
            .to_owned()
    };
    let first = quickstart(5, tmp.path(), &[("DATABASE_URL", &url)]);
    let second = quickstart(5, tmp.path(), &[("DATABASE_URL", &url)]);
    let schemas = [schema_of(&first), schema_of(&second)];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let rows = rt.block_on(async {
        use sqlx::Connection as _;
        let mut db = sqlx::PgConnection::connect(&url).await.expect("PostgreSQL");
        let mut rows = Vec::new();
        // Names the quick start printed, checked to be plain identifiers before they go into SQL.
        for schema in &schemas {
            assert!(
                schema
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "{schema}"
            );
        }
        for schema in &schemas {
            let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {schema}.job_runs"
            )))
            .fetch_one(&mut db)
            .await
            .expect("count runs");
            rows.push(usize::try_from(n).expect("a count"));
        }
        for schema in &schemas {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP SCHEMA IF EXISTS {schema} CASCADE"
            )))
            .execute(&mut db)
            .await
            .expect("drop the schema");
        }
        rows
    });
    assert_ne!(schemas[0], schemas[1], "one schema for two runs");
    for (out, (schema, rows)) in [&first, &second].into_iter().zip(schemas.iter().zip(rows)) {
        assert!(out.contains(&format!("the fresh schema {schema}")), "{out}");
        assert!(
            out.contains(&format!("DROP SCHEMA {schema} CASCADE")),
            "{out}"
        );
        // The summary counts this run's rows, all of them and only them.
        assert_eq!(
            count_before(out, " runs (skipped slots included)"),
            rows,
            "{out}"
        );
        assert!(rows >= count_before(out, " runs executed ("), "{out}");
        assert!(
            rows < 20,
            "rows of an earlier run in {schema}: {rows}\n{out}"
        );
    }
}

/// Issue 15, item 14: a per-second job logs no line per run at `info`, and logs into a pipe carry no
/// colour codes.
#[test]
fn a_per_second_job_logs_quietly_and_without_colours_into_a_pipe() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().expect("a temp dir");
    let log = dir.path().join("stderr.log");
    let mut child = Command::new(example("axum_server"))
        .args(["--addr", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("slots.db"))
        .env_remove("DATABASE_URL")
        .env_remove("ADDR")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .expect("the example starts");
    // `refresh-rates` fires every second: six seconds are six runs.
    std::thread::sleep(Duration::from_secs(6));
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().expect("the example ends");
    assert!(status.success(), "exit {status}");
    let text = std::fs::read_to_string(&log).expect("the log");
    assert!(!text.contains('\u{1b}'), "colour codes in a pipe:\n{text}");
    let per_run = text
        .lines()
        .filter(|l| l.contains("refresh-rates") && l.contains(" INFO "))
        .count();
    assert!(
        per_run < 3,
        "{per_run} info lines of the per-second job in 6 s:\n{text}"
    );
    assert!(text.contains(" INFO "), "nothing at info at all:\n{text}");
}

/// With `OTEL_EXPORTER_OTLP_ENDPOINT`, the axum example sends a trace per run over OTLP/HTTP (to a
/// real receiver that decodes the protobuf), even with `RUST_LOG` at `warn`: docs/observability.md.
#[test]
fn axum_server_exports_a_trace_per_run_over_otlp_http() {
    let _alone = one_at_a_time();
    let receiver = Receiver::start();
    let endpoint = format!("http://{}", receiver.addr);
    let server = Server::start_with(
        "axum_server",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ],
    );
    let traced = |spans: &[Span]| {
        spans.iter().any(|run| {
            run.name == "job_run"
                && otlp::attr(run, "job").as_deref() == Some("refresh-rates")
                && otlp::attr(run, "workflow.task.run.result").as_deref() == Some("success")
                && spans
                    .iter()
                    .any(|body| body.name == "job_body" && body.parent_span_id == run.span_id)
        })
    };
    eventually(Duration::from_secs(20), "a run's trace is received", || {
        traced(&receiver.spans())
    });
    assert!(server.terminate(Duration::from_secs(15)).success());
}
