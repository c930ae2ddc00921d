//! The operations (`slotguard jobs`, `runs`, `retry`, ...) against a real store, run as a process.
//!
//! A [`Fixture`] is a fresh store (an SQLite file, or a PostgreSQL schema of its own) with jobs
//! registered and runs made through the Rust API, as replicas would have left them; each scenario
//! below runs the real binary on it and checks both what it prints and what it changed in the store.
//! `ops_sqlite.rs` and `ops_postgres.rs` run every scenario on their backend.
//!
//! Included by `#[path]` from those two files only. Each uses all of it, but a helper used by one
//! scenario only would be dead code in a file that does not run that scenario.
#![allow(dead_code)]

use slotguard::store::{AdminStoreExt as _, SlotStoreExt as _};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;
use slotguard::store::{
    AdminStore, AuditRecord, Backend, Claim, ClaimRequest, DueSpec, Finish, JobDefinition, Lease,
    ReplicaInfo, RunFilter, RunRecord, RunStatus, SlotKey, Trigger,
};
use slotguard::{ErrorClass, Overlap};

/// Who the binary runs as: `$USER` is the default actor.
pub(crate) const USER: &str = "tester";

/// An hourly job in Asia/Seoul (UTC+9, no DST).
pub(crate) const REPORT: &str = "report";
/// A job of every second, for storms.
pub(crate) const TICKER: &str = "ticker";

/// The columns of `slotguard jobs`.
pub(crate) const JOBS_HEADER: [&str; 10] = [
    "JOB",
    "CRON",
    "ZONE",
    "CALENDAR",
    "GUARD",
    "NEXT",
    "LAST SLOT",
    "LAST STATUS",
    "STATE",
    "NOTE",
];

/// The range the seeded runs lie in.
pub(crate) const FROM: &str = "2026-03-01T00:00:00Z";
pub(crate) const TO: &str = "2026-03-01T06:00:00Z";

/// Parses an RFC 3339 instant.
pub(crate) fn instant(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|err| panic!("{text:?} is not RFC 3339: {err}"))
        .with_timezone(&Utc)
}

/// A store to run the binary on, with a runtime for setting it up and looking into it.
pub(crate) struct Fixture {
    rt: tokio::runtime::Runtime,
    backend: Option<Arc<dyn Backend>>,
    /// `--database-url URL [--schema S]`.
    args: Vec<String>,
    cleanup: Option<Pin<Box<dyn Future<Output = ()>>>>,
    /// Sets every job's first registration back to [`FIRST_SEEN`], in the store's own SQL.
    backdate: Option<Backdate>,
}

/// A statement run on the store once the jobs are registered.
pub(crate) type Backdate = Box<dyn Fn() -> Pin<Box<dyn Future<Output = ()>>>>;

/// When the seeded jobs were first registered: before the seeded runs, so that their slots are
/// history of a job that existed (missed, and backfilled without `--before-first-seen`).
pub(crate) const FIRST_SEEN: &str = "2025-12-01T00:00:00Z";

impl Fixture {
    /// A fixture over `backend`, opened by `open` on `rt`; the binary reaches the store with `args`;
    /// `cleanup` runs when the fixture is dropped (after the backend is closed), pass or fail.
    pub(crate) fn new<B, F>(
        rt: tokio::runtime::Runtime,
        open: F,
        args: Vec<String>,
        cleanup: impl Future<Output = ()> + 'static,
    ) -> Self
    where
        B: Backend,
        F: Future<Output = B>,
    {
        let backend = rt.block_on(open);
        Fixture {
            rt,
            backend: Some(Arc::new(backend)),
            args,
            cleanup: Some(Box::pin(cleanup)),
            backdate: None,
        }
    }

    /// Sets the seeded jobs' first registration back to [`FIRST_SEEN`] with `backdate`.
    pub(crate) fn with_backdate(mut self, backdate: Backdate) -> Self {
        self.backdate = Some(backdate);
        self
    }

    /// A runtime for a fixture.
    pub(crate) fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    fn backend(&self) -> &Arc<dyn Backend> {
        self.backend.as_ref().expect("open backend")
    }

    /// The store arguments, for building a command line by hand.
    pub(crate) fn store_args(&self) -> Vec<String> {
        self.args.clone()
    }

    /// Registers `report` (hourly, Asia/Seoul), `ticker` (every second, UTC) and `nightly`, run by
    /// the live replica `replica-a`, and leaves runs of `report` on 2026-03-01: 01:00Z succeeded,
    /// 02:00Z failed (`boom`), 03:00Z running (held by `replica-a`), 04:00Z failed (`bank API
    /// down`). Slots 00:00Z and 05:00Z have no row.
    pub(crate) fn seed(&self) {
        let backend = self.backend().clone();
        self.rt.block_on(async move {
            backend
                .register_jobs(&[
                    definition(REPORT, "0 * * * *", "Asia/Seoul"),
                    definition(TICKER, "* * * * * *", "UTC"),
                    definition("nightly", "0 2 * * *", "Europe/Berlin"),
                ])
                .await
                .expect("register jobs");
        });
        if let Some(backdate) = &self.backdate {
            self.rt.block_on(backdate());
        }
        self.replica(
            "replica-a",
            &[REPORT, TICKER, "nightly"],
            Duration::from_secs(3600),
        );
        self.finished("2026-03-01T01:00:00Z", Finish::succeeded());
        self.finished(
            "2026-03-01T02:00:00Z",
            Finish::failed(ErrorClass::Transient, "boom", None),
        );
        self.claim(REPORT, "2026-03-01T03:00:00Z");
        self.finished(
            "2026-03-01T04:00:00Z",
            Finish::failed(ErrorClass::Transient, "bank API down", None),
        );
    }

    /// Records replica `id` running `jobs`, gone `gone_after` past its heartbeat.
    pub(crate) fn replica(&self, id: &str, jobs: &[&str], gone_after: Duration) {
        let backend = self.backend().clone();
        let info = ReplicaInfo {
            id: id.to_owned(),
            host: "web-1".to_owned(),
            pid: 4242,
            version: "0.1.0".to_owned(),
            roles: vec!["all".to_owned()],
            jobs: jobs.iter().map(|j| (*j).to_owned()).collect(),
            runs_held: 1,
            gone_after,
        };
        self.rt.block_on(async move {
            backend.record_replica(&info).await.expect("record replica");
        });
    }

    /// Claims a slot of `job` for `replica-a` (it is `running` until finished).
    pub(crate) fn claim(&self, job: &str, slot: &str) -> Lease {
        let backend = self.backend().clone();
        let request = request(job, slot);
        self.rt.block_on(async move {
            match &backend.claim("replica-a", &[request]).await.expect("claim")[..] {
                [Claim::Won(lease)] => lease.clone(),
                other => panic!("claim of {slot}: {other:?}"),
            }
        })
    }

    /// A run of `report` at `slot`, claimed and finished with `finish`.
    pub(crate) fn finished(&self, slot: &str, finish: Finish) {
        let lease = self.claim(REPORT, slot);
        let backend = self.backend().clone();
        self.rt.block_on(async move {
            assert!(
                backend
                    .finish_one("replica-a", &lease, &finish)
                    .await
                    .expect("finish")
            );
        });
    }

    /// The runs of `job`, newest first.
    pub(crate) fn runs(&self, job: &str) -> Vec<RunRecord> {
        let backend = self.backend().clone();
        let filter = RunFilter {
            job: Some(job.to_owned()),
            limit: 10_000,
            ..RunFilter::default()
        };
        self.rt
            .block_on(async move { AdminStore::runs(&*backend, &filter).await.expect("runs") })
    }

    /// The run of `report` at `slot`.
    pub(crate) fn run(&self, slot: &str) -> RunRecord {
        let at = instant(slot);
        self.runs(REPORT)
            .into_iter()
            .find(|r| r.key.scheduled_at == at)
            .unwrap_or_else(|| panic!("no run at {slot}"))
    }

    /// The whole audit trail, newest first.
    pub(crate) fn audit(&self) -> Vec<AuditRecord> {
        let backend = self.backend().clone();
        self.rt
            .block_on(async move { backend.audit_log(None, 1_000).await.expect("audit") })
    }

    /// Claims the due runs of `job` (manual, retried) as `replica-b` and finishes them with
    /// `finish`, as a replica running the job would; returns how many.
    pub(crate) fn run_due(&self, job: &str, finish: &Finish) -> usize {
        let backend = self.backend().clone();
        let spec = DueSpec::new(job, 10).with_overlap(Overlap::Allow);
        self.rt.block_on(async move {
            let due = backend
                .claim_due("replica-b", &[spec], 10)
                .await
                .expect("claim due");
            for claim in &due {
                assert!(
                    backend
                        .finish_one("replica-b", &claim.lease, finish)
                        .await
                        .expect("finish")
                );
            }
            due.len()
        })
    }

    /// Whether `job` is paused in the store.
    pub(crate) fn paused(&self, job: &str) -> bool {
        let backend = self.backend().clone();
        self.rt.block_on(async move {
            backend
                .jobs()
                .await
                .expect("jobs")
                .into_iter()
                .find(|j| j.definition.name == job)
                .expect("registered")
                .paused
        })
    }

    /// Runs `slotguard ARGS --database-url ...` as user `tester`, outside any `SLOTGUARD_*`
    /// environment.
    pub(crate) fn slotguard(&self, args: &[&str]) -> Out {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(self.args.iter().map(String::as_str));
        run(&all, &[])
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(backend) = self.backend.take() {
            let _guard = self.rt.enter();
            drop(backend);
        }
        if let Some(cleanup) = self.cleanup.take() {
            self.rt.block_on(cleanup);
        }
    }
}

fn definition(name: &str, cron: &str, zone: &str) -> JobDefinition {
    JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: zone.to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint: 0x5107_6a4d,
        calendar: None,
    }
}

/// A scheduled slot of `job`, as a replica claims it (wall time in Asia/Seoul for `report`).
fn request(job: &str, slot: &str) -> ClaimRequest {
    let at = instant(slot);
    let (zone, offset) = if job == REPORT {
        ("Asia/Seoul", chrono::Duration::hours(9))
    } else {
        ("UTC", chrono::Duration::zero())
    };
    let wall = at.naive_utc() + offset;
    ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: at,
            partition: String::new(),
        },
        trigger: Trigger::Schedule,
        zone: zone.to_owned(),
        wall,
        business_date: wall.date(),
        fingerprint: 0x5107_6a4d,
        stale_after: Duration::from_secs(3600),
        overlap: Overlap::Allow,
        calendar: None,
        ahead: false,
        defer_if_contended: false,
    }
}

/// What the binary did.
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) args: Vec<String>,
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) elapsed: Duration,
}

impl Out {
    /// Asserts success with nothing on stderr; returns stdout.
    #[track_caller]
    pub(crate) fn ok(&self) -> &str {
        assert_eq!(self.code, Some(0), "{self:#?}");
        assert_eq!(self.stderr, "", "{self:#?}");
        &self.stdout
    }

    /// Asserts exit `code` with nothing on stdout and one line `error: ...` on stderr; returns the
    /// message after `error: `.
    #[track_caller]
    pub(crate) fn fails(&self, code: i32) -> &str {
        assert_eq!(self.code, Some(code), "{self:#?}");
        assert_eq!(self.stdout, "", "{self:#?}");
        let message = self
            .stderr
            .strip_prefix("error: ")
            .and_then(|m| m.strip_suffix('\n'))
            .unwrap_or_else(|| panic!("not one `error:` line: {self:#?}"));
        assert!(!message.contains('\n'), "more than one line: {self:#?}");
        assert!(!message.contains("panicked"), "{self:#?}");
        message
    }

    /// The lines of stdout, one JSON value each.
    #[track_caller]
    pub(crate) fn json(&self) -> Vec<Value> {
        self.ok()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
            .collect()
    }
}

/// Runs the binary with `args` and the environment changes `env` (`None` removes a variable).
pub(crate) fn run(args: &[&str], env: &[(&str, Option<&str>)]) -> Out {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slotguard"));
    command
        .args(args)
        .env_remove("SLOTGUARD_DATABASE_URL")
        .env_remove("SLOTGUARD_SCHEMA")
        .env("USER", USER)
        .stdin(Stdio::null());
    for (key, value) in env {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    let started = Instant::now();
    let output = command.output().expect("run slotguard");
    Out {
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        elapsed: started.elapsed(),
    }
}

/// A table as the binary prints it: the header's names, and each row by name. Columns are found
/// from the header (names are separated by two spaces or more), so cells may hold single spaces.
pub(crate) fn table(text: &str) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let mut lines = text.lines();
    let header = lines.next().expect("a header line");
    let mut columns: Vec<(usize, String)> = Vec::new();
    let chars: Vec<char> = header.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == ' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && !(chars[i] == ' ' && chars.get(i + 1).is_none_or(|c| *c == ' ')) {
            i += 1;
        }
        columns.push((start, chars[start..i].iter().collect()));
    }
    let rows = lines
        .map(|line| {
            let chars: Vec<char> = line.chars().collect();
            columns
                .iter()
                .enumerate()
                .map(|(n, (start, name))| {
                    let end = columns.get(n + 1).map_or(chars.len(), |c| c.0);
                    let cell: String = chars
                        .get(*start..end.min(chars.len()))
                        .unwrap_or_default()
                        .iter()
                        .collect();
                    (name.clone(), cell.trim().to_owned())
                })
                .collect()
        })
        .collect();
    (columns.into_iter().map(|c| c.1).collect(), rows)
}

/// The rows of a table that must have `header`.
#[track_caller]
pub(crate) fn rows(text: &str, header: &[&str]) -> Vec<HashMap<String, String>> {
    let (names, rows) = table(text);
    assert_eq!(names, header, "{text}");
    rows
}

// Scenarios, each on a fresh fixture, by what they exercise.
#[path = "ops/changes.rs"]
mod changes;
#[path = "ops/holidays.rs"]
mod holidays;
#[path = "ops/input.rs"]
mod input;
#[path = "ops/listings.rs"]
mod listings;
#[path = "ops/schedules.rs"]
mod schedules;

pub(crate) use changes::*;
pub(crate) use holidays::*;
pub(crate) use input::*;
pub(crate) use listings::*;
pub(crate) use schedules::*;
