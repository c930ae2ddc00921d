//! Session advisory locks: loss of the session, re-entrancy, cancellation, liveness.

use std::time::{Duration, Instant};

use slotguard::store::LockStore;

use crate::common::{Connect, TestSchema, eventually, lock_key};

const LIVENESS: Duration = Duration::from_millis(500);
const SLACK: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_lock_session_cancels_its_leases_and_frees_the_keys() {
    let schema = TestSchema::new();
    let a = schema
        .builder()
        .lock_liveness_interval(LIVENESS)
        .connect()
        .await
        .expect("connect");
    let other = schema.backend().await;
    let keys = [lock_key(), lock_key()];
    let leases: Vec<_> = a
        .try_lock("a", &keys)
        .await
        .expect("lock")
        .into_iter()
        .map(|l| l.expect("free key"))
        .collect();
    let pid = a.lock_session_pid().await.expect("lock session");
    assert!(
        other
            .try_lock("b", &keys)
            .await
            .expect("lock")
            .iter()
            .all(Option::is_none)
    );

    // Nothing is lost while the session lives, across several liveness checks.
    tokio::time::sleep(LIVENESS * 3).await;
    assert!(leases.iter().all(|l| !l.lost.is_cancelled()));

    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(other.pool())
        .await
        .expect("terminate");
    assert!(terminated);
    let killed = Instant::now();
    for lease in &leases {
        tokio::time::timeout(LIVENESS + SLACK, lease.lost.cancelled())
            .await
            .expect("the lease is reported lost within the liveness interval");
    }
    eprintln!("lock loss noticed after {:?}", killed.elapsed());

    // The server released the keys: another replica takes them.
    let b = other.try_lock("b", &keys).await.expect("lock");
    assert!(b.iter().all(Option::is_some), "{b:?}");
    other.unlock("b", &keys).await.expect("unlock");

    // The first backend connects again, lazily, for its next try_lock.
    let again = a.try_lock("a", &keys).await.expect("lock after reconnect");
    assert!(again.iter().all(Option::is_some));
    let new_pid = a.lock_session_pid().await.expect("new session");
    assert_ne!(new_pid, pid);
    a.unlock("a", &keys).await.expect("unlock");
    a.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_held_once_per_process_and_one_unlock_frees_it() {
    let schema = TestSchema::new();
    let a = schema.backend().await;
    let other = schema.backend().await;
    let key = lock_key();
    // The same key twice in a batch, then again for the same owner: granted once.
    let first = a.try_lock("a", &[key, key]).await.expect("lock");
    assert!(first[0].is_some() && first[1].is_none(), "{first:?}");
    assert!(a.try_lock("a", &[key]).await.expect("lock")[0].is_none());
    assert!(a.try_lock("b", &[key]).await.expect("lock")[0].is_none());
    // One unlock, and the session holds nothing: the server's count never went above one.
    a.unlock("a", &[key]).await.expect("unlock");
    assert!(other.try_lock("c", &[key]).await.expect("lock")[0].is_some());
    other.unlock("c", &[key]).await.expect("unlock");
    a.close().await;
    other.close().await;
}

/// Keys of every shape survive the liveness check, which reads them back from `pg_locks`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liveness_reads_back_negative_and_large_keys() {
    let schema = TestSchema::new();
    let a = schema
        .builder()
        .lock_liveness_interval(Duration::from_millis(100))
        .connect()
        .await
        .expect("connect");
    let salt = (crate::common::random_u64() % 1_000_000) as i64;
    let keys = [
        i64::MIN + salt,
        i64::MAX - salt,
        -1 - salt * 4096,
        (1 << 32) + salt,
        (u32::MAX as i64) - salt,
        lock_key(),
    ];
    let leases: Vec<_> = a
        .try_lock("a", &keys)
        .await
        .expect("lock")
        .into_iter()
        .map(|l| l.expect("free key"))
        .collect();
    tokio::time::sleep(Duration::from_millis(600)).await;
    for lease in &leases {
        assert!(
            !lease.lost.is_cancelled(),
            "key {} reported lost",
            lease.key
        );
    }
    a.unlock("a", &keys).await.expect("unlock");
    a.close().await;
}

/// A `try_lock` whose caller goes away does not leave its keys held by nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_try_lock_releases_what_it_took() {
    let schema = TestSchema::new();
    let a = schema.backend().await;
    let other = schema.backend().await;
    let key = lock_key();
    // A zero timeout polls the call once (the work starts) and then drops it.
    let cancelled = tokio::time::timeout(Duration::ZERO, a.try_lock("a", &[key])).await;
    assert!(
        cancelled.is_err(),
        "the call should not have finished in one poll"
    );
    assert!(
        eventually(Duration::from_secs(5), || async {
            match other.try_lock("b", &[key]).await.expect("lock").remove(0) {
                Some(_) => {
                    other.unlock("b", &[key]).await.expect("unlock");
                    true
                }
                None => false,
            }
        })
        .await,
        "the key stayed locked after its try_lock was cancelled"
    );
    // And the first backend can take it again: it does not think it still holds it.
    assert!(a.try_lock("a", &[key]).await.expect("lock")[0].is_some());
    a.close().await;
    other.close().await;
}

/// `close` releases held locks at once and tells their holders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_releases_locks() {
    let schema = TestSchema::new();
    let a = schema.backend().await;
    let other = schema.backend().await;
    let key = lock_key();
    let lease = a
        .try_lock("a", &[key])
        .await
        .expect("lock")
        .remove(0)
        .expect("free");
    a.close().await;
    assert!(lease.lost.is_cancelled());
    assert!(other.try_lock("b", &[key]).await.expect("lock")[0].is_some());
    other.close().await;
}

/// Dropping the last handle is the fallback: the session ends and the server frees the keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_backend_releases_locks() {
    let schema = TestSchema::new();
    let a = schema.backend().await;
    let other = schema.backend().await;
    let key = lock_key();
    assert!(a.try_lock("a", &[key]).await.expect("lock")[0].is_some());
    drop(a);
    assert!(
        eventually(Duration::from_secs(10), || async {
            other
                .try_lock("b", &[key])
                .await
                .expect("lock")
                .remove(0)
                .is_some()
        })
        .await
    );
    other.close().await;
}

/// An idle lock session that died is replaced transparently by the next `try_lock`: no lock was
/// held on it, so nothing was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_idle_lock_session_is_replaced_on_the_next_try_lock() {
    let schema = TestSchema::new();
    let a = schema.backend().await;
    let other = schema.backend().await;
    let key = lock_key();
    assert!(a.try_lock("a", &[key]).await.expect("lock")[0].is_some());
    a.unlock("a", &[key]).await.expect("unlock");
    let pid = a
        .lock_session_pid()
        .await
        .expect("the session stays open between locks");
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(other.pool())
        .await
        .expect("terminate");
    assert!(terminated);
    // Give the server a moment to end the session.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lease = a
        .try_lock("a", &[key])
        .await
        .expect("lock on a new session")[0]
        .clone()
        .expect("free key");
    assert_ne!(a.lock_session_pid().await, Some(pid));
    assert!(!lease.lost.is_cancelled());
    assert!(other.try_lock("b", &[key]).await.expect("lock")[0].is_none());
    a.unlock("a", &[key]).await.expect("unlock");
    a.close().await;
    other.close().await;
}

/// `try_start` records the binary's lock keys; a second binary giving a key to another job is
/// refused before it claims anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_start_refuses_a_key_another_binary_gave_to_another_job() {
    let schema = TestSchema::new();
    let key = (crate::common::random_u64() >> 1) as i64;
    let noop = |_ctx: slotguard::JobContext| async {};
    let first = slotguard::Scheduler::builder()
        .backend(schema.backend().await)
        .lock_namespace("billing")
        .job(slotguard::Job::new("invoices", "0 2 * * *", noop).lock_key(key))
        .build()
        .expect("valid")
        .try_start()
        .await
        .expect("first binary starts");
    first.shutdown().await;
    let err = slotguard::Scheduler::builder()
        .backend(schema.backend().await)
        .lock_namespace("reports")
        .job(slotguard::Job::new("weekly", "0 3 * * 1", noop).lock_key(key))
        .build()
        .expect("valid")
        .try_start()
        .await
        .expect_err("the key belongs to `invoices`");
    let message = err.to_string();
    assert!(
        message.contains("invoices") && message.contains("weekly"),
        "{message}"
    );
}

/// A process frozen while it holds a job's lock and runs it: once its run is stale and no run of the
/// job is fresh, another replica ends its lock session (found by the owner its `application_name`
/// names) and takes the lock. While the run is fresh, or for a holder with no stale run of the job,
/// nothing is ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_holders_lock_is_broken_only_once_its_runs_are_stale() {
    use slotguard::store::{SlotStore, StaleLock};
    let schema = TestSchema::new();
    let frozen = schema
        .builder()
        .lock_liveness_interval(LIVENESS)
        .connect()
        .await
        .expect("connect");
    let other = schema.backend().await;
    let (key, idle_key) = (lock_key(), lock_key());
    let lease = frozen
        .try_lock("frozen:1", &[key, idle_key])
        .await
        .expect("lock");
    let lease = lease[0].clone().expect("free key");
    let run =
        slotguard_tests::request("frozen_job", "2026-03-01T00:00:00Z", Duration::from_secs(1));
    crate::common::won(&frozen.claim("frozen:1", &[run]).await.expect("claim")[0]);
    let ask = [
        StaleLock {
            key,
            job: "frozen_job".into(),
        },
        StaleLock {
            key: idle_key,
            job: "no_runs".into(),
        },
    ];
    assert!(
        other
            .break_stale_locks("b", &ask)
            .await
            .expect("break")
            .is_empty(),
        "a fresh run: its holder is alive"
    );
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let freed = other.break_stale_locks("b", &ask).await.expect("break");
    assert_eq!(freed, [key], "only the key whose job's run went stale");
    tokio::time::timeout(LIVENESS + SLACK, lease.lost.cancelled())
        .await
        .expect("the frozen holder hears that its lock is gone");
    let taken = eventually(SLACK, || async {
        other.try_lock("b", &[key]).await.expect("lock")[0].is_some()
    })
    .await;
    assert!(taken, "the lock is free for another replica");
    other.close().await;
    frozen.close().await;
}
