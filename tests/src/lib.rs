//! The contract every backend passes, and helpers shared by the integration tests.
//!
//! Each check takes the backend under test and the staleness threshold it should use; checks that need
//! a stale heartbeat sleep past it with `tokio::time::sleep`, which is instant in paused time (memory
//! backend) and real time against a database, whose own clock judges staleness.

use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::RunOutcome;
use slotguard::store::{Backend, Claim, ClaimRequest, SlotKey, Trigger};

/// A claim request for `job` at `scheduled_at`.
pub fn request(job: &str, scheduled_at: &str, stale_after: Duration) -> ClaimRequest {
    let at = DateTime::parse_from_rfc3339(scheduled_at)
        .expect("valid RFC 3339")
        .with_timezone(&Utc);
    ClaimRequest {
        key: SlotKey {
            job: job.to_owned(),
            scheduled_at: at,
            partition: String::new(),
        },
        trigger: Trigger::Schedule,
        zone: "UTC".to_owned(),
        wall: at.naive_utc(),
        business_date: at.date_naive(),
        fingerprint: 7,
        stale_after,
    }
}

fn won(claim: &Claim) -> slotguard::store::Lease {
    match claim {
        Claim::Won(lease) => *lease,
        Claim::Taken { status } => panic!("expected to win the claim, found it {status}"),
    }
}

/// A slot is claimed once; a batch is answered in order; tokens rise.
pub async fn claims_are_exclusive(backend: &dyn Backend) {
    let stale = Duration::from_secs(60);
    let batch = [
        request("contract_a", "2026-01-01T00:00:00Z", stale),
        request("contract_a", "2026-01-01T00:01:00Z", stale),
        request("contract_b", "2026-01-01T00:00:00Z", stale),
    ];
    let first = backend.claim("one", &batch).await.expect("claim");
    assert_eq!(first.len(), 3);
    let leases: Vec<_> = first.iter().map(won).collect();
    assert!(leases.iter().all(|l| l.attempt == 1));
    assert!(
        leases.windows(2).all(|w| w[0].token < w[1].token),
        "{leases:?}"
    );
    let second = backend.claim("two", &batch).await.expect("claim");
    assert!(
        second.iter().all(|c| matches!(c, Claim::Taken { .. })),
        "{second:?}"
    );
    // The same owner cannot claim it twice either.
    let again = backend.claim("one", &batch[..1]).await.expect("claim");
    assert!(matches!(again[0], Claim::Taken { .. }));
}

/// Only the holder of the current token may finish a run; heartbeats answer with the tokens held.
pub async fn writes_are_fenced(backend: &dyn Backend, stale_after: Duration) {
    let req = request("contract_fence", "2026-01-01T00:00:00Z", stale_after);
    let a = won(&backend
        .claim("a", std::slice::from_ref(&req))
        .await
        .expect("claim")[0]);
    assert_eq!(
        backend
            .heartbeat("a", &[a.token, a.token + 1_000_000])
            .await
            .expect("heartbeat"),
        vec![a.token]
    );
    assert!(
        backend
            .heartbeat("b", &[a.token])
            .await
            .expect("heartbeat")
            .is_empty()
    );
    // Not stale yet: nobody else may take it.
    assert!(matches!(
        backend
            .claim("b", std::slice::from_ref(&req))
            .await
            .expect("claim")[0],
        Claim::Taken { .. }
    ));
    tokio::time::sleep(stale_after + stale_after / 2 + Duration::from_millis(200)).await;
    let b = won(&backend
        .claim("b", std::slice::from_ref(&req))
        .await
        .expect("claim")[0]);
    assert_eq!(b.attempt, 2);
    assert_eq!(b.run_id, a.run_id);
    assert!(b.token > a.token);
    // "a" wakes up late: its heartbeat and its completion are refused.
    assert!(
        backend
            .heartbeat("a", &[a.token])
            .await
            .expect("heartbeat")
            .is_empty()
    );
    assert!(
        !backend
            .finish("a", &a, &RunOutcome::Succeeded)
            .await
            .expect("finish")
    );
    assert!(
        backend
            .finish("b", &b, &RunOutcome::Succeeded)
            .await
            .expect("finish")
    );
    // Finished rows are never claimed again, stale or not.
    tokio::time::sleep(stale_after * 2).await;
    assert!(matches!(
        backend
            .claim("c", std::slice::from_ref(&req))
            .await
            .expect("claim")[0],
        Claim::Taken { .. }
    ));
    // A second completion with the winning token is refused too.
    assert!(
        !backend
            .finish("b", &b, &RunOutcome::Succeeded)
            .await
            .expect("finish")
    );
}

/// Locks are exclusive per key, and only their owner releases them.
pub async fn locks_are_exclusive(backend: &dyn Backend) {
    let keys = [9_001, 9_002];
    let a = backend.try_lock("a", &keys).await.expect("lock");
    assert!(a.iter().all(Option::is_some));
    let b = backend.try_lock("b", &keys).await.expect("lock");
    assert!(b.iter().all(Option::is_none));
    backend.unlock("b", &keys).await.expect("unlock");
    assert!(backend.try_lock("b", &keys[..1]).await.expect("lock")[0].is_none());
    backend.unlock("a", &keys).await.expect("unlock");
    let b = backend.try_lock("b", &keys).await.expect("lock");
    assert!(b.iter().all(Option::is_some));
    backend.unlock("b", &keys).await.expect("unlock");
}
