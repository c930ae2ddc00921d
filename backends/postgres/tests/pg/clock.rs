//! A claim that waited for another claimer of its job: the heartbeat it writes is the time it
//! claimed, not the time its transaction began waiting. Written with the wait, a run is stale the
//! moment it is claimed, and another replica takes it over while its body runs (the claim storm's
//! duplicate executions, PERFORMANCE.md).

use std::time::Duration;

use slotguard::store::{Claim, DueSpec, Finish, SlotStore, SlotStoreExt as _};
use slotguard::{ErrorClass, Overlap};
use slotguard_tests::{request, with_overlap};
use sqlx::Connection as _;

use crate::common::{Connect, TestSchema, database_url, random_u64, won};

/// Stale after this; the other claimer holds the job's claim lock for longer.
const STALE: Duration = Duration::from_millis(800);
const HELD: Duration = Duration::from_millis(1_500);

/// Holds `job`'s transaction-level claim lock (as a claim of it in progress does) for [`HELD`].
async fn hold_claim_lock(job: &str) -> tokio::task::JoinHandle<()> {
    let mut conn = sqlx::PgConnection::connect(&database_url())
        .await
        .expect("connect");
    let mut tx = conn.begin().await.expect("begin");
    sqlx::query("SELECT pg_advisory_xact_lock(1936486260, hashtext($1))")
        .bind(job)
        .execute(&mut *tx)
        .await
        .expect("claim lock");
    drop(tx);
    let job = job.to_owned();
    tokio::spawn(async move {
        let mut tx = conn.begin().await.expect("begin");
        sqlx::query("SELECT pg_advisory_xact_lock(1936486260, hashtext($1))")
            .bind(&job)
            .execute(&mut *tx)
            .await
            .expect("claim lock");
        tokio::time::sleep(HELD).await;
        tx.commit().await.expect("commit");
    })
}

fn unique_job(what: &str) -> String {
    format!("clock_{what}_{}", random_u64())
}

#[tokio::test]
async fn a_claim_that_waited_is_fresh_when_it_is_won() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let job = unique_job("claim");
    let slot = with_overlap(request(&job, "2026-03-01T02:00:00Z", STALE), Overlap::Skip);
    let holder = hold_claim_lock(&job).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let first = backend
        .claim("waited", std::slice::from_ref(&slot))
        .await
        .expect("claim");
    holder.await.expect("holder");
    let lease = won(&first[0]);
    assert_eq!(lease.attempt, 1);
    let second = backend
        .claim("other", std::slice::from_ref(&slot))
        .await
        .expect("claim");
    assert!(
        matches!(second[0], Claim::Taken { .. }),
        "a run claimed a moment ago was taken over: {second:?}"
    );
    let held = backend
        .heartbeat("waited", &[lease.token])
        .await
        .expect("heartbeat");
    assert_eq!(held, vec![lease.token], "the claimer lost its run");
    backend.close().await;
}

#[tokio::test]
async fn a_due_claim_that_waited_is_fresh_when_it_is_won() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let job = unique_job("due");
    let slot = with_overlap(request(&job, "2026-03-01T02:00:00Z", STALE), Overlap::Skip);
    let lease = won(&backend.claim("a", &[slot]).await.expect("claim")[0]);
    let retry = Finish::failed(ErrorClass::Transient, "boom", Some(Duration::ZERO));
    assert!(
        backend
            .finish_one("a", &lease, &retry)
            .await
            .expect("finish")
    );
    let specs = [DueSpec {
        job: job.clone(),
        max_attempts: 5,
        overlap: Overlap::Skip,
        limit: None,
        cluster_limit: None,
        ahead: std::time::Duration::ZERO,
    }];
    let holder = hold_claim_lock(&job).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let due = backend.claim_due("waited", &specs, 10).await.expect("due");
    holder.await.expect("holder");
    assert_eq!(due.len(), 1, "the retry was not handed out: {due:?}");
    let other = backend.claim_due("other", &specs, 10).await.expect("due");
    assert!(
        other.is_empty(),
        "a retry claimed a moment ago was taken over: {other:?}"
    );
    backend.close().await;
}

/// What the fix rests on: in a transaction, a statement sqlx has prepared and cached reads
/// `statement_timestamp()` as the time it is executed, after whatever the transaction waited for
/// before it, whereas `now()` stays at the transaction's start.
#[tokio::test]
async fn a_cached_statement_reads_its_own_start() {
    let mut conn = sqlx::PgConnection::connect(&database_url())
        .await
        .expect("connect");
    let read = "SELECT now(), statement_timestamp(), clock_timestamp()";
    type Times = (
        chrono::DateTime<chrono::Utc>,
        chrono::DateTime<chrono::Utc>,
        chrono::DateTime<chrono::Utc>,
    );
    // Prepared and cached on this connection.
    let _: Times = sqlx::query_as(read)
        .fetch_one(&mut conn)
        .await
        .expect("read");
    let mut tx = conn.begin().await.expect("begin");
    sqlx::query("SELECT pg_sleep(0.5)")
        .execute(&mut *tx)
        .await
        .expect("wait");
    let (now, statement, clock): Times = sqlx::query_as(read)
        .fetch_one(&mut *tx)
        .await
        .expect("read");
    tx.rollback().await.expect("rollback");
    let waited = (statement - now).num_milliseconds();
    assert!(
        waited >= 450,
        "statement_timestamp() {waited} ms after now()"
    );
    assert!((clock - statement).num_milliseconds() < 100);
}
