//! Retries by an operator: of failed, skipped, abandoned and dead runs, and raced.

use slotguard::store::{AdminStoreExt as _, SlotStoreExt as _};
use std::sync::Arc;
use std::time::Duration;

use slotguard::ErrorClass;
use slotguard::store::{Backend, Finish, RunChange, RunRecord, RunStatus, SlotKey};
use tokio::sync::Barrier;

use super::{
    STALE, at, claim_one, entry, failed_run, finished, request, run_of, spec, store_clock,
    store_now,
};

/// A retried failed run is `pending` and due at once (by the store's clock), audited with its run
/// and slot, and claimed as the next attempt of the same run; pending, running and succeeded runs are
/// refused and unknown slots not found, writing nothing. Skipped and abandoned runs may be retried
/// too: the skipped one runs its first attempt, the abandoned one an attempt beyond its maximum.
pub async fn a_retried_run_is_due_again_and_claimed_with_the_next_attempt(backend: &dyn Backend) {
    let key = failed_run(backend, "retry", "2026-01-01T00:00:00Z").await;
    let before = retry_a_failed_run(backend, &key).await;
    claim_the_retry(backend, &key, &before).await;
    skipped_and_abandoned_runs_can_be_retried(backend).await;
    // One audit record per retry that was done, with its run and slot.
    let log = backend.audit_log(Some("retry"), 100).await.expect("audit");
    assert_eq!(log.len(), 3);
    assert_eq!(
        (log[2].run_id, log[2].scheduled_at, &log[2].entry),
        (Some(before.id), Some(key.scheduled_at), &audit())
    );
}

fn audit() -> slotguard::store::AuditEntry {
    entry("retry", "alice", "the API is back")
}

/// Retries the failed run of `key`; the run as it was before.
async fn retry_a_failed_run(backend: &dyn Backend, key: &SlotKey) -> RunRecord {
    let before = run_of(backend, key).await;
    let clock = store_now(backend).await;
    let change = backend.retry(key, &audit()).await.expect("retry");
    assert_eq!(change, RunChange::Done { run_id: before.id });
    let after = run_of(backend, key).await;
    assert_eq!(after.status, RunStatus::Pending);
    assert_eq!(after.finished_at, None);
    let due = after.next_attempt_at.expect("due now");
    assert!(due >= before.finished_at.expect("finished"));
    assert!(due >= clock && due <= store_clock(backend).await);
    assert_eq!(after.updated_at, due);
    assert_eq!((after.key.clone(), after.attempt), (key.clone(), 1));

    let trail = backend.audit_log(Some("retry"), 10).await.expect("audit");
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].run_id, Some(before.id));
    assert_eq!(trail[0].scheduled_at, Some(key.scheduled_at));
    assert_eq!(trail[0].entry, audit());
    assert_eq!(trail[0].at, due);

    // Pending now: a second retry is refused, and writes nothing.
    assert_eq!(
        backend
            .retry(key, &entry("retry", "bob", "again"))
            .await
            .expect("retry"),
        RunChange::Refused {
            status: RunStatus::Pending
        }
    );
    assert_eq!(backend.audit_log(None, 10).await.expect("audit").len(), 1);
    before
}

/// Claims the retried run of `key` and refuses what may not be retried.
async fn claim_the_retry(backend: &dyn Backend, key: &SlotKey, before: &RunRecord) {
    let claimed = backend
        .claim_due("replica", &[spec("retry", 3)], 10)
        .await
        .expect("claim due");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].key, *key);
    assert_eq!(
        (claimed[0].lease.run_id, claimed[0].lease.attempt),
        (before.id, 2)
    );
    assert!(claimed[0].lease.token > before.token);
    let run = run_of(backend, key).await;
    assert_eq!(run.status, RunStatus::Running);
    let attempts: Vec<(u32, RunStatus)> =
        run.attempts.iter().map(|a| (a.attempt, a.status)).collect();
    assert_eq!(attempts, [(1, RunStatus::Failed), (2, RunStatus::Running)]);

    let again = entry("retry", "bob", "again");
    let refused = |status| RunChange::Refused { status };
    // Running: refused. No such slot: not found.
    assert_eq!(
        backend.retry(key, &again).await.expect("retry"),
        refused(RunStatus::Running)
    );
    let unknown = SlotKey {
        scheduled_at: at("2030-01-01T00:00:00Z"),
        ..key.clone()
    };
    let mut other_partition = key.clone();
    other_partition.partition = "eu".to_owned();
    for key in [&unknown, &other_partition] {
        assert_eq!(
            backend.retry(key, &again).await.expect("retry"),
            RunChange::NotFound
        );
    }
    // Succeeded: refused.
    assert!(
        backend
            .finish_one("replica", &claimed[0].lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    assert_eq!(
        backend.retry(key, &again).await.expect("retry"),
        refused(RunStatus::Succeeded)
    );
    assert_eq!(backend.audit_log(None, 10).await.expect("audit").len(), 1);
}

async fn skipped_and_abandoned_runs_can_be_retried(backend: &dyn Backend) {
    let skipped = request("retry", "2026-01-01T01:00:00Z", STALE);
    backend
        .record_skipped(std::slice::from_ref(&skipped), "still running")
        .await
        .expect("skip");
    let abandoned = request("retry", "2026-01-01T02:00:00Z", STALE);
    finished(
        backend,
        "worker",
        &abandoned,
        &Finish::abandoned("shutdown", None),
    )
    .await;
    for key in [&skipped.key, &abandoned.key] {
        assert!(matches!(
            backend.retry(key, &audit()).await.expect("retry"),
            RunChange::Done { .. }
        ));
    }
    let claimed = backend
        .claim_due("replica", &[spec("retry", 1)], 10)
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

/// A run dead by a permanent error, one dead by exhaustion (stale after its only attempt) and one
/// handed over at shutdown with no attempts left are each claimed again after an operator's retry:
/// `claim_due` counts attempts only for stale and abandoned runs, not for `pending` ones.
pub async fn a_retried_dead_run_gets_an_attempt_beyond_the_maximum(backend: &dyn Backend) {
    let specs = [spec("dead", 1)];
    let audit = entry("retry", "ops", "credentials fixed");
    let [permanent, handed, stale] = three_dead_runs(backend).await;
    for (key, _) in [&permanent, &handed, &stale] {
        assert!(matches!(
            backend.retry(key, &audit).await.expect("retry"),
            RunChange::Done { .. }
        ));
    }
    // Each is claimed as attempt 2 of 1, oldest slot first.
    let claimed = backend
        .claim_due("replica", &specs, 10)
        .await
        .expect("claim due");
    let got: Vec<(SlotKey, i64, u32)> = claimed
        .iter()
        .map(|c| (c.key.clone(), c.lease.run_id, c.lease.attempt))
        .collect();
    assert_eq!(
        got,
        [permanent, handed, stale].map(|(key, id)| (key, id, 2))
    );
    for claim in &claimed {
        let run = run_of(backend, &claim.key).await;
        assert_eq!(
            (run.status, run.attempt, run.token),
            (RunStatus::Running, 2, claim.lease.token)
        );
        let attempts: Vec<(u32, RunStatus, i64)> = run
            .attempts
            .iter()
            .map(|a| (a.attempt, a.status, a.token))
            .collect();
        assert_eq!(attempts.len(), 2);
        assert_ne!(attempts[0].1, RunStatus::Running);
        assert_eq!(attempts[1], (2, RunStatus::Running, claim.lease.token));
        assert!(
            backend
                .finish_one("replica", &claim.lease, &Finish::succeeded())
                .await
                .expect("finish")
        );
    }
}

/// Three dead runs of `dead` (one attempt allowed), oldest slot first, with their ids: by a
/// permanent error, handed over at shutdown with no attempts left, stale after its only attempt.
async fn three_dead_runs(backend: &dyn Backend) -> [(SlotKey, i64); 3] {
    let permanent = request("dead", "2026-01-01T00:00:00Z", STALE);
    let permanent_id = finished(
        backend,
        "worker",
        &permanent,
        &Finish::failed(ErrorClass::Permanent, "bad credentials", None),
    )
    .await;
    assert_eq!(
        run_of(backend, &permanent.key).await.status,
        RunStatus::Dead
    );
    let handed = request("dead", "2026-01-01T00:30:00Z", STALE);
    let handed_id = finished(
        backend,
        "worker",
        &handed,
        &Finish::abandoned("shutdown", Some(Duration::ZERO)),
    )
    .await;
    let stale = request("dead", "2026-01-01T01:00:00Z", Duration::from_millis(200));
    let stale_id = claim_one(backend, "crashed", &stale).await.run_id;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        backend
            .claim_due("replica", &[spec("dead", 1)], 10)
            .await
            .expect("claim due")
            .is_empty()
    );
    assert_eq!(run_of(backend, &handed.key).await.status, RunStatus::Dead);
    let exhausted = run_of(backend, &stale.key).await;
    assert_eq!(exhausted.status, RunStatus::Dead);
    assert_eq!(exhausted.attempt, 1);
    [
        (permanent.key, permanent_id),
        (handed.key, handed_id),
        (stale.key, stale_id),
    ]
}

/// Eight tasks retry one failed run at once through `handles` (round robin): exactly one is `Done`,
/// the others find it `pending`, one audit record is written, and the run gets exactly one new
/// attempt.
pub async fn concurrent_retries_are_done_once<B: Backend + Clone>(handles: &[B]) {
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
    let backend = &handles[0];
    assert_eq!(backend.audit_log(None, 100).await.expect("audit").len(), 1);
    assert_eq!(run_of(backend, &key).await.status, RunStatus::Pending);
    let specs = [spec("race", 3)];
    let due = backend.claim_due("b", &specs, 10).await.expect("due");
    assert_eq!(due.len(), 1);
    assert_eq!((due[0].key.clone(), due[0].lease.attempt), (key.clone(), 2));
    assert!(
        backend
            .claim_due("c", &specs, 10)
            .await
            .expect("due")
            .is_empty()
    );
    let run = run_of(backend, &key).await;
    assert_eq!((run.status, run.attempts.len()), (RunStatus::Running, 2));
}
