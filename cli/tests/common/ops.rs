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
pub(crate) const JOBS_HEADER: [&str; 9] = [
    "JOB",
    "CRON",
    "ZONE",
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
            match backend.claim("replica-a", &[request]).await.expect("claim")[..] {
                [Claim::Won(lease)] => lease,
                ref other => panic!("claim of {slot}: {other:?}"),
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

// Scenarios, each on a fresh fixture.

/// `runs`: a table, newest slot first, one line per run; `--status` filters; `--json` has it all.
pub(crate) fn runs_lists_and_filters(fx: &Fixture) {
    fx.seed();
    let out = fx.slotguard(&["runs", REPORT]);
    assert_eq!(
        out.ok(),
        "\
SLOT                  PARTITION  STATUS     ATTEMPT  TRIGGER   OWNER      MESSAGE
2026-03-01T04:00:00Z  -          failed     1        schedule  replica-a  bank API down
2026-03-01T03:00:00Z  -          running    1        schedule  replica-a  -
2026-03-01T02:00:00Z  -          failed     1        schedule  replica-a  boom
2026-03-01T01:00:00Z  -          succeeded  1        schedule  replica-a  -
"
    );

    let failed = fx.slotguard(&["runs", REPORT, "--status", "failed"]);
    let failed = rows(
        failed.ok(),
        &[
            "SLOT",
            "PARTITION",
            "STATUS",
            "ATTEMPT",
            "TRIGGER",
            "OWNER",
            "MESSAGE",
        ],
    );
    let slots: Vec<&str> = failed.iter().map(|r| r["SLOT"].as_str()).collect();
    assert_eq!(slots, ["2026-03-01T04:00:00Z", "2026-03-01T02:00:00Z"]);
    assert!(failed.iter().all(|r| r["STATUS"] == "failed"));

    // A range and a limit.
    let some = fx.slotguard(&[
        "runs",
        REPORT,
        "--from",
        "2026-03-01T02:00:00Z",
        "--to",
        "2026-03-01T04:00:00Z",
        "--limit",
        "1",
    ]);
    let some = table(some.ok()).1;
    assert_eq!(some.len(), 1);
    assert_eq!(some[0]["SLOT"], "2026-03-01T03:00:00Z");

    // No run in that status: the header alone.
    let none = fx.slotguard(&["runs", REPORT, "--status", "dead"]);
    assert_eq!(table(none.ok()).1.len(), 0);

    let json = fx.slotguard(&["runs", REPORT, "--json"]).json();
    assert_eq!(json.len(), 4);
    assert_eq!(json[0]["job"], REPORT);
    assert_eq!(json[0]["scheduledAt"], "2026-03-01T04:00:00Z");
    assert_eq!(json[0]["status"], "failed");
    assert_eq!(json[0]["errorMessage"], "bank API down");
    assert_eq!(json[0]["wallTime"], "2026-03-01T13:00:00");
    assert_eq!(json[0]["businessDate"], "2026-03-01");
    assert_eq!(json[0]["trigger"], "schedule");
    assert_eq!(json[0]["fingerprint"], "0000000051076a4d");
    assert_eq!(json[0]["attempts"][0]["owner"], "replica-a");
    assert_eq!(json[0]["attempts"][0]["status"], "failed");
    assert_eq!(json[1]["status"], "running");
    assert_eq!(json[1]["finishedAt"], Value::Null);

    // Bad filters are bad input.
    for args in [
        &["runs", REPORT, "--status", "broken"][..],
        &["runs", REPORT, "--limit", "0"],
        &["runs", REPORT, "--limit", "1001"],
        &["runs", REPORT, "--limit", "-5"],
        &["runs", REPORT, "--from", "yesterday"],
        &[
            "runs",
            REPORT,
            "--from",
            "2026-03-02T00:00:00Z",
            "--to",
            "2026-03-01T00:00:00Z",
        ],
    ] {
        fx.slotguard(args).fails(2);
    }
    let unknown = fx.slotguard(&["runs", "no-such-job"]);
    assert_eq!(
        unknown.fails(3),
        "unknown job `no-such-job`: no scheduler has registered it"
    );
}

/// `missed`: exactly the slots of the schedule without a row.
pub(crate) fn missed_lists_slots_without_rows(fx: &Fixture) {
    fx.seed();
    let out = fx.slotguard(&["missed", REPORT, "--from", FROM, "--to", TO]);
    // 00:00Z and 05:00Z have no row; 06:00Z is excluded. Seoul is UTC+9.
    assert_eq!(
        out.ok(),
        "\
SLOT                  WALL TIME            BUSINESS DATE
2026-03-01T00:00:00Z  2026-03-01 09:00:00  2026-03-01
2026-03-01T05:00:00Z  2026-03-01 14:00:00  2026-03-01
2 missed slot(s)
"
    );
    let json = fx
        .slotguard(&["missed", REPORT, "--from", FROM, "--to", TO, "--json"])
        .json();
    assert_eq!(
        json,
        [
            serde_json::json!({"scheduledAt": "2026-03-01T00:00:00Z", "wallTime": "2026-03-01T09:00:00", "businessDate": "2026-03-01"}),
            serde_json::json!({"scheduledAt": "2026-03-01T05:00:00Z", "wallTime": "2026-03-01T14:00:00", "businessDate": "2026-03-01"}),
        ]
    );
    // Offsets are honoured: 10:00+09:00 is 01:00Z; 01:00Z..05:00Z has no missed slot.
    let none = fx.slotguard(&[
        "missed",
        REPORT,
        "--from",
        "2026-03-01T10:00:00+09:00",
        "--to",
        "2026-03-01T05:00:00Z",
    ]);
    assert_eq!(
        none.ok(),
        "SLOT  WALL TIME  BUSINESS DATE\n0 missed slot(s)\n"
    );
    // A range in the future; before 1970; a million slots, listed a page at a time.
    fx.slotguard(&["missed", REPORT, "--from", "2999-01-01T00:00:00Z"])
        .fails(2);
    let year_zero = fx.slotguard(&["missed", REPORT, "--from", "0000-01-01T00:00:00Z"]);
    assert!(year_zero.fails(2).contains("before 1970"), "{year_zero:?}");
    let storm = [
        "missed",
        TICKER,
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-12T13:46:40Z",
        "--limit",
        "3",
    ];
    assert_eq!(
        fx.slotguard(&storm).ok(),
        "\
SLOT                  WALL TIME            BUSINESS DATE
2026-01-01T00:00:00Z  2026-01-01 00:00:00  2026-01-01
2026-01-01T00:00:01Z  2026-01-01 00:00:01  2026-01-01
2026-01-01T00:00:02Z  2026-01-01 00:00:02  2026-01-01
3 missed slot(s)
more: ask again with --from 2026-01-01T00:00:03Z
"
    );
    let json = fx.slotguard(&[&storm[..], &["--json"]].concat()).json();
    assert_eq!(json.len(), 4);
    assert_eq!(json[3], serde_json::json!({"next": "2026-01-01T00:00:03Z"}));
    fx.slotguard(&["missed", "nope", "--from", FROM]).fails(3);
}

/// `missed` without a job reads every job: a row per slot with its job, a page at a time, and the
/// cursor of the next page.
pub(crate) fn missed_without_a_job_reads_every_job(fx: &Fixture) {
    fx.seed();
    let (from, to) = ("2026-03-01T00:59:58Z", "2026-03-01T01:00:01Z");
    let out = fx.slotguard(&["missed", "--from", from, "--to", to]);
    // `report` ran at 01:00Z; `nightly` is 02:00 in Berlin (UTC+1), 01:00Z.
    assert_eq!(
        out.ok(),
        "\
JOB      SLOT                  WALL TIME            BUSINESS DATE
nightly  2026-03-01T01:00:00Z  2026-03-01 02:00:00  2026-03-01
ticker   2026-03-01T00:59:58Z  2026-03-01 00:59:58  2026-03-01
ticker   2026-03-01T00:59:59Z  2026-03-01 00:59:59  2026-03-01
ticker   2026-03-01T01:00:00Z  2026-03-01 01:00:00  2026-03-01
4 missed slot(s) in 2 of 3 job(s)
"
    );
    let json = fx
        .slotguard(&["missed", "--from", from, "--to", to, "--json"])
        .json();
    assert_eq!(json.len(), 4);
    assert_eq!(
        json[0],
        serde_json::json!({"job": "nightly", "scheduledAt": "2026-03-01T01:00:00Z", "wallTime": "2026-03-01T02:00:00", "businessDate": "2026-03-01"})
    );
    let storm = [
        "missed",
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-12T13:46:40Z",
    ];
    // Twelve nights, then the first 38 hours of `report`: a page of 50, and where to go on.
    let answer = fx.slotguard(&storm);
    let text = answer.ok();
    assert!(
        text.contains("50 missed slot(s) in 2 of 2 job(s)"),
        "{text}"
    );
    assert!(
        text.ends_with("more: ask again with --cursor 'report:2026-01-02T14:00:00Z'\n"),
        "{text}"
    );
    let json = fx.slotguard(&[&storm[..], &["--json"]].concat()).json();
    assert_eq!(json.len(), 51);
    let next = json[50]["next"].as_str().expect("a next cursor").to_owned();
    let page = fx
        .slotguard(&[&storm[..], &["--json", "--cursor", &next]].concat())
        .json();
    assert_eq!(page[0]["job"], REPORT);
    assert_eq!(page[0]["scheduledAt"], "2026-01-02T14:00:00Z");
    fx.slotguard(&[&storm[..], &["--cursor", "no-colon"]].concat())
        .fails(2);
    fx.slotguard(&["missed", "--from", to, "--to", from])
        .fails(2);
}

/// `retry`: a failed run becomes pending, audited with actor and reason; refusals say why.
pub(crate) fn retry_makes_a_failed_run_pending(fx: &Fixture) {
    fx.seed();
    let slot = "2026-03-01T02:00:00Z";
    let out = fx.slotguard(&["retry", REPORT, slot, "--reason", "bank API was down"]);
    assert_eq!(
        out.ok(),
        "retry accepted: report slot 2026-03-01T02:00:00Z is pending; a replica running the job starts attempt 2 within one recovery poll\n"
    );
    let run = fx.run(slot);
    assert_eq!(run.status, RunStatus::Pending);
    assert_eq!(run.attempt, 1);
    let audit = fx.audit();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].job, REPORT);
    assert_eq!(audit[0].entry.action, "retry");
    assert_eq!(audit[0].entry.actor, USER);
    assert_eq!(audit[0].entry.reason, "bank API was down");
    assert_eq!(audit[0].scheduled_at, Some(instant(slot)));
    assert_eq!(audit[0].run_id, Some(run.id));

    // Again: an attempt is already waiting.
    let again = fx.slotguard(&["retry", REPORT, slot, "--reason", "twice"]);
    assert_eq!(
        again.fails(4),
        "retry refused for job `report` slot 2026-03-01T02:00:00Z: the run is pending; an attempt is already waiting"
    );
    // Running, and succeeded.
    let running = fx.slotguard(&["retry", REPORT, "2026-03-01T03:00:00Z", "--reason", "r"]);
    assert!(
        running
            .fails(4)
            .contains("the run is running; wait for it to end, or cancel it first"),
        "{running:?}"
    );
    let succeeded = fx.slotguard(&["retry", REPORT, "2026-03-01T01:00:00Z", "--reason", "r"]);
    assert!(
        succeeded.fails(4).contains("the run is succeeded"),
        "{succeeded:?}"
    );
    assert_eq!(fx.run("2026-03-01T03:00:00Z").status, RunStatus::Running);

    // The slot may be written with any offset; the actor may be named. The job is paused now, so the
    // attempt waits for the resume, and the answer says so.
    fx.slotguard(&["pause", REPORT, "--reason", "bank maintenance"])
        .ok();
    let other = fx.slotguard(&[
        "retry",
        REPORT,
        "2026-03-01T13:00:00+09:00",
        "--reason",
        "upstream fixed",
        "--actor",
        "alice@example.com",
    ]);
    assert_eq!(
        other.ok(),
        "retry accepted: report slot 2026-03-01T04:00:00Z is pending; the job is paused, so attempt 2 waits and starts after `slotguard resume report`\n"
    );
    assert_eq!(fx.run("2026-03-01T04:00:00Z").status, RunStatus::Pending);
    assert_eq!(fx.audit()[0].entry.actor, "alice@example.com");

    // Unknown job, unknown slot, a slot that is not an instant.
    let unknown = fx.slotguard(&["retry", "nope", slot, "--reason", "r"]);
    assert_eq!(
        unknown.fails(3),
        "unknown job `nope`: no scheduler has registered it"
    );
    let no_slot = fx.slotguard(&["retry", REPORT, "2026-03-01T00:00:00Z", "--reason", "r"]);
    assert_eq!(
        no_slot.fails(3),
        "job `report` has no run for slot 2026-03-01T00:00:00Z"
    );
    for bad in ["2026-03-01", "2026-02-30T00:00:00Z", "yesterday", ""] {
        let out = fx.slotguard(&["retry", REPORT, bad, "--reason", "r"]);
        assert!(out.fails(2).starts_with("SLOT: `"), "{bad:?} gave {out:?}");
    }
    // No --reason: clap's own usage error.
    let missing = fx.slotguard(&["retry", REPORT, slot]);
    assert_eq!(missing.code, Some(2));
    assert!(missing.stderr.contains("--reason"), "{missing:?}");

    assert_eq!(
        fx.audit().len(),
        3,
        "two retries and a pause; refusals are not audited"
    );
}

/// `pause` and `resume`, as `jobs` shows them.
pub(crate) fn pause_and_resume(fx: &Fixture) {
    fx.seed();
    let header = JOBS_HEADER;
    let jobs = fx.slotguard(&["jobs"]);
    let jobs = rows(jobs.ok(), &header);
    let names: Vec<&str> = jobs.iter().map(|j| j["JOB"].as_str()).collect();
    assert_eq!(names, ["nightly", REPORT, TICKER]);
    let report = &jobs[1];
    assert_eq!(report["CRON"], "0 * * * *");
    assert_eq!(report["ZONE"], "Asia/Seoul");
    assert_eq!(report["GUARD"], "slot");
    assert_eq!(report["LAST SLOT"], "2026-03-01T04:00:00Z");
    assert_eq!(report["LAST STATUS"], "failed");
    assert_eq!(report["STATE"], "active");
    assert_eq!(report["NOTE"], "-");
    let next = instant(&report["NEXT"]);
    assert!(next > Utc::now() && next <= Utc::now() + chrono::Duration::hours(1));
    assert_eq!(jobs[0]["LAST SLOT"], "-");
    assert_eq!(jobs[0]["LAST STATUS"], "-");

    let out = fx.slotguard(&["pause", REPORT, "--reason", "bank maintenance"]);
    assert_eq!(
        out.ok(),
        "paused: report (by tester); every replica sees it within one recovery poll\n"
    );
    assert!(fx.paused(REPORT));
    let jobs = fx.slotguard(&["jobs"]);
    let jobs = rows(jobs.ok(), &header);
    assert_eq!(jobs[1]["STATE"], "paused");
    assert_eq!(jobs[1]["NOTE"], "by tester: bank maintenance");
    assert_eq!(jobs[0]["STATE"], "active");

    let json = fx.slotguard(&["jobs", "--json"]).json();
    assert_eq!(json.len(), 3);
    assert_eq!(json[1]["name"], REPORT);
    assert_eq!(json[1]["paused"], true);
    assert_eq!(json[1]["pausedBy"], USER);
    assert_eq!(json[1]["pausedReason"], "bank maintenance");
    assert_eq!(json[1]["lastRun"]["status"], "failed");
    assert_eq!(json[1]["nextSlots"].as_array().map(Vec::len), Some(3));
    assert_eq!(json[0]["lastRun"], Value::Null);

    let out = fx.slotguard(&["resume", REPORT, "--reason", "done", "--actor", "bob"]);
    assert_eq!(
        out.ok(),
        "resumed: report (by bob); every replica sees it within one recovery poll\n"
    );
    assert!(!fx.paused(REPORT));
    let jobs = fx.slotguard(&["jobs"]);
    assert_eq!(rows(jobs.ok(), &header)[1]["STATE"], "active");

    fx.slotguard(&["pause", "nope", "--reason", "r"]).fails(3);
    let actions: Vec<String> = fx.audit().into_iter().map(|a| a.entry.action).collect();
    assert_eq!(actions, ["resume", "pause"]);
}

/// `replicas` lists the processes, alive or gone; `jobs` calls a job `inactive` once every
/// replica that ran it is gone.
pub(crate) fn replicas_and_inactive_jobs(fx: &Fixture) {
    fx.seed();
    fx.replica("replica-b", &[TICKER, "retired"], Duration::from_millis(1));
    std::thread::sleep(Duration::from_millis(50));
    let header = [
        "REPLICA",
        "STATE",
        "HOST",
        "PID",
        "VERSION",
        "ROLES",
        "RUNS",
        "STARTED",
        "HEARTBEAT",
        "JOBS",
    ];
    let out = fx.slotguard(&["replicas"]);
    let listed = rows(out.ok(), &header);
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["REPLICA"], "replica-a");
    assert_eq!(listed[0]["STATE"], "alive");
    assert_eq!(listed[0]["HOST"], "web-1");
    assert_eq!(listed[0]["PID"], "4242");
    assert_eq!(listed[0]["ROLES"], "all");
    assert_eq!(listed[0]["RUNS"], "1");
    assert_eq!(listed[0]["JOBS"], "report,ticker,nightly");
    assert_eq!(listed[1]["REPLICA"], "replica-b");
    assert_eq!(listed[1]["STATE"], "gone");

    let json = fx.slotguard(&["replicas", "--json"]).json();
    assert_eq!(json.len(), 2);
    assert_eq!(json[0]["id"], "replica-a");
    assert_eq!(json[0]["alive"], true);
    assert_eq!(json[0]["roles"], serde_json::json!(["all"]));
    assert_eq!(json[0]["goneAfterMs"], 3_600_000);
    assert_eq!(json[1]["alive"], false);

    // `nightly` is run by replica-a only: active. Once replica-a is gone too, it is inactive.
    let states = |fx: &Fixture| -> Vec<(String, String)> {
        rows(fx.slotguard(&["jobs"]).ok(), &JOBS_HEADER)
            .into_iter()
            .map(|r| (r["JOB"].clone(), r["STATE"].clone()))
            .collect()
    };
    let pair = |job: &str, state: &str| (job.to_owned(), state.to_owned());
    assert_eq!(
        states(fx),
        [
            pair("nightly", "active"),
            pair(REPORT, "active"),
            pair(TICKER, "active")
        ]
    );
    fx.replica(
        "replica-a",
        &[REPORT, TICKER, "nightly"],
        Duration::from_millis(1),
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        states(fx),
        [
            pair("nightly", "inactive"),
            pair(REPORT, "inactive"),
            pair(TICKER, "inactive")
        ]
    );
    let json = fx.slotguard(&["jobs", "--json"]).json();
    assert_eq!(json[0]["active"], false);
    assert_eq!(json[0]["replicas"], serde_json::json!([]));
}

/// `trigger`: a manual run at a millisecond slot, pending.
pub(crate) fn trigger_creates_a_manual_run(fx: &Fixture) {
    fx.seed();
    let before = Utc::now();
    let out = fx.slotguard(&["trigger", REPORT, "--reason", "month-end rerun"]);
    let text = out.ok();
    let slot = text
        .strip_prefix("triggered: report slot ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{text:?}"));
    let at = instant(slot);
    assert!(
        at >= before - chrono::Duration::seconds(1) && at <= Utc::now(),
        "{text}"
    );
    assert_ne!(at.timestamp_subsec_millis(), 0, "{text}");
    let run = fx.run(slot);
    assert_eq!(run.trigger, Trigger::Manual);
    assert_eq!(run.status, RunStatus::Pending);
    assert!(
        text.contains(&format!("(manual, run {})", run.id)),
        "{text}"
    );
    let audit = fx.audit();
    assert_eq!(audit[0].entry.action, "trigger");
    assert_eq!(audit[0].entry.reason, "month-end rerun");

    // It is listed, and can be cancelled by the slot printed.
    let runs = fx.slotguard(&["runs", REPORT, "--limit", "1"]);
    let runs = table(runs.ok()).1;
    assert_eq!(runs[0]["SLOT"], slot);
    assert_eq!(runs[0]["TRIGGER"], "manual");
    assert_eq!(runs[0]["STATUS"], "pending");
    fx.slotguard(&["cancel", REPORT, slot, "--reason", "not needed"])
        .ok();
    assert_eq!(fx.run(slot).status, RunStatus::Failed);

    fx.slotguard(&["trigger", "nope", "--reason", "r"]).fails(3);
}

/// `backfill`: a dry run lists and changes nothing; `--execute` creates; a storm is refused.
pub(crate) fn backfill_dry_run_then_execute(fx: &Fixture) {
    fx.seed();
    let dry = fx.slotguard(&[
        "backfill", REPORT, "--from", FROM, "--to", TO, "--reason", "outage",
    ]);
    assert_eq!(
        dry.ok(),
        "\
SLOT                  WALL TIME            BUSINESS DATE
2026-03-01T00:00:00Z  2026-03-01 09:00:00  2026-03-01
2026-03-01T05:00:00Z  2026-03-01 14:00:00  2026-03-01
dry run: 2 run(s) would be created; add --execute to create them
"
    );
    // Every slot of the range but the two above has a row already.
    let had_rows = fx.runs(REPORT).len();
    assert_eq!(had_rows, 4);
    assert!(fx.audit().is_empty());

    let done = fx.slotguard(&[
        "backfill",
        REPORT,
        "--from",
        FROM,
        "--to",
        TO,
        "--reason",
        "outage",
        "--execute",
        "--per-second",
        "2",
    ]);
    let text = done.ok();
    assert!(
        text.contains(&format!(
            "created 2 run(s) ({had_rows} existed already), due at 2/s, the last at "
        )),
        "{text}"
    );
    let runs = fx.runs(REPORT);
    assert_eq!(runs.len(), 6);
    for slot in ["2026-03-01T00:00:00Z", "2026-03-01T05:00:00Z"] {
        let run = fx.run(slot);
        assert_eq!(run.trigger, Trigger::Backfill);
        assert_eq!(run.status, RunStatus::Pending);
    }
    assert_eq!(fx.audit().len(), 2, "one audit record per created run");
    assert!(fx.audit().iter().all(|a| a.entry.action == "backfill"));

    // Nothing is missing any more.
    let again = fx.slotguard(&[
        "backfill",
        REPORT,
        "--from",
        FROM,
        "--to",
        TO,
        "--reason",
        "outage",
        "--execute",
    ]);
    assert_eq!(
        again.ok(),
        format!(
            "SLOT  WALL TIME  BUSINESS DATE\ncreated 0 run(s) ({} existed already)\n",
            had_rows + 2
        )
    );

    // A million slots of a per-second job: refused before anything is created.
    let storm = fx.slotguard(&[
        "backfill",
        TICKER,
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-12T13:46:40Z",
        "--reason",
        "storm",
        "--execute",
    ]);
    assert_eq!(
        storm.fails(2),
        "invalid range: it holds more than 100000 slots of the schedule; narrow it"
    );
    // 1,001 missing slots: more than one backfill may create.
    let split = fx.slotguard(&[
        "backfill",
        TICKER,
        "--from",
        "2026-01-01T00:00:00Z",
        "--to",
        "2026-01-01T00:16:41Z",
        "--reason",
        "storm",
        "--execute",
    ]);
    assert!(split.fails(2).contains("split the range"), "{split:?}");
    assert!(fx.runs(TICKER).is_empty());
    assert_eq!(fx.audit().len(), 2);

    for per_second in ["0", "-1", "NaN", "inf", "fast"] {
        fx.slotguard(&[
            "backfill",
            REPORT,
            "--from",
            FROM,
            "--to",
            TO,
            "--reason",
            "r",
            "--per-second",
            per_second,
        ])
        .fails(2);
    }
}

/// `cancel`: a running run ends failed with the actor and reason; a finished one is refused.
pub(crate) fn cancel_a_running_run(fx: &Fixture) {
    fx.seed();
    let slot = "2026-03-01T03:00:00Z";
    let out = fx.slotguard(&["cancel", REPORT, slot, "--reason", "stuck on a lock"]);
    assert_eq!(
        out.ok(),
        "cancelled: report slot 2026-03-01T03:00:00Z was running and is failed (cancelled by tester: stuck on a lock); the replica running it is told at its next heartbeat, and its outcome is refused\n"
    );
    let run = fx.run(slot);
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error_class.as_deref(), Some("permanent"));
    assert_eq!(
        run.error_message.as_deref(),
        Some("cancelled by tester: stuck on a lock")
    );
    let again = fx.slotguard(&["cancel", REPORT, slot, "--reason", "again"]);
    assert!(
        again
            .fails(4)
            .contains("the run is failed; only running or pending runs can be cancelled"),
        "{again:?}"
    );
    fx.slotguard(&["cancel", REPORT, "2026-03-01T00:00:00Z", "--reason", "r"])
        .fails(3);
    // A cancelled run can be retried.
    fx.slotguard(&["retry", REPORT, slot, "--reason", "lock released"])
        .ok();
    assert_eq!(fx.run(slot).status, RunStatus::Pending);
}

/// `audit`: every change, newest first, with actor and reason.
pub(crate) fn audit_lists_changes(fx: &Fixture) {
    fx.seed();
    fx.slotguard(&["retry", REPORT, "2026-03-01T02:00:00Z", "--reason", "first"])
        .ok();
    fx.slotguard(&["pause", "nightly", "--reason", "second", "--actor", "alice"])
        .ok();
    fx.slotguard(&[
        "cancel",
        REPORT,
        "2026-03-01T03:00:00Z",
        "--reason",
        "third\nwith a second line",
    ])
    .ok();

    let out = fx.slotguard(&["audit"]);
    let entries = rows(
        out.ok(),
        &["AT", "JOB", "ACTION", "SLOT", "ACTOR", "REASON"],
    );
    let summary: Vec<[&str; 5]> = entries
        .iter()
        .map(|e| {
            [
                e["JOB"].as_str(),
                e["ACTION"].as_str(),
                e["SLOT"].as_str(),
                e["ACTOR"].as_str(),
                e["REASON"].as_str(),
            ]
        })
        .collect();
    assert_eq!(
        summary,
        [
            [
                REPORT,
                "cancel",
                "2026-03-01T03:00:00Z",
                USER,
                // Escaped: a stored newline does not break the table.
                "third\\nwith a second line"
            ],
            ["nightly", "pause", "-", "alice", "second"],
            [REPORT, "retry", "2026-03-01T02:00:00Z", USER, "first"],
        ]
    );
    for entry in &entries {
        let at = instant(&entry["AT"]);
        assert!((Utc::now() - at).num_minutes().abs() < 10, "{entry:?}");
    }

    let only = fx.slotguard(&["audit", "nightly"]);
    assert_eq!(table(only.ok()).1.len(), 1);
    // A full page says how to ask for the next, which holds the older entries.
    let one = fx.slotguard(&["audit", "--limit", "1"]);
    let (page, more) = one
        .ok()
        .rsplit_once("more: ask again with --before ")
        .expect("a full page says how to go on");
    assert_eq!(table(page).1.len(), 1);
    let older = fx.slotguard(&["audit", "--before", more.trim()]);
    let older = rows(
        older.ok(),
        &["AT", "JOB", "ACTION", "SLOT", "ACTOR", "REASON"],
    );
    let actions: Vec<&str> = older.iter().map(|e| e["ACTION"].as_str()).collect();
    assert_eq!(actions, ["pause", "retry"]);
    let json = fx.slotguard(&["audit", REPORT, "--json"]).json();
    assert_eq!(json.len(), 2);
    assert_eq!(json[0]["action"], "cancel");
    assert_eq!(json[0]["reason"], "third\nwith a second line");
    assert_eq!(json[1]["scheduledAt"], "2026-03-01T02:00:00Z");
    fx.slotguard(&["audit", "nope"]).fails(3);
    fx.slotguard(&["audit", "--limit", "0"]).fails(2);
}

/// `backfill` of year 0 is refused, naming the first slot accepted, with or without
/// `--before-first-seen`; a range before the job was first registered needs that flag.
pub(crate) fn backfill_refuses_year_zero_and_history_unless_asked(fx: &Fixture) {
    fx.seed();
    let year_zero = [
        "backfill",
        REPORT,
        "--from",
        "0000-01-01T00:00:00Z",
        "--to",
        "0000-01-05T00:00:00Z",
        "--per-second",
        "1000",
        "--reason",
        "x",
        "--execute",
    ];
    for flag in [&[][..], &["--before-first-seen"][..]] {
        let refused = fx.slotguard(&[&year_zero[..], flag].concat());
        assert_eq!(
            refused.fails(2),
            "invalid from: 0000-01-01T00:00:00Z is before 1970-01-01T00:00:00Z, and instants before \
             1970 are refused; the first slot that would be accepted is 1970-01-01T00:00:00Z"
        );
    }
    // The seeded jobs were first registered on 2025-12-01: November is history from before then.
    let history = [
        "backfill",
        REPORT,
        "--from",
        "2025-11-30T22:00:00Z",
        "--to",
        "2025-12-01T00:00:00Z",
        "--reason",
        "history",
        "--execute",
    ];
    let refused = fx.slotguard(&history).fails(2).to_owned();
    assert!(refused.contains("--before-first-seen"), "{refused}");
    assert!(
        refused.contains("the first slot that would be accepted is 2025-12-01T00:00:00Z"),
        "{refused}"
    );
    let done = fx.slotguard(&[&history[..], &["--before-first-seen"]].concat());
    assert!(done.ok().contains("created 2 run(s)"), "{done:?}");
    assert!(
        fx.audit().iter().all(|a| a.entry.reason != "x"),
        "year 0 created nothing"
    );
}

/// Hostile and oversized input: a clear error, nothing changed, nothing dropped.
pub(crate) fn hostile_input_changes_nothing(fx: &Fixture) {
    fx.seed();
    for (name, shown) in [
        (
            "x'; DROP TABLE jobs; --",
            "unknown job `x'; DROP TABLE jobs; --`: no scheduler has registered it",
        ),
        (
            "<script>alert(1)</script>",
            "unknown job `<script>alert(1)</script>`: no scheduler has registered it",
        ),
        (
            "report\n\u{1b}[2J",
            "unknown job `report\\n\\u{1b}[2J`: no scheduler has registered it",
        ),
    ] {
        assert_eq!(fx.slotguard(&["runs", name]).fails(3), shown);
        assert_eq!(
            fx.slotguard(&["retry", name, "2026-03-01T02:00:00Z", "--reason", "r"])
                .fails(3),
            shown
        );
        assert_eq!(
            fx.slotguard(&["pause", name, "--reason", "r"]).fails(3),
            shown
        );
    }
    // A long name is shortened in the message.
    let long = "j".repeat(10_000);
    let message = fx.slotguard(&["runs", &long]).fails(3).to_owned();
    assert!(message.len() < 200, "{message}");
    assert!(message.contains("(10000 characters)"), "{message}");

    // Linux caps one argument at MAX_ARG_STRLEN (32 pages, 128 KiB): a 1 MiB reason cannot even be
    // passed to a program. 100 KB can, and is refused as too long.
    let huge = "r".repeat(1 << 20);
    let spawn = Command::new(env!("CARGO_BIN_EXE_slotguard"))
        .args(["pause", REPORT, "--reason", &huge])
        .output();
    if cfg!(target_os = "linux") {
        let err = spawn.expect_err("a 1 MiB argument");
        assert_eq!(err.kind(), std::io::ErrorKind::ArgumentListTooLong, "{err}");
    }
    let big = "r".repeat(100_000);
    for args in [
        &["pause", REPORT, "--reason", &big][..],
        &["retry", REPORT, "2026-03-01T02:00:00Z", "--reason", &big],
        &["trigger", REPORT, "--reason", &big],
    ] {
        let out = fx.slotguard(args);
        assert_eq!(
            out.fails(2),
            "invalid reason: is 100000 bytes; at most 1024 are accepted"
        );
    }
    let out = fx.slotguard(&["pause", REPORT, "--reason", "r", "--actor", &big]);
    assert_eq!(
        out.fails(2),
        "invalid actor: is 100000 bytes; at most 128 are accepted"
    );
    for reason in ["", "   ", "bell\u{7}"] {
        fx.slotguard(&["pause", REPORT, "--reason", reason])
            .fails(2);
    }
    // A slot of 10,000 characters: a short message.
    let message = fx
        .slotguard(&["retry", REPORT, &"9".repeat(10_000), "--reason", "r"])
        .fails(2)
        .to_owned();
    assert!(message.len() < 300, "{message}");

    // Nothing changed, nothing was dropped.
    assert!(fx.audit().is_empty());
    assert!(!fx.paused(REPORT));
    assert_eq!(fx.run("2026-03-01T02:00:00Z").status, RunStatus::Failed);
    let jobs = fx.slotguard(&["jobs"]);
    assert_eq!(table(jobs.ok()).1.len(), 3);
}

/// Bad input is reported as such before the store is opened: a malformed slot with an unreachable
/// store is still exit 2.
pub(crate) fn input_is_checked_before_the_store(fx: &Fixture) {
    let mut args = vec!["retry", REPORT, "not-a-slot", "--reason", "r"];
    args.extend(["--database-url", "postgres://postgres@127.0.0.1:1/x"]);
    assert!(run(&args, &[]).fails(2).starts_with("SLOT: `not-a-slot`"));
    // The URL from the environment.
    fx.seed();
    let store = fx.store_args();
    let mut env: Vec<(&str, Option<&str>)> = vec![("SLOTGUARD_DATABASE_URL", Some(&store[1]))];
    if store.len() > 2 {
        env.push(("SLOTGUARD_SCHEMA", Some(&store[3])));
    }
    let out = run(&["runs", REPORT, "--limit", "1"], &env);
    assert_eq!(table(out.ok()).1.len(), 1);
}

/// Issue 15, bug 5: `--limit` follows the admin API's one rule (1 to 1,000) on every listing.
pub(crate) fn limits_follow_the_admin_rule(fx: &Fixture) {
    fx.seed();
    for (args, limit) in [
        (vec!["runs", REPORT], "0"),
        (vec!["runs", REPORT], "100000"),
        (vec!["audit"], "0"),
        (vec!["audit"], "100000"),
    ] {
        let mut args = args.clone();
        args.extend(["--limit", limit]);
        let message = fx.slotguard(&args).fails(2).to_owned();
        assert_eq!(
            message,
            format!("--limit: {limit} is out of range: expected 1 to 1000"),
            "{args:?}"
        );
    }
    assert_eq!(
        table(fx.slotguard(&["runs", REPORT, "--limit", "1000"]).ok())
            .1
            .len(),
        4
    );
}

/// Issue 15, bug 10: triggering a paused job says that the run waits for the resume.
pub(crate) fn trigger_of_a_paused_job_says_it_waits(fx: &Fixture) {
    fx.seed();
    let out = fx.slotguard(&["trigger", REPORT, "--reason", "now"]);
    assert!(out.ok().contains("within one recovery poll"), "{out:#?}");
    fx.slotguard(&["pause", REPORT, "--reason", "maintenance"])
        .ok();
    let out = fx.slotguard(&["trigger", REPORT, "--reason", "now"]);
    let text = out.ok();
    assert!(text.contains("the job is paused"), "{text}");
    assert!(text.contains("runs after it is resumed"), "{text}");
    assert!(!text.contains("recovery poll"), "{text}");
}

/// Issue 15, bug 8: the "one run" command of docs/operations.md shows the run at the slot it names,
/// not the newest run from that slot on.
pub(crate) fn the_documented_one_run_command_shows_that_run(fx: &Fixture) {
    fx.seed();
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operations.md"
    ))
    .expect("docs/operations.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with("| one run |"))
        .expect("a `one run` row");
    let command = row
        .rsplit('|')
        .nth(1)
        .and_then(|cell| cell.trim().strip_prefix('`'))
        .and_then(|cell| cell.strip_suffix('`'))
        .unwrap_or_else(|| panic!("no CLI command in {row}"));
    // The older of the two failed runs: a listing from it on starts with the newer one.
    let slot = "2026-03-01T02:00:00Z";
    let args: Vec<&str> = command
        .split_whitespace()
        .skip(1)
        .map(|word| match word {
            "JOB" => REPORT,
            "SLOT" => slot,
            other => other,
        })
        .collect();
    let out = fx.slotguard(&args);
    let text = out.ok();
    assert!(text.contains(slot), "`{command}`:\n{text}");
    assert!(
        !text.contains("2026-03-01T04:00:00Z"),
        "`{command}`:\n{text}"
    );
}

/// Issue 15, item 13: `run JOB SLOT` shows one run with its attempts, in a table or as JSON.
pub(crate) fn run_shows_one_run_with_its_attempts(fx: &Fixture) {
    fx.seed();
    let slot = "2026-03-01T02:00:00Z";
    let out = fx.slotguard(&["run", REPORT, slot]);
    let text = out.ok();
    assert!(
        text.contains("slot:          2026-03-01T02:00:00Z"),
        "{text}"
    );
    assert!(text.contains("status:        failed"), "{text}");
    assert!(
        text.contains("wall time:     2026-03-01 11:00:00 Asia/Seoul"),
        "{text}"
    );
    let attempts = text.split("\n\n").nth(1).expect("an attempts table");
    let attempts = rows(
        attempts,
        &[
            "ATTEMPT", "STATUS", "OWNER", "STARTED", "FINISHED", "MESSAGE",
        ],
    );
    assert_eq!(attempts.len(), 1, "{text}");
    assert_eq!(attempts[0]["OWNER"], "replica-a");
    assert_eq!(attempts[0]["MESSAGE"], "boom");
    let json = fx.slotguard(&["run", REPORT, slot, "--json"]).json();
    assert_eq!(json.len(), 1);
    assert_eq!(json[0]["scheduledAt"], slot);
    assert_eq!(json[0]["attempts"].as_array().map(Vec::len), Some(1));
    fx.slotguard(&["run", REPORT, "2026-03-01T00:00:00Z"])
        .fails(3);
    fx.slotguard(&["run", REPORT, "yesterday"]).fails(2);
}

/// Issue 15, item 13: `retry --failed --from --to` retries every failed slot of the range, one audit
/// entry each.
pub(crate) fn retry_failed_retries_a_range(fx: &Fixture) {
    fx.seed();
    let out = fx.slotguard(&[
        "retry",
        REPORT,
        "--failed",
        "--from",
        FROM,
        "--to",
        TO,
        "--reason",
        "bank API was down",
    ]);
    let text = out.ok();
    assert!(
        text.contains("retried 2 failed or dead run(s) of report"),
        "{text}"
    );
    for slot in ["2026-03-01T02:00:00Z", "2026-03-01T04:00:00Z"] {
        assert_eq!(fx.run(slot).status, RunStatus::Pending, "{slot}");
    }
    assert_eq!(fx.run("2026-03-01T01:00:00Z").status, RunStatus::Succeeded);
    assert_eq!(fx.run("2026-03-01T03:00:00Z").status, RunStatus::Running);
    let audit = fx.audit();
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert!(
        audit
            .iter()
            .all(|a| a.entry.action == "retry" && a.entry.actor == USER)
    );
    // Usage: --failed needs the range, and takes no slot.
    let no_range = fx.slotguard(&["retry", REPORT, "--failed", "--reason", "r"]);
    assert_eq!(no_range.code, Some(2), "{no_range:#?}");
    let both = fx.slotguard(&[
        "retry",
        REPORT,
        "2026-03-01T02:00:00Z",
        "--failed",
        "--from",
        FROM,
        "--to",
        TO,
        "--reason",
        "r",
    ]);
    assert_eq!(both.code, Some(2), "{both:#?}");
    assert_eq!(fx.audit().len(), 2);
}

/// Issue 15, item 13: `trigger --wait` follows the run; the exit code says how it ended: 0
/// succeeded, 5 ended without success, 6 not finished within `--timeout`.
pub(crate) fn trigger_wait_follows_the_run(fx: &Fixture) {
    fx.seed();
    // Nobody runs it: still pending when the timeout passes.
    let out = fx.slotguard(&[
        "trigger",
        REPORT,
        "--reason",
        "r",
        "--wait",
        "--timeout",
        "1",
    ]);
    assert_eq!(out.code, Some(6), "{out:#?}");
    assert!(out.stdout.contains("still pending after 1 s"), "{out:#?}");
    assert!(out.elapsed >= Duration::from_secs(1), "{out:#?}");
    // A replica runs it, with the outcome given.
    for (finish, code, said) in [
        (Finish::succeeded(), 0, "succeeded after 1 attempt(s)"),
        (
            Finish::failed(ErrorClass::Permanent, "no such account", None),
            5,
            "dead after 1 attempt(s): no such account",
        ),
    ] {
        let mut args: Vec<String> = [
            "trigger",
            REPORT,
            "--reason",
            "r",
            "--wait",
            "--timeout",
            "60",
        ]
        .map(str::to_owned)
        .to_vec();
        args.extend(fx.store_args());
        let child = Command::new(env!("CARGO_BIN_EXE_slotguard"))
            .args(&args)
            .env("USER", USER)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn slotguard");
        // Runs whatever is due (the pending run of the timed-out wait above too) until the wait ends.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut child = child;
        while child.try_wait().expect("slotguard runs").is_none() {
            assert!(Instant::now() < deadline, "the wait never ended");
            fx.run_due(REPORT, &finish);
            std::thread::sleep(Duration::from_millis(100));
        }
        let output = child.wait_with_output().expect("slotguard ends");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(code),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.starts_with("triggered: report slot "), "{stdout}");
        assert!(stdout.contains(said), "{stdout}");
    }
    let timeout = fx.slotguard(&[
        "trigger",
        REPORT,
        "--reason",
        "r",
        "--wait",
        "--timeout",
        "3601",
    ]);
    assert!(timeout.fails(2).starts_with("--timeout: "), "{timeout:#?}");
    let no_wait = fx.slotguard(&["trigger", REPORT, "--reason", "r", "--timeout", "5"]);
    assert_eq!(no_wait.code, Some(2), "{no_wait:#?}");
}

/// Issue 21, point 8: `missed` over every job exits non-zero when no job could be counted, rather
/// than "0 missed".
pub(crate) fn missed_with_no_job_countable_fails(fx: &Fixture) {
    let backend = fx.backend().clone();
    fx.rt.block_on(async move {
        backend
            .register_jobs(&[definition("alien", "0 2 * * *", "Mars/Olympus")])
            .await
            .expect("register jobs");
    });
    let out = fx.slotguard(&["missed", "--from", FROM, "--to", TO]);
    let message = out.fails(1);
    assert!(message.contains("alien"), "{message}");
    assert!(message.contains("cannot be read"), "{message}");
}

/// Issue 21, point 8: cancelling a pending run says it will not start, not that a replica running
/// it is told at its next heartbeat; a running run's cancellation still says that.
pub(crate) fn cancel_says_what_happens_to_a_pending_run(fx: &Fixture) {
    fx.seed();
    let failed = "2026-03-01T02:00:00Z";
    fx.slotguard(&["retry", REPORT, failed, "--reason", "again"])
        .ok();
    let text = fx
        .slotguard(&["cancel", REPORT, failed, "--reason", "not needed"])
        .ok()
        .to_owned();
    assert!(!text.contains("heartbeat"), "{text}");
    assert!(text.contains("was pending"), "{text}");
    assert!(text.contains("will not start"), "{text}");
    let running = "2026-03-01T03:00:00Z";
    let text = fx
        .slotguard(&["cancel", REPORT, running, "--reason", "stuck"])
        .ok()
        .to_owned();
    assert!(text.contains("was running"), "{text}");
    assert!(text.contains("next heartbeat"), "{text}");
}

/// Issue 21, point 8: a second pause keeps who paused first and is refused; resuming an active job
/// is refused and writes no `resume` audit entry.
pub(crate) fn a_second_pause_and_a_needless_resume_are_refused(fx: &Fixture) {
    fx.seed();
    fx.slotguard(&["pause", REPORT, "--reason", "maintenance"])
        .ok();
    let message = fx
        .slotguard(&["pause", REPORT, "--reason", "mine", "--actor", "bob"])
        .fails(4)
        .to_owned();
    assert!(message.contains("already paused by tester"), "{message}");
    let json = fx.slotguard(&["jobs", "--json"]).json();
    let report = json.iter().find(|j| j["name"] == REPORT).expect("report");
    assert_eq!(report["pausedBy"], USER);
    assert_eq!(report["pausedReason"], "maintenance");
    fx.slotguard(&["resume", REPORT, "--reason", "done"]).ok();
    let message = fx
        .slotguard(&["resume", REPORT, "--reason", "again"])
        .fails(4)
        .to_owned();
    assert!(message.contains("is not paused"), "{message}");
    let actions: Vec<String> = fx.audit().into_iter().map(|a| a.entry.action).collect();
    assert_eq!(actions, ["resume", "pause"]);
}

/// Issue 21, point 8: `slotguard --help` lists every exit code, 5 and 6 of `trigger --wait`
/// included.
pub(crate) fn help_lists_every_exit_code() {
    let out = run(&["--help"], &[]);
    let text = out.ok();
    for code in [
        "0 done",
        "1 ",
        "2 usage",
        "3 unknown",
        "4 refused",
        "5 ",
        "6 ",
    ] {
        assert!(text.contains(code), "`{code}` missing: {text}");
    }
    assert!(text.contains("trigger --wait"), "{text}");
}
