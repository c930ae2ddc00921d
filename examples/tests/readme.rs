//! The README's "What you write" is `examples/what_you_write.rs`, quoted exactly (issue 21, point
//! 7): this checks the quote, that the README's commands name the jobs the program registers, that
//! the backend types it names exist, and runs the program on a throwaway PostgreSQL database,
//! asking its admin router for the job the README's curl and CLI lines name.

#![cfg(unix)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::Connection;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The ```rust block that follows `## What you write` in the README.
fn readme_program() -> String {
    let readme = read("README.md");
    let section = readme
        .split("## What you write")
        .nth(1)
        .expect("a `What you write` section");
    let block = section.split("```rust\n").nth(1).expect("a rust block");
    block[..block.find("```").expect("its end")].to_owned()
}

/// The lines of the example between its `ANCHOR: readme` and `ANCHOR_END: readme` comments.
fn anchored() -> String {
    let source = read("examples/what_you_write.rs");
    let start = source.find("// ANCHOR: readme\n").expect("the anchor") + 18;
    let end = source
        .find("// ANCHOR_END: readme")
        .expect("the end anchor");
    source[start..end].to_owned()
}

#[test]
fn the_readme_quotes_the_example_exactly() {
    assert_eq!(readme_program(), anchored());
}

#[test]
fn the_readme_commands_name_the_jobs_the_program_registers() {
    let readme = read("README.md");
    let program = anchored();
    assert!(
        program.contains(r#"name = "daily-settlement""#),
        "{program}"
    );
    let named: Vec<&str> = readme
        .split("/jobs/")
        .skip(1)
        .chain(readme.split(" runs ").skip(1))
        .chain(readme.split(" missed ").skip(1))
        .chain(readme.split(" trigger ").skip(1))
        .filter_map(|rest| rest.split(['/', ' ']).next())
        .filter(|name| name.contains("settlement"))
        .collect();
    assert!(named.len() >= 4, "{named:?}");
    assert!(named.iter().all(|n| *n == "daily-settlement"), "{named:?}");
    for doc in ["README.md", "docs/guards.md", "docs/workers.md"] {
        assert!(
            !read(doc).contains("PostgresBackend"),
            "{doc} names PostgresBackend"
        );
    }
}

fn database_url() -> String {
    std::env::var("SLOTGUARD_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// `url` with its database replaced by `database`.
fn with_database(url: &str, database: &str) -> String {
    let at = url.rfind('/').expect("a database in the URL");
    format!("{}/{database}", &url[..at])
}

async fn admin_sql(sql: &str) {
    let mut conn = sqlx::PgConnection::connect(&database_url())
        .await
        .expect("connect to the test server");
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The example, killed if the test fails before it stops.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn get(port: u16, path: &str) -> Option<String> {
    send(port, "GET", path, "")
}

/// One HTTP/1.1 request with a JSON body (none when empty); the whole answer.
fn send(port: u16, method: &str, path: &str, body: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if !body.is_empty() {
        request.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let path = profile.join("examples").join("what_you_write");
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "-p",
                "slotguard-examples",
                "--example",
                "what_you_write",
            ])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build --example what_you_write");
    }
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_program_runs_and_serves_the_job_the_readme_names() {
    let database = format!("sg_readme_{}", std::process::id());
    admin_sql(&format!("DROP DATABASE IF EXISTS {database}")).await;
    admin_sql(&format!("CREATE DATABASE {database}")).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = Running(
        Command::new(example())
            .env("DATABASE_URL", with_database(&database_url(), &database))
            .env("ADDR", format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .spawn()
            .expect("the example starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        if let Some(answer) = get(port, "/internal/jobs") {
            break answer;
        }
        assert!(Instant::now() < deadline, "the example never answered");
        assert!(matches!(child.0.try_wait(), Ok(None)), "the example exited");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""name":"daily-settlement""#), "{answer}");
    let health = get(port, "/health").unwrap_or_default();
    assert!(health.ends_with("ok"), "{health}");
    // The README's curl and CLI lines name the job as the program registers it.
    let runs = get(port, "/internal/jobs/daily-settlement/runs").unwrap_or_default();
    assert!(runs.starts_with("HTTP/1.1 200"), "{runs}");
    let body = r#"{"reason": "the README says so"}"#;
    let triggered = send(
        port,
        "POST",
        "/internal/jobs/daily-settlement/trigger",
        body,
    );
    let triggered = triggered.unwrap_or_default();
    assert!(triggered.starts_with("HTTP/1.1 200"), "{triggered}");
    assert!(
        triggered.contains("within one recovery poll"),
        "{triggered}"
    );
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = child.0.try_wait().expect("wait") {
            break exit;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(child);
    admin_sql(&format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)")).await;
    assert!(exit.success(), "{exit:?}");
}
