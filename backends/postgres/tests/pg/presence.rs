//! A dead owner noticed at once: the runs of a backend whose sessions ended are made stale when
//! their heartbeat is half their threshold old, not at the threshold; a backend that is alive but
//! silent, and a run claimed without a presence key, wait out the threshold.

use std::time::Duration;

use slotguard::Overlap;
use slotguard::store::{Claim, ClaimRequest, DueSpec, RunStatus, SlotStore};
use slotguard_postgres::PgBackend;
use slotguard_tests::request;
use tokio::time::Instant;

use crate::common::{Connect, TestSchema, database_url, random_u64, won};

/// The stale threshold of the watched runs: gone owners' runs are taken over after half of it.
const STALE: Duration = Duration::from_secs(6);

/// A backend whose presence session is up: it claimed a slot of a job nobody else touches.
async fn present(schema: &TestSchema, owner: &str) -> PgBackend {
    let backend = schema.backend().await;
    let beacon = request(
        &format!("beacon-{owner}"),
        "2026-03-01T00:00:00Z",
        STALE * 10,
    );
    won(&backend.claim(owner, &[beacon]).await.expect("claim")[0]);
    backend
}

/// Claims `slot` for `owner` every 100 ms until it is won or `limit` passes; the time it took.
async fn take_over(
    backend: &PgBackend,
    owner: &str,
    slot: &ClaimRequest,
    limit: Duration,
) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        let claim = backend.claim(owner, std::slice::from_ref(slot)).await;
        if let Claim::Won(lease) = &claim.expect("claim")[0] {
            assert_eq!(lease.attempt, 2, "a take-over is the run's second attempt");
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_backends_run_is_taken_over_at_half_its_threshold() {
    let schema = TestSchema::new();
    let live = present(&schema, "live").await;
    let dead = schema.backend().await;
    let slot = request("settle", "2026-03-01T02:00:00Z", STALE);
    let legacy = request("legacy", "2026-03-01T02:00:00Z", STALE);
    let recover = request("recover", "2026-03-01T02:00:00Z", STALE);
    let claims = dead
        .claim("dead", &[slot.clone(), legacy.clone(), recover])
        .await;
    let claimed = Instant::now();
    assert!(
        claims
            .expect("claim")
            .iter()
            .all(|c| matches!(c, Claim::Won(_)))
    );
    // A row claimed by a version without presence has no key: it is never judged by it.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE \"{}\".job_runs SET presence = NULL WHERE job_name = 'legacy'",
        schema.name
    )))
    .execute(live.pool())
    .await
    .expect("clear the presence key");
    // What `kill -9` does to the process's sessions: they end, and the presence key is free.
    dead.close().await;

    let found = take_over(&live, "live", &slot, STALE - Duration::from_secs(1)).await;
    let took = claimed.elapsed();
    assert!(
        found.is_some(),
        "the gone backend's run was not taken over before its stale threshold"
    );
    assert!(
        took >= STALE / 2 - Duration::from_millis(300),
        "taken over after {took:?}: before its heartbeat was half its threshold old"
    );
    let runs = live.runs(Some("settle")).await.expect("runs");
    let statuses: Vec<_> = runs[0].attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [RunStatus::Abandoned, RunStatus::Running]);

    // The recovery path takes the gone backend's other run over once, and the new attempt is
    // fresh: recovery does not hand it out again.
    let spec = |job: &str| DueSpec {
        job: job.into(),
        max_attempts: 5,
        overlap: Overlap::Skip,
        limit: None,
        cluster_limit: None,
        ahead: std::time::Duration::ZERO,
    };
    let recovered = live.claim_due("live", &[spec("recover")], 10).await;
    let recovered = recovered.expect("claim_due");
    assert_eq!(recovered.len(), 1, "the gone backend's run is due");
    assert_eq!(recovered[0].lease.attempt, 2);
    let again = live.claim_due("live", &[spec("recover")], 10).await;
    assert!(
        again.expect("claim_due").is_empty(),
        "the new attempt is fresh"
    );

    let legacy_run = &live.runs(Some("legacy")).await.expect("runs")[0];
    assert_eq!(legacy_run.status, RunStatus::Running);
    assert_eq!(
        legacy_run.attempt, 1,
        "a run without a key waits out its threshold"
    );
    assert!(matches!(
        live.claim("live", &[legacy]).await.expect("claim")[0],
        Claim::Taken { .. }
    ));
    live.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_backend_that_is_still_there_waits_out_its_threshold() {
    let schema = TestSchema::new();
    let watcher = present(&schema, "watcher").await;
    let silent = schema.backend().await;
    let slot = request("silent", "2026-03-01T02:00:00Z", STALE);
    won(&silent
        .claim("silent", std::slice::from_ref(&slot))
        .await
        .expect("claim")[0]);
    let claimed = Instant::now();
    // No heartbeat: the run's heartbeat ages past half its threshold while its owner is present.
    let early = take_over(&watcher, "watcher", &slot, STALE - Duration::from_secs(1)).await;
    assert_eq!(
        early, None,
        "a present owner's run was taken over before its threshold"
    );
    let run = &watcher.runs(Some("silent")).await.expect("runs")[0];
    assert_eq!(run.attempt, 1);
    let late = take_over(&watcher, "watcher", &slot, Duration::from_secs(5)).await;
    assert!(late.is_some(), "taken over at its threshold");
    // The heartbeat was written before the claim answered: allow for that round trip.
    assert!(claimed.elapsed() >= STALE - Duration::from_millis(300));
    silent.close().await;
    watcher.close().await;
}

/// The presence session of backend `app` (its `application_name`): its server pid and its key.
async fn presence_session(pool: &sqlx::PgPool, app: &str) -> Option<(i32, i64)> {
    sqlx::query_as(
        "SELECT l.pid, l.objid::bigint FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE l.locktype = 'advisory' AND l.classid = 1886545267::oid AND l.objsubid = 2 \
           AND l.granted AND a.application_name = $1",
    )
    .bind(format!("{app} (slotguard presence)"))
    .fetch_optional(pool)
    .await
    .expect("pg_locks")
}

/// The presence session of `app` once `accept` takes it, or as it is after 3 s.
async fn await_presence(
    pool: &sqlx::PgPool,
    app: &str,
    accept: impl Fn(Option<(i32, i64)>) -> bool,
) -> Option<(i32, i64)> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let found = presence_session(pool, app).await;
        if accept(found) || Instant::now() >= deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A presence session ended under a live backend (`pg_terminate_backend`, as an operator or a
/// pooler restart might) is made again, with the same key, within about a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presence_session_ended_under_a_live_backend_is_made_again() {
    let schema = TestSchema::new();
    let app = format!("sgp{}", random_u64() % 1_000_000);
    let url = database_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    let backend = PgBackend::builder(&format!("{url}{sep}application_name={app}"))
        .schema(schema.name.clone())
        .pool_size(2)
        .connect()
        .await
        .expect("connect");
    let pool = backend.pool().clone();
    assert_eq!(
        presence_session(&pool, &app).await,
        None,
        "no presence before the first claim"
    );
    let beacon = request("beacon", "2026-03-01T00:00:00Z", STALE);
    won(&backend.claim("me", &[beacon]).await.expect("claim")[0]);
    let first = await_presence(&pool, &app, |found| found.is_some()).await;
    assert!(first.is_some(), "the first claim made the presence session");
    let (pid, key) = first.expect("checked");
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&pool)
        .await
        .expect("terminate");
    assert!(ended);
    let again = await_presence(&pool, &app, |found| found.is_some_and(|(p, _)| p != pid)).await;
    let remade = again.is_some_and(|(p, _)| p != pid);
    assert!(remade, "the presence session was not made again: {again:?}");
    assert_eq!(
        again.map(|(_, k)| k),
        Some(key),
        "the same key is held again"
    );
    backend.close().await;
}
