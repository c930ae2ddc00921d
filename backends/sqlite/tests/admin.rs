//! What operators read and change, against a fresh SQLite file per test: registered jobs and pauses,
//! run listings, slot times and watermarks, retries (raced from several tasks and several handles),
//! operator runs, cancellation of a running attempt, and the audit trail.
//!
//! `SqliteBackend::runs(job)` (inherent) shares its name with `AdminStore::runs(filter)`, so the trait
//! method is called as `AdminStore::runs(&backend, &filter)`.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::ErrorClass;
use slotguard::store::{
    AdminStore, AuditEntry, Claim, ClaimRequest, DueSpec, Enqueue, Finish, JobDefinition, Lease,
    RunChange, RunFilter, RunRecord, RunStatus, SlotKey, SlotStore, Trigger,
};
use slotguard_sqlite::SqliteBackend;
use slotguard_tests::request;
use tokio::sync::Barrier;

const STALE: Duration = Duration::from_secs(60);

async fn backend(dir: &tempfile::TempDir) -> SqliteBackend {
    SqliteBackend::open(dir.path().join("admin.db"))
        .await
        .expect("open")
}

fn at(instant: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(instant)
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

fn definition(name: &str, cron: &str) -> JobDefinition {
    JobDefinition {
        name: name.to_owned(),
        cron: cron.to_owned(),
        zone: "Asia/Seoul".to_owned(),
        dst: "vixie".to_owned(),
        guard: "slot".to_owned(),
        // Every bit of the u64 survives the signed column.
        fingerprint: u64::MAX - 3,
    }
}

fn won(claim: &Claim) -> Lease {
    match claim {
        Claim::Won(lease) => *lease,
        Claim::Taken { status } => panic!("expected to win, found {status}"),
        Claim::NotDue => panic!("expected to win, found the slot not due"),
    }
}

async fn claim_one(backend: &SqliteBackend, owner: &str, request: &ClaimRequest) -> Lease {
    won(&backend
        .claim(owner, std::slice::from_ref(request))
        .await
        .expect("claim")[0])
}

/// The one run of `key`, through the admin listing.
async fn run_of(backend: &SqliteBackend, key: &SlotKey) -> RunRecord {
    let runs = AdminStore::runs(
        backend,
        &RunFilter {
            job: Some(key.job.clone()),
            partition: Some(key.partition.clone()),
            from: Some(key.scheduled_at),
            to: Some(key.scheduled_at + chrono::Duration::seconds(1)),
            limit: 10,
            ..RunFilter::default()
        },
    )
    .await
    .expect("runs");
    assert_eq!(runs.len(), 1, "{key:?}: {runs:?}");
    runs.into_iter().next().expect("one run")
}

fn spec(job: &str, max_attempts: u32) -> DueSpec {
    DueSpec {
        job: job.to_owned(),
        max_attempts,
        overlap: slotguard::Overlap::Allow,
    }
}

/// A failed run of `job` at `instant`: claimed by `owner` and finished with a transient error and no
/// retry.
async fn failed_run(backend: &SqliteBackend, job: &str, instant: &str) -> SlotKey {
    let req = request(job, instant, STALE);
    let lease = claim_one(backend, "worker", &req).await;
    let failed = Finish::failed(ErrorClass::Transient, "connection reset", None);
    assert!(
        backend
            .finish("worker", &lease, &failed)
            .await
            .expect("finish")
    );
    req.key
}

#[tokio::test]
async fn jobs_are_registered_and_keep_their_pause_state() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    assert!(backend.jobs().await.expect("jobs").is_empty());
    backend
        .register_jobs(&[
            definition("zeta", "0 2 * * *"),
            definition("alpha", "*/5 * * * *"),
        ])
        .await
        .expect("register");
    let jobs = backend.jobs().await.expect("jobs");
    let names: Vec<&str> = jobs.iter().map(|j| j.definition.name.as_str()).collect();
    assert_eq!(names, ["alpha", "zeta"], "by name");
    assert_eq!(jobs[0].definition, definition("alpha", "*/5 * * * *"));
    assert!(!jobs[0].paused);
    assert_eq!(
        (
            &jobs[0].paused_by,
            &jobs[0].paused_reason,
            jobs[0].paused_at
        ),
        (&None, &None, None)
    );
    let first_seen = jobs[1].seen_at;

    let pause = entry("pause", "alice", "upstream outage");
    assert!(
        backend
            .set_paused("zeta", true, &pause)
            .await
            .expect("pause")
    );
    // An unknown job: nothing changes, nothing is audited.
    assert!(
        !backend
            .set_paused("nope", true, &pause)
            .await
            .expect("pause")
    );

    tokio::time::sleep(Duration::from_millis(5)).await;
    // A new deployment registers again, with a new expression: the definition and seen_at change,
    // the pause stays.
    let mut changed = definition("zeta", "0 3 * * *");
    changed.fingerprint = 42;
    backend
        .register_jobs(std::slice::from_ref(&changed))
        .await
        .expect("register");
    let jobs = backend.jobs().await.expect("jobs");
    let zeta = &jobs[1];
    assert_eq!(zeta.definition, changed);
    assert!(zeta.paused);
    assert_eq!(zeta.paused_by.as_deref(), Some("alice"));
    assert_eq!(zeta.paused_reason.as_deref(), Some("upstream outage"));
    let paused_at = zeta.paused_at.expect("paused_at");
    assert!(paused_at >= first_seen);
    assert!(zeta.seen_at > first_seen, "seen_at is refreshed");
    assert!(zeta.seen_at >= paused_at);
    assert_eq!(
        jobs[0].seen_at, first_seen,
        "alpha was not registered again"
    );

    assert!(
        backend
            .set_paused("zeta", false, &entry("resume", "bob", "fixed"))
            .await
            .expect("resume")
    );
    let zeta = backend.jobs().await.expect("jobs").remove(1);
    assert!(!zeta.paused);
    assert_eq!(zeta.paused_by.as_deref(), Some("bob"));
    assert_eq!(zeta.paused_reason.as_deref(), Some("fixed"));

    let audit = backend.audit_log(None, 10).await.expect("audit");
    let actions: Vec<(&str, &str, Option<i64>)> = audit
        .iter()
        .map(|a| (a.entry.action.as_str(), a.job.as_str(), a.run_id))
        .collect();
    assert_eq!(actions, [("resume", "zeta", None), ("pause", "zeta", None)]);
    assert!(audit.iter().all(|a| a.scheduled_at.is_none()));
    assert_eq!(
        audit[1].at, paused_at,
        "the pause and its record share one instant"
    );
    // Registering nothing touches nothing.
    backend.register_jobs(&[]).await.expect("register");
}

#[tokio::test]
async fn runs_are_listed_by_filter_newest_first_with_their_attempts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    let mut requests = vec![
        request("report", "2026-01-01T00:00:00Z", STALE),
        request("report", "2026-01-01T01:00:00Z", STALE),
        request("report", "2026-01-01T02:00:00Z", STALE),
        request("other", "2026-01-01T01:00:00Z", STALE),
    ];
    let mut eu = request("report", "2026-01-01T01:00:00Z", STALE);
    eu.key.partition = "eu".to_owned();
    requests.push(eu);
    let leases: Vec<Lease> = backend
        .claim("worker", &requests)
        .await
        .expect("claim")
        .iter()
        .map(won)
        .collect();
    // The 01:00 report fails; the others succeed, except the 02:00 one, still running.
    for (i, lease) in leases.iter().enumerate() {
        let outcome = match i {
            1 => Finish::failed(ErrorClass::Transient, "timeout", None),
            2 => continue,
            _ => Finish::succeeded(),
        };
        assert!(
            backend
                .finish("worker", lease, &outcome)
                .await
                .expect("finish")
        );
    }
    let list = |filter: RunFilter| {
        let backend = backend.clone();
        async move {
            AdminStore::runs(&backend, &filter)
                .await
                .expect("runs")
                .into_iter()
                .map(|r| {
                    (
                        r.key.job,
                        r.key.scheduled_at.format("%H:%M").to_string(),
                        r.key.partition,
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    let row = |job: &str, time: &str, partition: &str| {
        (job.to_owned(), time.to_owned(), partition.to_owned())
    };

    // Everything, newest slot first; within one slot, the newest row (highest id) first.
    assert_eq!(
        list(RunFilter {
            limit: 100,
            ..RunFilter::default()
        })
        .await,
        [
            row("report", "02:00", ""),
            row("report", "01:00", "eu"),
            row("other", "01:00", ""),
            row("report", "01:00", ""),
            row("report", "00:00", ""),
        ]
    );
    assert_eq!(
        list(RunFilter {
            job: Some("report".into()),
            partition: Some(String::new()),
            limit: 100,
            ..RunFilter::default()
        })
        .await,
        [
            row("report", "02:00", ""),
            row("report", "01:00", ""),
            row("report", "00:00", ""),
        ]
    );
    assert_eq!(
        list(RunFilter {
            status: Some(RunStatus::Failed),
            limit: 100,
            ..RunFilter::default()
        })
        .await,
        [row("report", "01:00", "")]
    );
    assert_eq!(
        list(RunFilter {
            partition: Some("eu".into()),
            limit: 100,
            ..RunFilter::default()
        })
        .await,
        [row("report", "01:00", "eu")]
    );
    // `from` is inclusive, `to` exclusive.
    assert_eq!(
        list(RunFilter {
            job: Some("report".into()),
            from: Some(at("2026-01-01T01:00:00Z")),
            to: Some(at("2026-01-01T02:00:00Z")),
            limit: 100,
            ..RunFilter::default()
        })
        .await,
        [row("report", "01:00", "eu"), row("report", "01:00", "")]
    );
    // Bounds between milliseconds keep their meaning: just after 01:00 excludes it, just after 02:00
    // includes it.
    assert_eq!(
        list(RunFilter {
            job: Some("report".into()),
            from: Some(at("2026-01-01T01:00:00.000000001Z")),
            to: Some(at("2026-01-01T02:00:00.000000001Z")),
            limit: 100,
            ..RunFilter::default()
        })
        .await,
        [row("report", "02:00", "")]
    );
    assert_eq!(
        list(RunFilter {
            limit: 2,
            ..RunFilter::default()
        })
        .await,
        [row("report", "02:00", ""), row("report", "01:00", "eu")]
    );
    // No limit at all is capped by the store, not refused.
    assert_eq!(
        list(RunFilter {
            limit: usize::MAX,
            ..RunFilter::default()
        })
        .await
        .len(),
        5
    );
    assert!(list(RunFilter::default()).await.is_empty(), "limit 0");
    assert!(
        list(RunFilter {
            job: Some("%".into()),
            limit: 100,
            ..RunFilter::default()
        })
        .await
        .is_empty(),
        "names are not patterns"
    );

    // Every field of the record, for a failed and a running run.
    let failed = run_of(&backend, &requests[1].key).await;
    assert_eq!(failed.id, leases[1].run_id);
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!((failed.attempt, failed.token), (1, leases[1].token));
    assert_eq!(failed.owner.as_deref(), Some("worker"));
    assert_eq!(failed.error_class.as_deref(), Some("transient"));
    assert_eq!(failed.error_message.as_deref(), Some("timeout"));
    assert_eq!(failed.stale_after, STALE);
    assert_eq!(failed.trigger, Trigger::Schedule);
    assert_eq!(failed.zone, "UTC");
    assert_eq!(failed.wall_time, requests[1].wall);
    assert_eq!(failed.business_date, requests[1].business_date);
    assert_eq!(failed.fingerprint, 7);
    assert_eq!(failed.next_attempt_at, None);
    let started = failed.started_at.expect("started_at");
    let finished = failed.finished_at.expect("finished_at");
    assert!(failed.created_at <= started && started <= finished);
    assert_eq!(failed.updated_at, finished);
    assert!(failed.heartbeat_at.is_some());
    assert_eq!(failed.attempts.len(), 1);
    let attempt = &failed.attempts[0];
    assert_eq!(
        (
            attempt.attempt,
            attempt.owner.as_str(),
            attempt.token,
            attempt.status
        ),
        (1, "worker", leases[1].token, RunStatus::Failed)
    );
    assert_eq!(attempt.started_at, started);
    assert_eq!(attempt.finished_at, Some(finished));
    assert_eq!(attempt.message.as_deref(), Some("timeout"));

    let running = run_of(&backend, &requests[2].key).await;
    assert_eq!(running.status, RunStatus::Running);
    assert_eq!(running.finished_at, None);
    assert_eq!(running.attempts[0].status, RunStatus::Running);
    assert_eq!(running.attempts[0].finished_at, None);

    // The inherent listing reads the same records, ordered by job, slot and partition.
    let mut by_trait = AdminStore::runs(
        &backend,
        &RunFilter {
            limit: 100,
            ..RunFilter::default()
        },
    )
    .await
    .expect("runs");
    by_trait.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(backend.runs(None).await.expect("runs"), by_trait);
}

#[tokio::test]
async fn slot_times_and_watermarks() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    let mut requests = vec![
        request("hourly", "2026-01-01T00:00:00Z", STALE),
        request("hourly", "2026-01-01T01:00:00Z", STALE),
        request("hourly", "2026-01-01T03:00:00Z", STALE),
        request("other", "2026-01-01T02:00:00Z", STALE),
    ];
    requests[2].trigger = Trigger::CatchUp;
    let mut partitioned = request("hourly", "2026-01-01T01:00:00Z", STALE);
    partitioned.key.partition = "eu".to_owned();
    requests.push(partitioned);
    backend.claim("worker", &requests).await.expect("claim");
    // A skipped row counts as a slot with a row.
    backend
        .record_skipped(
            &[request("hourly", "2026-01-01T02:00:00Z", STALE)],
            "still running",
        )
        .await
        .expect("skip");
    // A manual run far ahead is a row, but not the watermark.
    let mut manual = request("hourly", "2026-01-01T09:00:00Z", STALE);
    manual.trigger = Trigger::Manual;
    let mut backfill = request("other", "2026-01-01T05:00:00Z", STALE);
    backfill.trigger = Trigger::Backfill;
    let now = Utc::now();
    let created = backend
        .enqueue(
            &[
                Enqueue {
                    request: manual,
                    not_before: now,
                },
                Enqueue {
                    request: backfill,
                    not_before: now,
                },
            ],
            &entry("trigger", "ops", "by hand"),
        )
        .await
        .expect("enqueue");
    assert!(created.iter().all(Option::is_some));

    let times = backend
        .slot_times(
            "hourly",
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T03:00:00Z"),
        )
        .await
        .expect("slot times");
    assert_eq!(
        times,
        [
            at("2026-01-01T00:00:00Z"),
            at("2026-01-01T01:00:00Z"),
            at("2026-01-01T02:00:00Z"),
        ],
        "distinct, ascending, `to` excluded"
    );
    let all = backend
        .slot_times(
            "hourly",
            at("2025-01-01T00:00:00Z"),
            at("2027-01-01T00:00:00Z"),
        )
        .await
        .expect("slot times");
    assert_eq!(all.len(), 5);
    assert_eq!(all.last(), Some(&at("2026-01-01T09:00:00Z")));
    assert!(
        backend
            .slot_times(
                "nope",
                at("2025-01-01T00:00:00Z"),
                at("2027-01-01T00:00:00Z")
            )
            .await
            .expect("slot times")
            .is_empty()
    );

    let latest = backend
        .latest_slots(&["hourly".into(), "nope".into(), "other".into()])
        .await
        .expect("latest");
    assert_eq!(
        latest,
        [
            Some(at("2026-01-01T03:00:00Z")),
            None,
            Some(at("2026-01-01T05:00:00Z")),
        ]
    );
    assert!(backend.latest_slots(&[]).await.expect("latest").is_empty());
}

#[tokio::test]
async fn a_retried_run_is_due_again_and_claimed_with_the_next_attempt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    let key = failed_run(&backend, "retry", "2026-01-01T00:00:00Z").await;
    let before = run_of(&backend, &key).await;

    let change = backend
        .retry(&key, &entry("retry", "alice", "the API is back"))
        .await
        .expect("retry");
    assert_eq!(change, RunChange::Done { run_id: before.id });
    let after = run_of(&backend, &key).await;
    assert_eq!(after.status, RunStatus::Pending);
    assert_eq!(after.finished_at, None);
    let due = after.next_attempt_at.expect("due now");
    assert!(due >= before.finished_at.expect("finished"));
    assert_eq!(after.updated_at, due);
    assert_eq!((after.key.clone(), after.attempt), (key.clone(), 1));

    let audit = backend.audit_log(Some("retry"), 10).await.expect("audit");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].run_id, Some(before.id));
    assert_eq!(audit[0].scheduled_at, Some(key.scheduled_at));
    assert_eq!(audit[0].entry, entry("retry", "alice", "the API is back"));
    assert_eq!(audit[0].at, due);

    // Pending now: a second retry is refused, and writes nothing.
    assert_eq!(
        backend
            .retry(&key, &entry("retry", "bob", "again"))
            .await
            .expect("retry"),
        RunChange::Refused {
            status: RunStatus::Pending
        }
    );
    assert_eq!(backend.audit_log(None, 10).await.expect("audit").len(), 1);

    let claimed = backend
        .claim_due("replica", &[spec("retry", 3)], 10)
        .await
        .expect("claim due");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].key, key);
    assert_eq!(claimed[0].lease.attempt, 2);
    assert!(claimed[0].lease.token > before.token);
    let run = run_of(&backend, &key).await;
    assert_eq!(run.status, RunStatus::Running);
    let attempts: Vec<(u32, RunStatus)> =
        run.attempts.iter().map(|a| (a.attempt, a.status)).collect();
    assert_eq!(attempts, [(1, RunStatus::Failed), (2, RunStatus::Running)]);

    // Running: refused. No such slot: not found.
    assert_eq!(
        backend
            .retry(&key, &entry("retry", "bob", "again"))
            .await
            .expect("retry"),
        RunChange::Refused {
            status: RunStatus::Running
        }
    );
    let unknown = SlotKey {
        scheduled_at: at("2030-01-01T00:00:00Z"),
        ..key.clone()
    };
    assert_eq!(
        backend
            .retry(&unknown, &entry("retry", "bob", "?"))
            .await
            .expect("retry"),
        RunChange::NotFound
    );
    let mut other_partition = key.clone();
    other_partition.partition = "eu".to_owned();
    assert_eq!(
        backend
            .retry(&other_partition, &entry("retry", "bob", "?"))
            .await
            .expect("retry"),
        RunChange::NotFound
    );

    // Succeeded: refused.
    assert!(
        backend
            .finish("replica", &claimed[0].lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    assert_eq!(
        backend
            .retry(&key, &entry("retry", "bob", "again"))
            .await
            .expect("retry"),
        RunChange::Refused {
            status: RunStatus::Succeeded
        }
    );
    assert_eq!(backend.audit_log(None, 10).await.expect("audit").len(), 1);
}

#[tokio::test]
async fn skipped_and_abandoned_runs_can_be_retried() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    let skipped = request("mixed", "2026-01-01T00:00:00Z", STALE);
    backend
        .record_skipped(std::slice::from_ref(&skipped), "still running")
        .await
        .expect("skip");
    let abandoned = request("mixed", "2026-01-01T01:00:00Z", STALE);
    let lease = claim_one(&backend, "worker", &abandoned).await;
    assert!(
        backend
            .finish("worker", &lease, &Finish::abandoned("shutdown", None))
            .await
            .expect("finish")
    );
    for key in [&skipped.key, &abandoned.key] {
        assert!(matches!(
            backend
                .retry(key, &entry("retry", "ops", "run it"))
                .await
                .expect("retry"),
            RunChange::Done { .. }
        ));
    }
    let claimed = backend
        .claim_due("replica", &[spec("mixed", 1)], 10)
        .await
        .expect("claim due");
    let attempts: Vec<(SlotKey, u32)> = claimed
        .iter()
        .map(|c| (c.key.clone(), c.lease.attempt))
        .collect();
    // The skipped slot never ran: its first attempt. The abandoned one had its one attempt: an
    // operator's retry grants another.
    assert_eq!(attempts, [(skipped.key, 1), (abandoned.key, 2)]);
}

#[tokio::test]
async fn a_retried_dead_run_gets_an_attempt_beyond_the_maximum() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    // Dead by a permanent error after its only attempt.
    let req = request("dead", "2026-01-01T00:00:00Z", STALE);
    let lease = claim_one(&backend, "worker", &req).await;
    let permanent = Finish::failed(ErrorClass::Permanent, "bad credentials", None);
    assert!(
        backend
            .finish("worker", &lease, &permanent)
            .await
            .expect("finish")
    );
    assert_eq!(run_of(&backend, &req.key).await.status, RunStatus::Dead);

    // Dead by exhaustion: a stale run that had its only attempt.
    let stale = request("dead", "2026-01-01T01:00:00Z", Duration::from_millis(200));
    claim_one(&backend, "crashed", &stale).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        backend
            .claim_due("replica", &[spec("dead", 1)], 10)
            .await
            .expect("claim due")
            .is_empty()
    );
    let exhausted = run_of(&backend, &stale.key).await;
    assert_eq!(exhausted.status, RunStatus::Dead);
    assert_eq!(exhausted.attempt, 1);

    for key in [&req.key, &stale.key] {
        assert!(matches!(
            backend
                .retry(key, &entry("retry", "ops", "credentials fixed"))
                .await
                .expect("retry"),
            RunChange::Done { .. }
        ));
    }
    // `pending` is not subject to the exhaustion rule: both are claimed as attempt 2 of 1.
    let claimed = backend
        .claim_due("replica", &[spec("dead", 1)], 10)
        .await
        .expect("claim due");
    let got: Vec<(SlotKey, u32)> = claimed
        .iter()
        .map(|c| (c.key.clone(), c.lease.attempt))
        .collect();
    assert_eq!(got, [(req.key.clone(), 2), (stale.key.clone(), 2)]);
    for claim in &claimed {
        let run = run_of(&backend, &claim.key).await;
        assert_eq!((run.status, run.attempt), (RunStatus::Running, 2));
        assert_eq!(run.token, claim.lease.token);
        let attempts: Vec<(u32, RunStatus, i64)> = run
            .attempts
            .iter()
            .map(|a| (a.attempt, a.status, a.token))
            .collect();
        assert_eq!(attempts.len(), 2);
        assert_ne!(attempts[0].1, RunStatus::Running);
        assert_eq!(attempts[1], (2, RunStatus::Running, claim.lease.token));
    }
}

/// Eight tasks retry one failed run at once through `handles` (round robin): exactly one is `Done`,
/// the others find it `pending`, and one audit record is written.
async fn race_retries(handles: &[SqliteBackend]) {
    let key = failed_run(&handles[0], "race", "2026-01-01T00:00:00Z").await;
    let barrier = Arc::new(Barrier::new(8));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let backend = handles[i % handles.len()].clone();
            let (key, barrier) = (key.clone(), Arc::clone(&barrier));
            tokio::spawn(async move {
                barrier.wait().await;
                backend
                    .retry(&key, &entry("retry", &format!("operator-{i}"), "race"))
                    .await
                    .expect("retry")
            })
        })
        .collect();
    let mut done = 0;
    for task in tasks {
        match task.await.expect("task") {
            RunChange::Done { .. } => done += 1,
            RunChange::Refused {
                status: RunStatus::Pending,
            } => {}
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert_eq!(done, 1);
    assert_eq!(
        handles[0].audit_log(None, 100).await.expect("audit").len(),
        1
    );
    assert_eq!(run_of(&handles[0], &key).await.status, RunStatus::Pending);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_are_done_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    race_retries(&[backend(&dir).await]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_retries_through_two_handles_are_done_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Two pools on the file, as two processes would have: they meet on SQLite's write lock only.
    race_retries(&[backend(&dir).await, backend(&dir).await]).await;
}

#[tokio::test]
async fn enqueued_runs_are_claimed_once_due() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    let existing = request("backfill", "2026-01-01T00:00:00Z", STALE);
    let first = claim_one(&backend, "worker", &existing).await;

    // A whole millisecond, as stored.
    let now = DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).expect("now");
    let mut due = request("backfill", "2026-01-01T01:00:00Z", Duration::from_secs(90));
    due.trigger = Trigger::Backfill;
    let mut later = request("backfill", "2026-01-01T02:00:00Z", STALE);
    later.trigger = Trigger::Backfill;
    let mut taken = existing.clone();
    taken.trigger = Trigger::Backfill;
    let runs = [
        Enqueue {
            request: due.clone(),
            not_before: now - chrono::Duration::seconds(1),
        },
        Enqueue {
            request: taken,
            not_before: now,
        },
        Enqueue {
            request: later.clone(),
            not_before: now + chrono::Duration::hours(1),
        },
    ];
    let audit = entry("backfill", "alice", "gap after the outage");
    let answers = backend.enqueue(&runs, &audit).await.expect("enqueue");
    assert_eq!(answers.len(), 3);
    assert!(answers[0].is_some() && answers[2].is_some());
    assert_eq!(answers[1], None, "a slot with a row is left alone");
    // Twice: nothing new.
    assert_eq!(
        backend.enqueue(&runs, &audit).await.expect("enqueue"),
        [None, None, None]
    );
    assert!(
        backend
            .enqueue(&[], &audit)
            .await
            .expect("enqueue")
            .is_empty()
    );

    let trail = backend
        .audit_log(Some("backfill"), 10)
        .await
        .expect("audit");
    let run_ids: Vec<Option<i64>> = trail.iter().map(|a| a.run_id).collect();
    assert_eq!(
        run_ids,
        [answers[2], answers[0]],
        "one record per created run"
    );
    assert!(trail.iter().all(|a| a.entry == audit));
    assert_eq!(trail[1].scheduled_at, Some(due.key.scheduled_at));

    let pending = run_of(&backend, &due.key).await;
    assert_eq!(Some(pending.id), answers[0]);
    assert_eq!((pending.status, pending.attempt), (RunStatus::Pending, 0));
    assert_eq!(pending.trigger, Trigger::Backfill);
    assert_eq!(pending.stale_after, Duration::from_secs(90));
    assert!(pending.token > first.token, "a fresh token");
    assert_eq!(pending.owner, None);
    assert_eq!(pending.heartbeat_at, None);
    assert_eq!(pending.started_at, None);
    assert_eq!(pending.finished_at, None);
    assert!(pending.attempts.is_empty());
    assert_eq!(
        pending.next_attempt_at,
        Some(now - chrono::Duration::seconds(1))
    );
    let later_run = run_of(&backend, &later.key).await;
    assert!(later_run.token > pending.token, "tokens rise");

    // Only the due one is claimed, as attempt 1, with its attempt row.
    let claimed = backend
        .claim_due("replica", &[spec("backfill", 3)], 10)
        .await
        .expect("claim due");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].key, due.key);
    assert_eq!(claimed[0].trigger, Trigger::Backfill);
    assert_eq!(claimed[0].wall, due.wall);
    assert_eq!(claimed[0].lease.attempt, 1);
    assert!(claimed[0].lease.token > later_run.token);
    let running = run_of(&backend, &due.key).await;
    assert_eq!((running.status, running.attempt), (RunStatus::Running, 1));
    assert_eq!(running.owner.as_deref(), Some("replica"));
    assert_eq!(running.attempts.len(), 1);
    assert_eq!(running.attempts[0].token, claimed[0].lease.token);
    assert_eq!(running.attempts[0].status, RunStatus::Running);
    // It runs and finishes like any run.
    assert!(
        backend
            .finish("replica", &claimed[0].lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    assert_eq!(
        run_of(&backend, &later.key).await.status,
        RunStatus::Pending,
        "not due yet"
    );
}

#[tokio::test]
async fn cancelling_a_running_run_takes_the_attempt_from_its_owner() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    let req = request("cancel", "2026-01-01T00:00:00Z", STALE);
    let lease = claim_one(&backend, "worker", &req).await;
    assert_eq!(
        backend
            .heartbeat("worker", &[lease.token])
            .await
            .expect("heartbeat"),
        [lease.token]
    );

    let audit = entry("cancel", "alice", "wrong day");
    assert_eq!(
        backend.cancel(&req.key, &audit).await.expect("cancel"),
        RunChange::Done {
            run_id: lease.run_id
        }
    );
    let run = run_of(&backend, &req.key).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error_class.as_deref(), Some("permanent"));
    assert_eq!(
        run.error_message.as_deref(),
        Some("cancelled by alice: wrong day")
    );
    assert_eq!(run.next_attempt_at, None);
    let finished = run.finished_at.expect("finished");
    assert_eq!(run.attempts.len(), 1);
    assert_eq!(run.attempts[0].status, RunStatus::Abandoned);
    assert_eq!(
        run.attempts[0].message.as_deref(),
        Some("cancelled by alice: wrong day")
    );
    assert_eq!(run.attempts[0].finished_at, Some(finished));

    // The owner finds out at its next heartbeat, and its outcome is refused.
    assert!(
        backend
            .heartbeat("worker", &[lease.token])
            .await
            .expect("heartbeat")
            .is_empty()
    );
    assert!(
        !backend
            .finish("worker", &lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    assert_eq!(run_of(&backend, &req.key).await, run, "nothing written");
    // Nothing makes it due again by itself.
    assert!(
        backend
            .claim_due("replica", &[spec("cancel", 5)], 10)
            .await
            .expect("claim due")
            .is_empty()
    );
    // Failed now: a second cancel is refused; an unknown slot is not found.
    assert_eq!(
        backend.cancel(&req.key, &audit).await.expect("cancel"),
        RunChange::Refused {
            status: RunStatus::Failed
        }
    );
    let unknown = SlotKey {
        scheduled_at: at("2030-01-01T00:00:00Z"),
        ..req.key.clone()
    };
    assert_eq!(
        backend.cancel(&unknown, &audit).await.expect("cancel"),
        RunChange::NotFound
    );
    let trail = backend.audit_log(Some("cancel"), 10).await.expect("audit");
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].run_id, Some(lease.run_id));
    assert_eq!(trail[0].at, finished);
    // An operator may still retry it.
    assert!(matches!(
        backend
            .retry(&req.key, &entry("retry", "alice", "right day after all"))
            .await
            .expect("retry"),
        RunChange::Done { .. }
    ));
}

#[tokio::test]
async fn cancelling_a_pending_run_and_refusing_finished_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    let mut manual = request("cancel", "2026-01-01T05:00:00Z", STALE);
    manual.trigger = Trigger::Manual;
    let not_before = Utc::now() + chrono::Duration::hours(1);
    let created = backend
        .enqueue(
            &[Enqueue {
                request: manual.clone(),
                not_before,
            }],
            &entry("trigger", "bob", "test run"),
        )
        .await
        .expect("enqueue");
    assert_eq!(
        backend
            .cancel(&manual.key, &entry("cancel", "bob", "not needed"))
            .await
            .expect("cancel"),
        RunChange::Done {
            run_id: created[0].expect("created")
        }
    );
    let run = run_of(&backend, &manual.key).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.next_attempt_at, None);
    assert!(run.attempts.is_empty());
    assert_eq!(
        run.error_message.as_deref(),
        Some("cancelled by bob: not needed")
    );

    let done = request("cancel", "2026-01-01T00:00:00Z", STALE);
    let lease = claim_one(&backend, "worker", &done).await;
    assert!(
        backend
            .finish("worker", &lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    assert_eq!(
        backend
            .cancel(&done.key, &entry("cancel", "bob", "?"))
            .await
            .expect("cancel"),
        RunChange::Refused {
            status: RunStatus::Succeeded
        }
    );
    let actions: Vec<String> = backend
        .audit_log(None, 10)
        .await
        .expect("audit")
        .into_iter()
        .map(|a| a.entry.action)
        .collect();
    assert_eq!(actions, ["cancel", "trigger"]);
}

#[tokio::test]
async fn the_audit_trail_is_newest_first_per_job_and_capped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    backend
        .register_jobs(&[definition("a", "* * * * *"), definition("b", "* * * * *")])
        .await
        .expect("register");
    for (i, job) in ["a", "b", "a", "b", "a"].iter().enumerate() {
        let reason = format!("change {i}");
        assert!(
            backend
                .set_paused(job, i % 2 == 0, &entry("pause", "ops", &reason))
                .await
                .expect("pause")
        );
    }
    let all = backend.audit_log(None, 100).await.expect("audit");
    let reasons: Vec<&str> = all.iter().map(|a| a.entry.reason.as_str()).collect();
    assert_eq!(
        reasons,
        ["change 4", "change 3", "change 2", "change 1", "change 0"]
    );
    assert!(
        all.windows(2)
            .all(|w| w[0].id > w[1].id && w[0].at >= w[1].at)
    );
    let only_a: Vec<(String, String)> = backend
        .audit_log(Some("a"), 100)
        .await
        .expect("audit")
        .into_iter()
        .map(|a| (a.job, a.entry.reason))
        .collect();
    let expected: Vec<(String, String)> = [4, 2, 0]
        .iter()
        .map(|i| ("a".to_owned(), format!("change {i}")))
        .collect();
    assert_eq!(only_a, expected);
    let newest = backend.audit_log(Some("a"), 2).await.expect("audit");
    assert_eq!(newest.len(), 2);
    assert_eq!(newest[0].id, all[0].id);
    assert_eq!(
        backend.audit_log(None, usize::MAX).await.expect("audit"),
        all,
        "capped, not refused"
    );
    assert!(backend.audit_log(None, 0).await.expect("audit").is_empty());
    assert!(
        backend
            .audit_log(Some("%"), 100)
            .await
            .expect("audit")
            .is_empty()
    );
}

#[tokio::test]
async fn hostile_names_are_stored_verbatim() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    let names = [
        "x'; DROP TABLE jobs; --",
        "x'; DROP TABLE slotguard_jobs; --",
        "<script>alert('x')</script>",
        "\"); DELETE FROM slotguard_job_run_audit; --",
        "정산 · 日次バッチ 🦀",
    ];
    let definitions: Vec<JobDefinition> = names
        .iter()
        .map(|name| JobDefinition {
            cron: format!("{name} cron"),
            ..definition(name, "")
        })
        .collect();
    backend.register_jobs(&definitions).await.expect("register");
    let hostile = entry("pause", "'; --<b>", "<script>reason</script>'");
    for name in names {
        assert!(
            backend
                .set_paused(name, true, &hostile)
                .await
                .expect("pause")
        );
        let mut req = request(name, "2026-01-01T00:00:00Z", STALE);
        req.key.partition = format!("{name}/p");
        req.trigger = Trigger::Manual;
        let created = backend
            .enqueue(
                &[Enqueue {
                    request: req.clone(),
                    not_before: Utc::now(),
                }],
                &entry("trigger", "'; --", name),
            )
            .await
            .expect("enqueue");
        assert!(created[0].is_some(), "{name}");
        let run = run_of(&backend, &req.key).await;
        assert_eq!(run.key, req.key);
        assert!(matches!(
            backend
                .cancel(&req.key, &entry("cancel", name, name))
                .await
                .expect("cancel"),
            RunChange::Done { .. }
        ));
        let message = format!("cancelled by {name}: {name}");
        assert_eq!(
            run_of(&backend, &req.key).await.error_message.as_deref(),
            Some(message.as_str())
        );
        let trail = backend.audit_log(Some(name), 10).await.expect("audit");
        let entries: Vec<&AuditEntry> = trail.iter().map(|a| &a.entry).collect();
        assert_eq!(
            entries,
            [
                &entry("cancel", name, name),
                &entry("trigger", "'; --", name),
                &hostile,
            ]
        );
        assert!(trail.iter().all(|a| a.job == name));
    }
    let jobs = backend.jobs().await.expect("jobs");
    let mut expected = definitions.clone();
    expected.sort_by(|a, b| a.name.cmp(&b.name));
    let stored: Vec<JobDefinition> = jobs.iter().map(|j| j.definition.clone()).collect();
    assert_eq!(stored, expected);
    assert!(jobs.iter().all(|j| j.paused));
    assert!(
        jobs.iter()
            .all(|j| j.paused_by.as_deref() == Some("'; --<b>"))
    );
    assert_eq!(
        backend.audit_log(None, 100).await.expect("audit").len(),
        3 * names.len()
    );
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'slotguard\\_%' ESCAPE '\\'",
    )
    .fetch_one(backend.pool())
    .await
    .expect("tables");
    assert_eq!(tables, 7, "every table is still there");
}
