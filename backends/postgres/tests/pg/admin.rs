//! The admin store: job definitions and pauses, run listings, retries, enqueued runs, cancellation
//! and the audit trail, against a live server.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::ErrorClass;
use slotguard::store::{
    AdminStore, AuditEntry, ClaimRequest, DueSpec, Enqueue, Finish, JobDefinition, RunChange,
    RunFilter, RunRecord, RunStatus, SlotKey, SlotStore, Trigger,
};
use slotguard_postgres::PgBackend;
use slotguard_tests::request;
use sqlx::{Connection, PgConnection};
use tokio::sync::Barrier;
use tokio::task::JoinSet;

use crate::common::{TestSchema, database_url, eventually, won};

const STALE: Duration = Duration::from_secs(60);

fn at(rfc3339: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(rfc3339)
        .expect("valid RFC 3339")
        .with_timezone(&Utc)
}

fn entry(action: &str, actor: &str, reason: &str) -> AuditEntry {
    AuditEntry {
        action: action.to_owned(),
        actor: actor.to_owned(),
        reason: reason.to_owned(),
    }
}

fn definition(name: &str, cron: &str, fingerprint: u64) -> JobDefinition {
    JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: "Europe/Berlin".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        fingerprint,
    }
}

fn spec(job: &str, max_attempts: u32) -> DueSpec {
    DueSpec {
        job: job.to_owned(),
        max_attempts,
        overlap: slotguard::Overlap::Allow,
    }
}

fn filter(limit: usize) -> RunFilter {
    RunFilter {
        limit,
        ..RunFilter::default()
    }
}

/// A run an operator asks for, due at `not_before`.
fn enqueue(job: &str, slot: &str, trigger: Trigger, not_before: DateTime<Utc>) -> Enqueue {
    let mut request = request(job, slot, STALE);
    request.trigger = trigger;
    Enqueue {
        request,
        not_before,
    }
}

/// The admin listing (the trait's `runs`, not the inherent one).
async fn list(backend: &PgBackend, filter: &RunFilter) -> Vec<RunRecord> {
    AdminStore::runs(backend, filter).await.expect("runs")
}

/// The run with `key`, as the inherent listing reads it.
async fn run_of(backend: &PgBackend, key: &SlotKey) -> RunRecord {
    backend
        .runs(Some(&key.job))
        .await
        .expect("runs")
        .into_iter()
        .find(|r| r.key == *key)
        .expect("the run exists")
}

/// Claims `req` for `owner` and finishes it with `finish`.
async fn finished(backend: &PgBackend, owner: &str, req: &ClaimRequest, finish: &Finish) -> i64 {
    let lease = won(&backend
        .claim(owner, std::slice::from_ref(req))
        .await
        .expect("claim")[0]);
    assert!(backend.finish(owner, &lease, finish).await.expect("finish"));
    lease.run_id
}

fn failed() -> Finish {
    Finish::failed(ErrorClass::Transient, "503", None)
}

async fn now(backend: &PgBackend) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT now()")
        .fetch_one(backend.pool())
        .await
        .expect("now")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_registered_paused_and_resumed_and_registration_keeps_the_pause() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    assert!(backend.jobs().await.expect("jobs").is_empty());
    backend.register_jobs(&[]).await.expect("register nothing");

    let big = u64::MAX - 6;
    backend
        .register_jobs(&[
            definition("settle", "0 2 * * *", big),
            definition("Report", "*/5 * * * *", 7),
            // Named twice in one call: the last definition wins.
            definition("settle", "0 3 * * *", big),
        ])
        .await
        .expect("register");
    let jobs = backend.jobs().await.expect("jobs");
    let names: Vec<_> = jobs.iter().map(|j| j.definition.name.as_str()).collect();
    assert_eq!(names, ["Report", "settle"], "by name, byte order");
    let settle = &jobs[1];
    assert_eq!(settle.definition, definition("settle", "0 3 * * *", big));
    assert!(!settle.paused);
    assert_eq!(
        (&settle.paused_by, &settle.paused_reason, settle.paused_at),
        (&None, &None, None)
    );
    let first_seen = settle.seen_at;

    // Pause: the job row and one audit record.
    let pause = entry("pause", "alice", "bank maintenance");
    assert!(
        backend
            .set_paused("settle", true, &pause)
            .await
            .expect("pause")
    );
    // A job nobody registered: nothing changes, nothing is audited.
    assert!(
        !backend
            .set_paused("nobody", true, &pause)
            .await
            .expect("pause")
    );
    let paused = backend.jobs().await.expect("jobs").remove(1);
    assert!(paused.paused);
    assert_eq!(paused.paused_by.as_deref(), Some("alice"));
    assert_eq!(paused.paused_reason.as_deref(), Some("bank maintenance"));
    let paused_at = paused.paused_at.expect("paused_at");

    // A scheduler registers again with a new expression: the definition changes, the pause stays,
    // `seen_at` moves on.
    tokio::time::sleep(Duration::from_millis(20)).await;
    backend
        .register_jobs(&[definition("settle", "0 4 * * *", 1)])
        .await
        .expect("register again");
    let again = backend.jobs().await.expect("jobs").remove(1);
    assert_eq!(again.definition, definition("settle", "0 4 * * *", 1));
    assert!(again.paused);
    assert_eq!(again.paused_by.as_deref(), Some("alice"));
    assert_eq!(again.paused_at, Some(paused_at));
    assert!(again.seen_at > first_seen, "seen_at refreshed");

    // Resume.
    let resume = entry("resume", "bob", "maintenance over");
    assert!(
        backend
            .set_paused("settle", false, &resume)
            .await
            .expect("resume")
    );
    let resumed = backend.jobs().await.expect("jobs").remove(1);
    assert!(!resumed.paused);
    assert_eq!(resumed.paused_by.as_deref(), Some("bob"));
    assert_eq!(resumed.paused_reason.as_deref(), Some("maintenance over"));
    assert!(resumed.paused_at.expect("paused_at") >= paused_at);

    let log = backend.audit_log(None, 100).await.expect("audit");
    let seen: Vec<_> = log
        .iter()
        .map(|a| (a.job.as_str(), a.run_id, a.scheduled_at, &a.entry))
        .collect();
    assert_eq!(
        seen,
        [
            ("settle", None, None, &resume),
            ("settle", None, None, &pause),
        ]
    );
    assert!(log[0].id > log[1].id);
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_filtered_newest_first_with_their_attempts() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    // f1: succeeded, failed (two attempts), running, skipped; f2: two partitions at one instant.
    finished(
        &backend,
        "a",
        &request("f1", "2026-01-01T00:00:00Z", STALE),
        &Finish::succeeded(),
    )
    .await;
    let retrying = request("f1", "2026-01-01T00:01:00Z", STALE);
    let lease = won(&backend
        .claim("a", std::slice::from_ref(&retrying))
        .await
        .expect("claim")[0]);
    let again = Finish::failed(ErrorClass::Transient, "503", Some(Duration::ZERO));
    assert!(backend.finish("a", &lease, &again).await.expect("finish"));
    let due = backend
        .claim_due("b", &[spec("f1", 3)], 10)
        .await
        .expect("due");
    assert!(
        backend
            .finish("b", &due[0].lease, &failed())
            .await
            .expect("finish")
    );
    backend
        .claim("a", &[request("f1", "2026-01-01T00:02:00Z", STALE)])
        .await
        .expect("claim");
    backend
        .record_skipped(&[request("f1", "2026-01-01T00:03:00Z", STALE)], "busy")
        .await
        .expect("skip");
    let part = |p: &str, slot: &str| {
        let mut r = request("f2", slot, STALE);
        r.key.partition = p.to_owned();
        r
    };
    backend
        .claim(
            "c",
            &[
                part("b", "2026-01-01T00:01:00Z"),
                part("a", "2026-01-01T00:01:00Z"),
            ],
        )
        .await
        .expect("claim");
    finished(
        &backend,
        "c",
        &part("a", "2026-01-01T00:02:00Z"),
        &Finish::succeeded(),
    )
    .await;

    // Everything, newest slot first, ties by id descending, attempts in order.
    let all = list(&backend, &filter(100)).await;
    assert_eq!(all.len(), 7);
    assert!(
        all.windows(2)
            .all(|w| (w[0].key.scheduled_at, w[0].id) > (w[1].key.scheduled_at, w[1].id)),
        "{all:?}"
    );
    let failed_run = all
        .iter()
        .find(|r| r.key == retrying.key)
        .expect("failed run");
    assert_eq!(failed_run.status, RunStatus::Failed);
    assert_eq!(failed_run.attempt, 2);
    let attempts: Vec<_> = failed_run
        .attempts
        .iter()
        .map(|a| (a.attempt, a.owner.as_str(), a.status))
        .collect();
    assert_eq!(
        attempts,
        [(1, "a", RunStatus::Failed), (2, "b", RunStatus::Failed)]
    );
    assert!(
        all.iter()
            .find(|r| r.status == RunStatus::Skipped)
            .expect("skipped")
            .attempts
            .is_empty()
    );
    // The admin listing and the inherent one read the same rows.
    let mut inherent = backend.runs(None).await.expect("runs");
    inherent.sort_by_key(|r| std::cmp::Reverse((r.key.scheduled_at, r.id)));
    assert_eq!(all, inherent);

    // Each filter, against the same rule applied to the full listing.
    let cases = [
        RunFilter {
            job: Some("f1".into()),
            ..filter(100)
        },
        RunFilter {
            status: Some(RunStatus::Running),
            ..filter(100)
        },
        RunFilter {
            status: Some(RunStatus::Succeeded),
            job: Some("f2".into()),
            ..filter(100)
        },
        RunFilter {
            partition: Some("a".into()),
            ..filter(100)
        },
        RunFilter {
            partition: Some(String::new()),
            ..filter(100)
        },
        RunFilter {
            from: Some(at("2026-01-01T00:01:00Z")),
            ..filter(100)
        },
        RunFilter {
            to: Some(at("2026-01-01T00:02:00Z")),
            ..filter(100)
        },
        RunFilter {
            from: Some(at("2026-01-01T00:01:00Z")),
            to: Some(at("2026-01-01T00:02:00Z")),
            job: Some("f2".into()),
            ..filter(100)
        },
        filter(3),
        RunFilter {
            job: Some("f1".into()),
            ..filter(2)
        },
        RunFilter {
            job: Some("nobody".into()),
            ..filter(100)
        },
        filter(0),
    ];
    for case in &cases {
        let want: Vec<RunRecord> = all
            .iter()
            .filter(|r| {
                case.job.as_ref().is_none_or(|j| *j == r.key.job)
                    && case.status.is_none_or(|s| s == r.status)
                    && case
                        .partition
                        .as_ref()
                        .is_none_or(|p| *p == r.key.partition)
                    && case.from.is_none_or(|f| r.key.scheduled_at >= f)
                    && case.to.is_none_or(|t| r.key.scheduled_at < t)
            })
            .take(case.limit)
            .cloned()
            .collect();
        assert_eq!(list(&backend, case).await, want, "{case:?}");
    }
    // Spot checks of the rule itself.
    let window = list(&backend, &cases[7]).await;
    let keys: Vec<_> = window.iter().map(|r| r.key.partition.as_str()).collect();
    assert_eq!(keys.len(), 2);
    assert!(window[0].id > window[1].id);
    assert_eq!(list(&backend, &cases[1]).await.len(), 3);
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_times_and_latest_slots_see_the_right_rows() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let mut p = request("w", "2026-01-01T00:01:00Z", STALE);
    p.key.partition = "eu".into();
    backend
        .claim(
            "a",
            &[
                request("w", "2026-01-01T00:00:00Z", STALE),
                request("w", "2026-01-01T00:01:00Z", STALE),
                p,
                request("w", "2026-01-01T00:05:00Z", STALE),
            ],
        )
        .await
        .expect("claim");
    let mut catch_up = request("w", "2026-01-01T00:02:00Z", STALE);
    catch_up.trigger = Trigger::CatchUp;
    backend
        .record_skipped(&[catch_up], "catch-up skipped")
        .await
        .expect("skip");

    // Distinct instants (two partitions at 00:01 count once), [from, to).
    let times = backend
        .slot_times("w", at("2026-01-01T00:00:00Z"), at("2026-01-01T00:05:00Z"))
        .await
        .expect("slot_times");
    assert_eq!(
        times,
        [
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T00:01:00Z"),
            at("2026-01-01T00:02:00Z")
        ]
    );
    assert!(
        backend
            .slot_times(
                "other",
                at("2026-01-01T00:00:00Z"),
                at("2026-01-02T00:00:00Z")
            )
            .await
            .expect("slot_times")
            .is_empty()
    );

    // Manual runs do not move the watermark; backfill runs do.
    let later = now(&backend).await + chrono::Duration::hours(1);
    backend
        .enqueue(
            &[
                enqueue("w", "2026-01-01T09:00:00Z", Trigger::Manual, later),
                enqueue("m", "2026-01-01T09:00:00Z", Trigger::Manual, later),
                enqueue("b", "2025-12-31T00:00:00Z", Trigger::Backfill, later),
            ],
            &entry("trigger", "ops", "test"),
        )
        .await
        .expect("enqueue");
    let jobs = ["b", "w", "m", "unknown", "w"].map(String::from);
    assert_eq!(
        backend.latest_slots(&jobs).await.expect("latest"),
        [
            Some(at("2025-12-31T00:00:00Z")),
            Some(at("2026-01-01T00:05:00Z")),
            None,
            None,
            Some(at("2026-01-01T00:05:00Z")),
        ]
    );
    assert!(backend.latest_slots(&[]).await.expect("latest").is_empty());
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_makes_a_finished_run_due_now_and_refuses_the_others() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let audit = entry("retry", "alice", "the bank is back");
    let specs = [spec("r", 3)];

    let failing = request("r", "2026-01-01T00:00:00Z", STALE);
    let run_id = finished(&backend, "a", &failing, &failed()).await;
    let before = now(&backend).await;
    assert_eq!(
        backend.retry(&failing.key, &audit).await.expect("retry"),
        RunChange::Done { run_id }
    );
    let row = run_of(&backend, &failing.key).await;
    assert_eq!(row.status, RunStatus::Pending);
    assert_eq!(row.finished_at, None);
    let due_at = row.next_attempt_at.expect("due");
    assert!(due_at >= before && due_at <= now(&backend).await);
    assert!(row.updated_at >= before);
    // Pending now: a second retry is refused.
    assert_eq!(
        backend.retry(&failing.key, &audit).await.expect("retry"),
        RunChange::Refused {
            status: RunStatus::Pending
        }
    );
    // Due at once, as the next attempt of the same run.
    let due = backend.claim_due("b", &specs, 10).await.expect("due");
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].lease.run_id, due[0].lease.attempt), (run_id, 2));

    // Running and succeeded runs are refused; unknown slots are not found.
    assert_eq!(
        backend.retry(&failing.key, &audit).await.expect("retry"),
        RunChange::Refused {
            status: RunStatus::Running
        }
    );
    let done = request("r", "2026-01-01T00:01:00Z", STALE);
    finished(&backend, "a", &done, &Finish::succeeded()).await;
    assert_eq!(
        backend.retry(&done.key, &audit).await.expect("retry"),
        RunChange::Refused {
            status: RunStatus::Succeeded
        }
    );
    let mut unknown = failing.key.clone();
    unknown.partition = "nope".into();
    assert_eq!(
        backend.retry(&unknown, &audit).await.expect("retry"),
        RunChange::NotFound
    );

    // Skipped and abandoned runs may be retried too.
    let skipped = request("r", "2026-01-01T00:02:00Z", STALE);
    backend
        .record_skipped(std::slice::from_ref(&skipped), "busy")
        .await
        .expect("skip");
    let abandoned = request("r", "2026-01-01T00:03:00Z", STALE);
    finished(
        &backend,
        "a",
        &abandoned,
        &Finish::abandoned("shutdown", None),
    )
    .await;
    for key in [&skipped.key, &abandoned.key] {
        assert!(matches!(
            backend.retry(key, &audit).await.expect("retry"),
            RunChange::Done { .. }
        ));
    }
    let due = backend.claim_due("c", &specs, 10).await.expect("due");
    let attempts: Vec<_> = due
        .iter()
        .map(|d| (d.key.scheduled_at, d.lease.attempt))
        .collect();
    assert_eq!(
        attempts,
        [
            (skipped.key.scheduled_at, 1),
            (abandoned.key.scheduled_at, 2)
        ]
    );

    // One audit record per retry that was done, with its run and slot.
    let log = backend.audit_log(Some("r"), 100).await.expect("audit");
    assert_eq!(log.len(), 3);
    assert_eq!(
        (log[2].run_id, log[2].scheduled_at, &log[2].entry),
        (Some(run_id), Some(failing.key.scheduled_at), &audit)
    );
    backend.close().await;
}

/// 8 operators retry one failed run at once, each on a connection of its own, under READ
/// COMMITTED: one is done, the others find it `pending`, and the run gets exactly one new attempt.
/// The pool has 9 connections: 8 for the operators, one to watch them wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_retries_of_one_run_are_done_once() {
    const OPERATORS: usize = 8;
    let schema = TestSchema::new();
    let backend = schema
        .builder()
        .pool_size(OPERATORS as u32 + 1)
        .connect()
        .await
        .expect("connect");
    let req = request("race_retry", "2026-01-01T00:00:00Z", STALE);
    let run_id = finished(&backend, "a", &req, &failed()).await;

    // Another session holds the run's row lock, so that all 8 retries are in flight at once, each
    // on a connection of its own, waiting for it; then it lets go and they race.
    let mut blocker = PgConnection::connect(&database_url())
        .await
        .expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut blocker)
        .await
        .expect("begin");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT 1 FROM \"{}\".job_runs WHERE id = $1 FOR UPDATE",
        schema.name
    )))
    .bind(run_id)
    .execute(&mut blocker)
    .await
    .expect("lock the row");

    let barrier = Arc::new(Barrier::new(OPERATORS));
    let mut set = JoinSet::new();
    for operator in 0..OPERATORS {
        let backend = backend.clone();
        let key = req.key.clone();
        let barrier = Arc::clone(&barrier);
        set.spawn(async move {
            barrier.wait().await;
            let audit = entry("retry", &format!("operator-{operator}"), "race");
            backend.retry(&key, &audit).await.expect("retry")
        });
    }
    let waiting = eventually(Duration::from_secs(10), || {
        let pool = backend.pool().clone();
        let pattern = format!("%{}%job_run_audit%", schema.name);
        async move {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE wait_event_type = 'Lock' AND query LIKE $1",
            )
            .bind(pattern)
            .fetch_one(&pool)
            .await
            .expect("pg_stat_activity");
            waiting == OPERATORS as i64
        }
    })
    .await;
    sqlx::query("COMMIT")
        .execute(&mut blocker)
        .await
        .expect("commit");
    assert!(waiting, "all 8 retries wait for the row lock at once");
    blocker.close().await.expect("close");

    let mut answers = Vec::new();
    while let Some(answer) = set.join_next().await {
        answers.push(answer.expect("operator panicked"));
    }
    let done = answers
        .iter()
        .filter(|a| **a == RunChange::Done { run_id })
        .count();
    let refused = answers
        .iter()
        .filter(|a| {
            **a == RunChange::Refused {
                status: RunStatus::Pending,
            }
        })
        .count();
    assert_eq!((done, refused), (1, OPERATORS - 1), "{answers:?}");

    let due = backend
        .claim_due("b", &[spec("race_retry", 3)], 10)
        .await
        .expect("due");
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].lease.run_id, due[0].lease.attempt), (run_id, 2));
    assert!(
        backend
            .claim_due("c", &[spec("race_retry", 3)], 10)
            .await
            .expect("due")
            .is_empty()
    );
    let run = run_of(&backend, &req.key).await;
    assert_eq!(run.attempts.len(), 2);
    assert_eq!(run.status, RunStatus::Running);
    let log = backend
        .audit_log(Some("race_retry"), 100)
        .await
        .expect("audit");
    assert_eq!(log.len(), 1, "one retry audited: {log:?}");
    backend.close().await;
}

/// `claim_due` counts attempts only for stale and abandoned runs: a run an operator retried is
/// claimed even when it has had all its attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_dead_run_is_claimed_past_max_attempts() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let specs = [spec("exhausted", 1)];
    let audit = entry("retry", "alice", "fixed the credentials");

    // Dead by a permanent error after one attempt of one.
    let permanent = request("exhausted", "2026-01-01T00:00:00Z", STALE);
    let run_id = finished(
        &backend,
        "a",
        &permanent,
        &Finish::failed(ErrorClass::Permanent, "bad credentials", None),
    )
    .await;
    // Dead by `claim_due`: handed over at shutdown with no attempts left.
    let handed = request("exhausted", "2026-01-01T00:01:00Z", STALE);
    let handed_id = finished(
        &backend,
        "a",
        &handed,
        &Finish::abandoned("shutdown", Some(Duration::ZERO)),
    )
    .await;
    assert!(
        backend
            .claim_due("b", &specs, 10)
            .await
            .expect("due")
            .is_empty()
    );
    assert_eq!(run_of(&backend, &handed.key).await.status, RunStatus::Dead);

    for key in [&permanent.key, &handed.key] {
        assert!(matches!(
            backend.retry(key, &audit).await.expect("retry"),
            RunChange::Done { .. }
        ));
    }
    let due = backend.claim_due("b", &specs, 10).await.expect("due");
    let claimed: Vec<_> = due
        .iter()
        .map(|d| (d.lease.run_id, d.lease.attempt))
        .collect();
    assert_eq!(claimed, [(run_id, 2), (handed_id, 2)]);
    for d in &due {
        let run = run_of(&backend, &d.key).await;
        assert_eq!(
            (run.status, run.attempt, run.token),
            (RunStatus::Running, 2, d.lease.token)
        );
        let attempts: Vec<_> = run.attempts.iter().map(|a| (a.attempt, a.status)).collect();
        assert_eq!(attempts[1], (2, RunStatus::Running));
        assert_eq!(attempts.len(), 2);
        assert!(
            backend
                .finish("b", &d.lease, &Finish::succeeded())
                .await
                .expect("finish")
        );
    }
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_are_created_once_and_claimed_as_attempt_one() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let existing = request("q", "2026-01-01T00:00:00Z", STALE);
    finished(&backend, "a", &existing, &Finish::succeeded()).await;

    let now = now(&backend).await;
    let later = now + chrono::Duration::hours(1);
    let mut on_existing = enqueue("q", "2026-01-01T00:00:00Z", Trigger::Manual, now);
    on_existing.request.zone = "Asia/Tokyo".into();
    let batch = [
        enqueue("q", "2026-01-01T05:00:00Z", Trigger::Manual, now),
        on_existing,
        enqueue("q", "2025-12-01T00:00:00Z", Trigger::Backfill, now),
        // The same slot twice in one batch: created for its first request only.
        enqueue("q", "2026-01-01T05:00:00Z", Trigger::Manual, now),
        enqueue("q", "2026-02-01T00:00:00Z", Trigger::Backfill, later),
    ];
    let audit = entry("backfill", "alice", "december reprocessing");
    let answers = backend.enqueue(&batch, &audit).await.expect("enqueue");
    assert_eq!(answers.len(), 5);
    assert!(answers[0].is_some() && answers[2].is_some() && answers[4].is_some());
    assert_eq!((answers[1], answers[3]), (None, None), "{answers:?}");
    // Again: every row exists, nothing is created or audited.
    assert_eq!(
        backend.enqueue(&batch, &audit).await.expect("enqueue"),
        [None; 5]
    );
    assert!(
        backend
            .enqueue(&[], &audit)
            .await
            .expect("enqueue")
            .is_empty()
    );

    let created = run_of(&backend, &batch[0].request.key).await;
    assert_eq!(Some(created.id), answers[0]);
    assert_eq!(
        (created.status, created.attempt, created.trigger),
        (RunStatus::Pending, 0, Trigger::Manual)
    );
    assert_eq!((created.owner, created.heartbeat_at), (None, None));
    assert_eq!(created.next_attempt_at, Some(now));
    assert_eq!(created.stale_after, STALE);
    assert!(created.attempts.is_empty());
    let untouched = run_of(&backend, &existing.key).await;
    assert_eq!(
        (untouched.status, untouched.zone.as_str()),
        (RunStatus::Succeeded, "UTC")
    );

    // One audit record per created run, in request order.
    let log = backend.audit_log(Some("q"), 100).await.expect("audit");
    let audited: Vec<_> = log
        .iter()
        .rev()
        .map(|a| (a.run_id, a.scheduled_at, &a.entry))
        .collect();
    assert_eq!(
        audited,
        [0, 2, 4].map(|i| (answers[i], Some(batch[i].request.key.scheduled_at), &audit))
    );

    // Due ones are claimed as attempt 1, oldest slot first, with an attempt row; the later one
    // waits.
    let due = backend
        .claim_due("b", &[spec("q", 3)], 10)
        .await
        .expect("due");
    let claimed: Vec<_> = due
        .iter()
        .map(|d| (Some(d.lease.run_id), d.lease.attempt, d.trigger))
        .collect();
    assert_eq!(
        claimed,
        [
            (answers[2], 1, Trigger::Backfill),
            (answers[0], 1, Trigger::Manual)
        ]
    );
    let run = run_of(&backend, &batch[0].request.key).await;
    assert_eq!((run.status, run.attempt), (RunStatus::Running, 1));
    assert_eq!(run.owner.as_deref(), Some("b"));
    assert_eq!(run.attempts.len(), 1);
    assert_eq!(
        (
            run.attempts[0].attempt,
            run.attempts[0].status,
            run.attempts[0].token
        ),
        (1, RunStatus::Running, due[1].lease.token)
    );
    assert!(
        backend
            .finish("b", &due[1].lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    let waiting = run_of(&backend, &batch[4].request.key).await;
    assert_eq!(waiting.next_attempt_at, Some(later));
    assert_eq!(waiting.status, RunStatus::Pending);
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_takes_the_run_from_its_holder() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let audit = entry("cancel", "alice", "wrong input file");

    let req = request("c", "2026-01-01T00:00:00Z", STALE);
    let lease = won(&backend
        .claim("holder", std::slice::from_ref(&req))
        .await
        .expect("claim")[0]);
    assert_eq!(
        backend
            .heartbeat("holder", &[lease.token])
            .await
            .expect("heartbeat"),
        [lease.token]
    );
    assert_eq!(
        backend.cancel(&req.key, &audit).await.expect("cancel"),
        RunChange::Done {
            run_id: lease.run_id
        }
    );
    // The holder finds out at its next heartbeat, and its completion is refused.
    assert!(
        backend
            .heartbeat("holder", &[lease.token])
            .await
            .expect("heartbeat")
            .is_empty()
    );
    assert!(
        !backend
            .finish("holder", &lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    let message = "cancelled by alice: wrong input file";
    let run = run_of(&backend, &req.key).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error_class.as_deref(), Some("permanent"));
    assert_eq!(run.error_message.as_deref(), Some(message));
    assert_eq!(run.next_attempt_at, None);
    assert!(run.finished_at.is_some());
    let attempts: Vec<_> = run
        .attempts
        .iter()
        .map(|a| (a.status, a.message.as_deref(), a.finished_at.is_some()))
        .collect();
    assert_eq!(attempts, [(RunStatus::Abandoned, Some(message), true)]);
    // Nothing claims it again.
    assert!(
        backend
            .claim_due("x", &[spec("c", 5)], 10)
            .await
            .expect("due")
            .is_empty()
    );
    // Cancelled once: a second cancel is refused.
    assert_eq!(
        backend.cancel(&req.key, &audit).await.expect("cancel"),
        RunChange::Refused {
            status: RunStatus::Failed
        }
    );

    // A pending run (enqueued, not yet due) is cancelled before anyone claims it.
    let later = now(&backend).await + chrono::Duration::hours(1);
    let queued = enqueue("c", "2026-01-01T01:00:00Z", Trigger::Manual, later);
    let queued_id = backend
        .enqueue(
            std::slice::from_ref(&queued),
            &entry("trigger", "bob", "now"),
        )
        .await
        .expect("enqueue")[0]
        .expect("created");
    assert_eq!(
        backend
            .cancel(&queued.request.key, &audit)
            .await
            .expect("cancel"),
        RunChange::Done { run_id: queued_id }
    );
    let run = run_of(&backend, &queued.request.key).await;
    assert_eq!(
        (run.status, run.next_attempt_at, run.attempts.len()),
        (RunStatus::Failed, None, 0)
    );

    // Finished runs are refused; unknown slots are not found.
    let done = request("c", "2026-01-01T02:00:00Z", STALE);
    finished(&backend, "a", &done, &Finish::succeeded()).await;
    assert_eq!(
        backend.cancel(&done.key, &audit).await.expect("cancel"),
        RunChange::Refused {
            status: RunStatus::Succeeded
        }
    );
    let mut unknown = done.key.clone();
    unknown.job = "nobody".into();
    assert_eq!(
        backend.cancel(&unknown, &audit).await.expect("cancel"),
        RunChange::NotFound
    );

    // The cancelled run may be retried by an operator.
    assert!(matches!(
        backend
            .retry(&req.key, &entry("retry", "alice", "fixed"))
            .await
            .expect("retry"),
        RunChange::Done { .. }
    ));
    let log = backend.audit_log(Some("c"), 100).await.expect("audit");
    let actions: Vec<_> = log.iter().map(|a| a.entry.action.as_str()).collect();
    assert_eq!(actions, ["retry", "cancel", "trigger", "cancel"]);
    assert_eq!(log[3].run_id, Some(lease.run_id));
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_is_newest_first_per_job_and_capped() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    backend
        .register_jobs(&[
            definition("a", "* * * * *", 1),
            definition("b", "* * * * *", 2),
        ])
        .await
        .expect("register");
    for (i, job) in ["a", "b", "a", "b", "a"].into_iter().enumerate() {
        let audit = entry(
            if i % 2 == 0 { "pause" } else { "resume" },
            "ops",
            &i.to_string(),
        );
        assert!(
            backend
                .set_paused(job, i % 2 == 0, &audit)
                .await
                .expect("pause")
        );
    }
    let all = backend.audit_log(None, 100).await.expect("audit");
    let reasons: Vec<_> = all.iter().map(|a| a.entry.reason.as_str()).collect();
    assert_eq!(reasons, ["4", "3", "2", "1", "0"]);
    assert!(
        all.windows(2)
            .all(|w| w[0].id > w[1].id && w[0].at >= w[1].at)
    );
    let a: Vec<_> = backend
        .audit_log(Some("a"), 2)
        .await
        .expect("audit")
        .iter()
        .map(|r| r.entry.reason.clone())
        .collect();
    assert_eq!(a, ["4", "2"]);
    assert!(backend.audit_log(None, 0).await.expect("audit").is_empty());
    assert!(
        backend
            .audit_log(Some("nobody"), 10)
            .await
            .expect("audit")
            .is_empty()
    );

    // More than 10,000 records (and runs) exist: one read returns at most 10,000.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO \"{s}\".job_run_audit (job_name, action, actor, reason)
         SELECT 'bulk', 'trigger', 'ops', g::text FROM generate_series(1, 10005) AS g;
         INSERT INTO \"{s}\".job_runs (job_name, scheduled_at, status, attempt, fencing_token,
             stale_after, zone, wall_time, business_date, \"trigger\", schedule_fingerprint)
         SELECT 'bulk', timestamptz '2026-01-01' + g * interval '1 minute', 'skipped', 0,
                nextval('\"{s}\".fencing_tokens'), interval '1 minute', 'UTC',
                timestamp '2026-01-01' + g * interval '1 minute', date '2026-01-01', 'schedule', 0
         FROM generate_series(1, 10005) AS g",
        s = schema.name
    )))
    .execute(backend.pool())
    .await
    .expect("bulk rows");
    let capped = backend.audit_log(None, usize::MAX).await.expect("audit");
    assert_eq!(capped.len(), 10_000);
    assert_eq!(capped[0].entry.reason, "10005");
    let runs = list(&backend, &filter(usize::MAX)).await;
    assert_eq!(runs.len(), 10_000);
    assert_eq!(
        runs[0].key.scheduled_at,
        at("2026-01-01T00:00:00Z") + chrono::Duration::minutes(10_005)
    );
    backend.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_job_names_round_trip_through_the_admin_tables() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let names = [
        "x'; DROP TABLE jobs; --".to_owned(),
        "<script>alert('x')</script>".to_owned(),
        format!("\"; DROP SCHEMA {} CASCADE; --", schema.name),
        "정산 🚀 $1 %s \\ \t".to_owned(),
    ];
    let hostile = entry(
        "pause",
        "o'Brien\"; --",
        "<b>because</b> '); DELETE FROM job_run_audit;--",
    );
    let definitions: Vec<_> = names
        .iter()
        .map(|n| JobDefinition {
            cron: format!("{n} cron"),
            zone: format!("{n} zone"),
            ..definition(n, "", u64::MAX)
        })
        .collect();
    backend.register_jobs(&definitions).await.expect("register");
    let jobs = backend.jobs().await.expect("jobs");
    let mut want = definitions.clone();
    want.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    assert_eq!(
        jobs.iter()
            .map(|j| j.definition.clone())
            .collect::<Vec<_>>(),
        want
    );

    let now = now(&backend).await;
    for name in &names {
        assert!(
            backend
                .set_paused(name, true, &hostile)
                .await
                .expect("pause")
        );
        let created = backend
            .enqueue(
                &[enqueue(name, "2026-01-01T00:00:00Z", Trigger::Manual, now)],
                &hostile,
            )
            .await
            .expect("enqueue");
        assert!(created[0].is_some());
        let key = SlotKey {
            job: name.clone(),
            scheduled_at: at("2026-01-01T00:00:00Z"),
            partition: String::new(),
        };
        assert!(matches!(
            backend.cancel(&key, &hostile).await.expect("cancel"),
            RunChange::Done { .. }
        ));
        assert!(matches!(
            backend.retry(&key, &hostile).await.expect("retry"),
            RunChange::Done { .. }
        ));
        let runs = list(
            &backend,
            &RunFilter {
                job: Some(name.clone()),
                ..filter(10)
            },
        )
        .await;
        assert_eq!(runs.len(), 1, "{name}");
        assert_eq!(runs[0].key.job, *name);
        assert_eq!(
            runs[0].error_message.as_deref(),
            Some(format!("cancelled by {}: {}", hostile.actor, hostile.reason).as_str())
        );
        let log = backend.audit_log(Some(name), 10).await.expect("audit");
        assert_eq!(log.len(), 4, "{name}");
        assert!(log.iter().all(|a| a.job == *name
            && a.entry.actor == hostile.actor
            && a.entry.reason == hostile.reason));
        assert_eq!(
            backend
                .slot_times(name, at("2025-01-01T00:00:00Z"), at("2027-01-01T00:00:00Z"))
                .await
                .expect("slot_times"),
            [at("2026-01-01T00:00:00Z")]
        );
    }
    assert!(backend.jobs().await.expect("jobs").iter().all(|j| j.paused));

    // Every table is still there.
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
    )
    .bind(&schema.name)
    .fetch_all(backend.pool())
    .await
    .expect("tables");
    assert_eq!(
        tables,
        [
            "job_run_attempts",
            "job_run_audit",
            "job_runs",
            "jobs",
            "lock_keys",
            "migrations"
        ]
    );
    backend.close().await;
}
