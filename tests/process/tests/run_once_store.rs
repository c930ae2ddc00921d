//! Run-once pods whose store cannot be reached exit 4 ("the store could not be asked", retried by
//! Kubernetes and systemd), never 2 (which `podFailurePolicy: FailJob` turns into a failed Job) nor
//! a panic's 101: PostgreSQL down (a port where nothing listens) and an SQLite file that cannot be
//! opened. The pods are `sg-once`, the run-once program of docs/workers.md, as real processes.

use std::net::TcpListener;
use std::process::{Command, Output};

use chrono::{Timelike, Utc};

/// A `sg-once` pod for the slot of this minute, on the store at `url`.
fn pod(url: &str) -> Output {
    let now = Utc::now();
    let slot = now
        .with_second(0)
        .and_then(|t| t.with_nanosecond(0))
        .expect("a minute");
    Command::new(env!("CARGO_BIN_EXE_sg-once"))
        .env("DATABASE_URL", url)
        .env("SLOTGUARD_SLOT", slot.to_rfc3339())
        .env("RUST_LOG", "off")
        .output()
        .expect("sg-once starts")
}

fn assert_exit(out: &Output, code: i32, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what}: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
}

/// A local port where nothing listens: PostgreSQL stopped.
fn stopped_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

#[test]
fn a_pod_against_a_stopped_postgres_exits_4() {
    let url = format!("postgres://postgres@127.0.0.1:{}/test", stopped_port());
    let out = pod(&url);
    assert_exit(&out, 4, "stopped PostgreSQL");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("PostgreSQL"), "{stderr}");
}

#[test]
fn a_pod_against_an_sqlite_file_that_cannot_be_opened_exits_4() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // A path under a regular file cannot be created, whoever runs the test (root included).
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, "x").expect("write a file");
    let url = format!("sqlite:{}", file.join("slots.db").display());
    let out = pod(&url);
    assert_exit(&out, 4, "unopenable SQLite path");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("slots.db"), "{stderr}");
}

#[test]
fn a_pod_with_no_store_named_is_bad_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_sg-once"))
        .env_remove("DATABASE_URL")
        .output()
        .expect("sg-once starts");
    assert_exit(&out, 2, "no DATABASE_URL");
}
