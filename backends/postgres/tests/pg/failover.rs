//! Fencing tokens when the database goes back in time: a failover to an asynchronous standby loses
//! the last commits, and the token sequence's last values with them.

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use slotguard::store::{Lease, SlotStore};
use slotguard_tests::request;

use sqlx::Connection as _;

use crate::common::{Connect, TestSchema, database_url, won};

const STALE: Duration = Duration::from_secs(30);

#[test]
fn a_token_is_never_granted_twice_after_the_counter_goes_back_and_the_replica_says_so() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (before, after) = metrics::with_local_recorder(&recorder, || runtime.block_on(went_back()));
    assert!(
        after.token > before.token,
        "token {} granted after the counter went back is not above {} granted before",
        after.token,
        before.token
    );
    let reported: Vec<u64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            let key = key.key();
            key.name() == "store_failovers_total"
                && key
                    .labels()
                    .any(|l| l.key() == "signal" && l.value() == "tokens_went_back")
        })
        .filter_map(|(.., value)| match value {
            DebugValue::Counter(n) => Some(n),
            _ => None,
        })
        .collect();
    assert_eq!(
        reported,
        vec![1],
        "store_failovers_total{{signal=tokens_went_back}}"
    );
}

/// Claims a slot, sets the token counter back to 1 (as the lost commits would), ends the backend's
/// session (as the failover does) and claims another slot: the two leases.
async fn went_back() -> (Lease, Lease) {
    let schema = TestSchema::new();
    let backend = schema
        .builder()
        .pool_size(1)
        .connect()
        .await
        .expect("connect");
    let before = won(&claim(&backend, "2026-03-01T02:00:00Z").await);
    // A plain session: a backend would raise the floor itself on connecting.
    let mut other = sqlx::PgConnection::connect(&database_url())
        .await
        .expect("connect");
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(backend.pool())
        .await
        .expect("pid");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT setval('\"{}\".fencing_tokens', 1)",
        schema.name
    )))
    .execute(&mut other)
    .await
    .expect("setval");
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .execute(&mut other)
        .await
        .expect("terminate");
    let after = won(&claim(&backend, "2026-03-01T02:01:00Z").await);
    backend.close().await;
    let _ = other.close().await;
    (before, after)
}

/// Claims `slot` of job `settle`, once more if the first try met the session that was ended.
async fn claim(backend: &slotguard_postgres::PgBackend, slot: &str) -> slotguard::store::Claim {
    let requests = [request("settle", slot, STALE)];
    let claimed = match backend.claim("r1", &requests).await {
        Ok(claimed) => claimed,
        Err(_) => backend.claim("r1", &requests).await.expect("claim again"),
    };
    claimed.into_iter().next().expect("one answer")
}
