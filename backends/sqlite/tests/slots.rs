//! Slot rows beyond the contract: what each outcome records, recovery of an abandoned run, and
//! staleness judged per row by the host clock.

use slotguard::store::SlotStoreExt as _;
use std::time::Duration;

use slotguard::ErrorClass;
use slotguard::store::{Claim, Finish, Lease, RunStatus, SlotStore};
use slotguard_sqlite::SqliteBackend;
use slotguard_tests::request;

async fn backend(dir: &tempfile::TempDir) -> SqliteBackend {
    SqliteBackend::open(dir.path().join("slots.db"))
        .await
        .expect("open")
}

fn won(claim: &Claim) -> Lease {
    match claim {
        Claim::Won(lease) => lease.clone(),
        Claim::Taken { status } => panic!("expected to win, found {status}"),
        other => panic!("expected to win, found {other:?}"),
    }
}

#[tokio::test]
async fn outcomes_are_recorded_on_the_run_and_its_attempt() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    let stale = Duration::from_secs(60);
    let batch = [
        request("outcomes", "2026-01-01T00:00:00Z", stale),
        request("outcomes", "2026-01-01T00:01:00Z", stale),
        request("outcomes", "2026-01-01T00:02:00Z", stale),
        request("outcomes", "2026-01-01T00:03:00Z", stale),
    ];
    let leases: Vec<Lease> = backend
        .claim("me", &batch)
        .await
        .expect("claim")
        .iter()
        .map(won)
        .collect();
    let outcomes = [
        Finish::succeeded(),
        Finish::failed(ErrorClass::Transient, "connection reset", None),
        Finish::failed(ErrorClass::Permanent, "bad credentials", None),
        Finish::abandoned("shutdown", None),
    ];
    for (lease, outcome) in leases.iter().zip(&outcomes) {
        assert!(
            backend
                .finish_one("me", lease, outcome)
                .await
                .expect("finish")
        );
    }
    let runs = backend.runs(Some("outcomes")).await.expect("runs");
    let got: Vec<_> = runs
        .iter()
        .map(|r| {
            (
                r.status,
                r.error_class.as_deref(),
                r.error_message.as_deref(),
                r.attempts[0].status,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (RunStatus::Succeeded, None, None, RunStatus::Succeeded),
            (
                RunStatus::Failed,
                Some("transient"),
                Some("connection reset"),
                RunStatus::Failed
            ),
            // Permanent: the run needs a person; the attempt itself merely failed.
            (
                RunStatus::Dead,
                Some("permanent"),
                Some("bad credentials"),
                RunStatus::Failed
            ),
            (
                RunStatus::Abandoned,
                None,
                Some("shutdown"),
                RunStatus::Abandoned
            ),
        ]
    );
    assert!(runs.iter().all(|r| r.attempts[0].finished_at.is_some()));
    // Finished rows answer Taken with their status.
    let again = backend.claim("other", &batch).await.expect("claim");
    let statuses: Vec<_> = again
        .iter()
        .map(|c| match c {
            Claim::Taken { status } => *status,
            Claim::Won(_) => panic!("finished run claimed again"),
            other => panic!("a past slot answered {other:?}"),
        })
        .collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Succeeded,
            RunStatus::Failed,
            RunStatus::Dead,
            RunStatus::Abandoned
        ]
    );
}

#[tokio::test]
async fn an_abandoned_run_is_recovered_with_a_new_attempt() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Two pools on the file: the "process" that died and the one that recovers.
    let (dead, alive) = (backend(&dir).await, backend(&dir).await);
    let stale = Duration::from_millis(300);
    let quick = request("recover", "2026-01-01T00:00:00Z", stale);
    // A row with a long threshold in the same batch stays taken: staleness is judged per row.
    let slow = request("recover", "2026-01-01T00:01:00Z", Duration::from_secs(600));
    let first: Vec<Lease> = dead
        .claim("dead", &[quick.clone(), slow.clone()])
        .await
        .expect("claim")
        .iter()
        .map(won)
        .collect();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let second = alive
        .claim("alive", &[quick.clone(), slow.clone()])
        .await
        .expect("claim");
    let lease = won(&second[0]);
    assert!(matches!(
        second[1],
        Claim::Taken {
            status: RunStatus::Running
        }
    ));
    assert_eq!((lease.run_id, lease.attempt), (first[0].run_id, 2));
    assert!(lease.token > first[1].token, "tokens rise across the file");

    let runs = alive.runs(Some("recover")).await.expect("runs");
    let run = &runs[0];
    assert_eq!(run.owner.as_deref(), Some("alive"));
    assert_eq!(run.token, lease.token);
    assert_eq!(run.attempts.len(), 2);
    assert_eq!(run.attempts[0].status, RunStatus::Abandoned);
    assert_eq!(run.attempts[0].owner, "dead");
    assert_eq!(
        run.attempts[0].message.as_deref(),
        Some("heartbeat expired")
    );
    assert_eq!(run.attempts[1].status, RunStatus::Running);
    assert_eq!(run.attempts[1].token, lease.token);

    // A heartbeat keeps a short-threshold row from going stale.
    let keep = request("recover", "2026-01-01T00:02:00Z", stale);
    let kept = won(&alive
        .claim("alive", std::slice::from_ref(&keep))
        .await
        .expect("claim")[0]);
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(
            alive
                .heartbeat("alive", &[kept.token])
                .await
                .expect("heartbeat"),
            vec![kept.token]
        );
    }
    assert!(matches!(
        dead.claim("dead", &[keep]).await.expect("claim")[0],
        Claim::Taken { .. }
    ));
    // The dead process's late outcome is refused.
    assert!(
        !dead
            .finish_one("dead", &first[0], &Finish::succeeded())
            .await
            .expect("finish")
    );
}

#[tokio::test]
async fn empty_calls_touch_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = backend(&dir).await;
    assert!(backend.claim("me", &[]).await.expect("claim").is_empty());
    assert!(
        backend
            .heartbeat("me", &[])
            .await
            .expect("heartbeat")
            .is_empty()
    );
    assert!(backend.runs(None).await.expect("runs").is_empty());
}
