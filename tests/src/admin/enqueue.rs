//! Runs an operator asks for: manual and backfill runs.

use slotguard::store::{AdminStoreExt as _, SlotStoreExt as _};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::store::{AuditEntry, Backend, Enqueue, Finish, Lease, RunStatus, Trigger};

use super::{STALE, claim_one, enqueue, entry, finished, request, run_of, spec, store_now};

const JOB: &str = "queue";

/// The batch every step reads: the requests, what enqueue answered, and the instants used.
struct Batch {
    runs: Vec<Enqueue>,
    answers: Vec<Option<i64>>,
    running: Lease,
    now: DateTime<Utc>,
    later: DateTime<Utc>,
}

/// Enqueue creates a `pending` run (attempt 0, no owner, a fresh token) once per slot: not for a slot
/// with a row, running or finished (which is left alone), nor for a slot named twice in one batch,
/// nor again on a second call. Each created run is audited once, in request order. Due runs are
/// claimed as attempt 1, oldest slot first, with an attempt row, and run like any other; a run not
/// due yet waits.
pub async fn enqueued_runs_are_created_once_and_claimed_once_due(backend: &dyn Backend) {
    let batch = enqueue_the_batch(backend).await;
    the_created_runs_wait(backend, &batch).await;
    the_due_runs_are_claimed(backend, &batch).await;
}

fn audit() -> AuditEntry {
    entry("backfill", "alice", "gap after the outage")
}

async fn enqueue_the_batch(backend: &dyn Backend) -> Batch {
    let existing = request(JOB, "2026-01-01T00:00:00Z", STALE);
    let running = claim_one(backend, "worker", &existing).await;
    let done = request(JOB, "2026-01-01T00:30:00Z", STALE);
    finished(backend, "worker", &done, &Finish::succeeded()).await;

    let now = store_now(backend).await;
    let later = now + chrono::Duration::hours(1);
    let mut due = enqueue(
        JOB,
        "2026-01-01T01:00:00Z",
        Trigger::Backfill,
        now - chrono::Duration::seconds(1),
    );
    due.request.stale_after = Duration::from_secs(90);
    let mut on_done = enqueue(JOB, "2026-01-01T00:30:00Z", Trigger::Manual, now);
    on_done.request.zone = "Asia/Tokyo".into();
    let manual = enqueue(JOB, "2026-01-01T05:00:00Z", Trigger::Manual, now);
    let runs = vec![
        due,
        enqueue(JOB, "2026-01-01T00:00:00Z", Trigger::Backfill, now),
        enqueue(JOB, "2026-01-01T02:00:00Z", Trigger::Backfill, later),
        manual.clone(),
        on_done,
        enqueue(JOB, "2025-12-01T00:00:00Z", Trigger::Backfill, now),
        // The same slot twice in one batch: created for its first request only.
        manual,
    ];
    let answers = backend.enqueue(&runs, &audit()).await.expect("enqueue");
    assert_eq!(answers.len(), 7);
    let created: Vec<bool> = answers.iter().map(Option::is_some).collect();
    assert_eq!(
        created,
        [true, false, true, true, false, true, false],
        "a slot with a row is left alone: {answers:?}"
    );
    // Again: every row exists, nothing is created or audited.
    assert_eq!(
        backend.enqueue(&runs, &audit()).await.expect("enqueue"),
        [None; 7]
    );
    assert!(
        backend
            .enqueue(&[], &audit())
            .await
            .expect("enqueue")
            .is_empty()
    );
    Batch {
        runs,
        answers,
        running,
        now,
        later,
    }
}

async fn the_created_runs_wait(backend: &dyn Backend, batch: &Batch) {
    let (runs, answers) = (&batch.runs, &batch.answers);
    // One audit record per created run, in request order (the trail is newest first).
    let trail = backend.audit_log(Some(JOB), 10).await.expect("audit");
    let audited: Vec<_> = trail
        .iter()
        .rev()
        .map(|a| (a.run_id, a.scheduled_at, &a.entry))
        .collect();
    let audit = audit();
    assert_eq!(
        audited,
        [0, 2, 3, 5].map(|i| (answers[i], Some(runs[i].request.key.scheduled_at), &audit))
    );

    let pending = run_of(backend, &runs[0].request.key).await;
    assert_eq!(Some(pending.id), answers[0]);
    assert_eq!((pending.status, pending.attempt), (RunStatus::Pending, 0));
    assert_eq!(pending.trigger, Trigger::Backfill);
    assert_eq!(pending.stale_after, Duration::from_secs(90));
    assert!(pending.token > batch.running.token, "a fresh token");
    assert_eq!((pending.owner, pending.heartbeat_at), (None, None));
    assert_eq!((pending.started_at, pending.finished_at), (None, None));
    assert!(pending.attempts.is_empty());
    assert_eq!(
        pending.next_attempt_at,
        Some(batch.now - chrono::Duration::seconds(1))
    );
    let manual = run_of(backend, &runs[3].request.key).await;
    assert_eq!(
        (manual.status, manual.attempt, manual.trigger),
        (RunStatus::Pending, 0, Trigger::Manual)
    );
    assert_eq!(manual.next_attempt_at, Some(batch.now));
    assert_eq!(manual.stale_after, STALE);
    let later = run_of(backend, &runs[2].request.key).await;
    assert!(later.token > pending.token, "tokens rise");
    let untouched = run_of(backend, &runs[4].request.key).await;
    assert_eq!(
        (untouched.status, untouched.zone.as_str()),
        (RunStatus::Succeeded, "UTC")
    );
    let running = run_of(backend, &runs[1].request.key).await;
    assert_eq!(
        (running.status, running.trigger),
        (RunStatus::Running, Trigger::Schedule)
    );
}

async fn the_due_runs_are_claimed(backend: &dyn Backend, batch: &Batch) {
    let (runs, answers) = (&batch.runs, &batch.answers);
    let later = run_of(backend, &runs[2].request.key).await;
    let claimed = backend
        .claim_due("replica", &[spec(JOB, 3)], 10)
        .await
        .expect("claim due");
    let got: Vec<_> = claimed
        .iter()
        .map(|d| (Some(d.lease.run_id), d.lease.attempt, d.trigger))
        .collect();
    assert_eq!(
        got,
        [
            (answers[5], 1, Trigger::Backfill),
            (answers[0], 1, Trigger::Backfill),
            (answers[3], 1, Trigger::Manual)
        ]
    );
    for (claim, i) in claimed.iter().zip([5, 0, 3]) {
        let request = &runs[i].request;
        assert_eq!(claim.key, request.key);
        assert_eq!(claim.wall, request.wall);
        assert!(claim.lease.token > later.token);
        let run = run_of(backend, &claim.key).await;
        assert_eq!((run.status, run.attempt), (RunStatus::Running, 1));
        assert_eq!(run.owner.as_deref(), Some("replica"));
        let attempts: Vec<_> = run
            .attempts
            .iter()
            .map(|a| (a.attempt, a.status, a.token))
            .collect();
        assert_eq!(attempts, [(1, RunStatus::Running, claim.lease.token)]);
        // It runs and finishes like any run.
        assert!(
            backend
                .finish_one("replica", &claim.lease, &Finish::succeeded())
                .await
                .expect("finish")
        );
    }
    let waiting = run_of(backend, &runs[2].request.key).await;
    assert_eq!(waiting.status, RunStatus::Pending, "not due yet");
    assert_eq!(waiting.next_attempt_at, Some(batch.later));
}

/// Of 20 triggers of one job at once, from as many tasks, every one gets a manual run of its own, at a
/// slot of its own, none on a whole second; all are audited.
pub async fn concurrent_triggers_each_get_a_run<B: Backend + Clone>(backend: &B) {
    use slotguard_admin::{Admin, ChangeRequest};

    backend
        .register_jobs(&[super::definition(JOB, "0 * * * *", 7)])
        .await
        .expect("register");
    let admin = Admin::new(backend.clone());
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(20));
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let (admin, barrier) = (admin.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let by = ChangeRequest::new("ops", format!("trigger {i}"));
                admin.trigger(JOB, &by).await
            })
        })
        .collect();
    let mut slots = Vec::new();
    for task in tasks {
        let triggered = task
            .await
            .expect("task")
            .expect("every trigger is accepted");
        assert_ne!(triggered.scheduled_at.timestamp_subsec_millis(), 0);
        slots.push(triggered.scheduled_at);
    }
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 20, "{slots:?}");
    let audit = backend.audit_log(Some(JOB), 100).await.expect("audit");
    assert_eq!(audit.len(), 20);
}
