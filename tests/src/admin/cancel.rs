//! Cancellation by an operator.

use slotguard::store::{AdminStoreExt as _, SlotStoreExt as _};
use slotguard::store::{Backend, Finish, Lease, RunChange, RunStatus, SlotKey, Trigger};

use super::{STALE, at, claim_one, enqueue, entry, finished, request, run_of, spec, store_now};

const JOB: &str = "cancel";

/// Cancelling a running run fails it permanently and abandons its attempt: the holder loses it at
/// its next heartbeat, its outcome is refused and nothing claims it again. A pending (enqueued) run
/// is cancelled before anyone claims it. Cancelled and finished runs are refused, unknown slots not
/// found; a cancelled run may still be retried; every change is audited.
pub async fn cancelling_takes_the_run_from_its_holder_or_the_queue(backend: &dyn Backend) {
    let (key, lease) = cancel_a_running_run(backend).await;
    the_holder_finds_out(backend, &key, &lease).await;
    cancel_a_pending_run(backend).await;

    // Finished runs are refused.
    let done = request(JOB, "2026-01-01T02:00:00Z", STALE);
    finished(backend, "worker", &done, &Finish::succeeded()).await;
    assert_eq!(
        backend
            .cancel(&done.key, &entry("cancel", "bob", "?"))
            .await
            .expect("cancel"),
        RunChange::Refused {
            status: RunStatus::Succeeded
        }
    );
    // An operator may still retry the cancelled run.
    assert!(matches!(
        backend
            .retry(&key, &entry("retry", "alice", "right day after all"))
            .await
            .expect("retry"),
        RunChange::Done { .. }
    ));
    let log = backend.audit_log(None, 100).await.expect("audit");
    let actions: Vec<_> = log.iter().map(|a| a.entry.action.as_str()).collect();
    assert_eq!(actions, ["retry", "cancel", "trigger", "cancel"]);
    assert!(log.iter().all(|a| a.job == JOB));
    assert_eq!(log[3].run_id, Some(lease.run_id));
}

const MESSAGE: &str = "cancelled by alice: wrong day";

/// Cancels a running run; its key and the lease its holder still has.
async fn cancel_a_running_run(backend: &dyn Backend) -> (SlotKey, Lease) {
    let req = request(JOB, "2026-01-01T00:00:00Z", STALE);
    let lease = claim_one(backend, "holder", &req).await;
    assert_eq!(
        backend
            .heartbeat("holder", &[lease.token])
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
    let run = run_of(backend, &req.key).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error_class.as_deref(), Some("permanent"));
    assert_eq!(run.error_message.as_deref(), Some(MESSAGE));
    assert_eq!(run.next_attempt_at, None);
    let finished = run.finished_at.expect("finished");
    let attempts: Vec<_> = run
        .attempts
        .iter()
        .map(|a| (a.status, a.message.as_deref(), a.finished_at))
        .collect();
    assert_eq!(
        attempts,
        [(RunStatus::Abandoned, Some(MESSAGE), Some(finished))]
    );
    let trail = backend.audit_log(Some(JOB), 10).await.expect("audit");
    assert_eq!(trail.len(), 1);
    assert_eq!(trail[0].run_id, Some(lease.run_id));
    assert_eq!(trail[0].at, finished);
    (req.key, lease)
}

/// The holder of the cancelled run of `key` finds out at its next heartbeat, and its outcome is
/// refused; nothing makes the run due again, and a second cancel is refused.
async fn the_holder_finds_out(backend: &dyn Backend, key: &SlotKey, lease: &Lease) {
    let run = run_of(backend, key).await;
    assert!(
        backend
            .heartbeat("holder", &[lease.token])
            .await
            .expect("heartbeat")
            .is_empty()
    );
    assert!(
        !backend
            .finish_one("holder", lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    assert_eq!(run_of(backend, key).await, run, "nothing written");
    assert!(
        backend
            .claim_due("replica", &[spec(JOB, 5)], 10)
            .await
            .expect("claim due")
            .is_empty()
    );
    let audit = entry("cancel", "alice", "wrong day");
    assert_eq!(
        backend.cancel(key, &audit).await.expect("cancel"),
        RunChange::Refused {
            status: RunStatus::Failed
        }
    );
    let unknown = SlotKey {
        scheduled_at: at("2030-01-01T00:00:00Z"),
        ..key.clone()
    };
    let mut nobody = key.clone();
    nobody.job = "nobody".into();
    for key in [&unknown, &nobody] {
        assert_eq!(
            backend.cancel(key, &audit).await.expect("cancel"),
            RunChange::NotFound
        );
    }
}

async fn cancel_a_pending_run(backend: &dyn Backend) {
    let later = store_now(backend).await + chrono::Duration::hours(1);
    let queued = enqueue(JOB, "2026-01-01T01:00:00Z", Trigger::Manual, later);
    let created = backend
        .enqueue(
            std::slice::from_ref(&queued),
            &entry("trigger", "bob", "test run"),
        )
        .await
        .expect("enqueue");
    assert_eq!(
        backend
            .cancel(&queued.request.key, &entry("cancel", "bob", "not needed"))
            .await
            .expect("cancel"),
        RunChange::Done {
            run_id: created[0].expect("created")
        }
    );
    let run = run_of(backend, &queued.request.key).await;
    assert_eq!(
        (run.status, run.next_attempt_at, run.attempts.len()),
        (RunStatus::Failed, None, 0)
    );
    assert_eq!(
        run.error_message.as_deref(),
        Some("cancelled by bob: not needed")
    );
}
