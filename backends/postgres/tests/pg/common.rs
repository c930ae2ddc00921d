//! A schema per test, and helpers.

use std::time::Duration;

use slotguard::store::{Claim, Lease};
use slotguard_postgres::{PgBackend, PgBackendBuilder};
pub(crate) use slotguard_tests::pg::{TestSchema, database_url, random_u64};

/// A backend in a test's schema.
pub(crate) trait Connect {
    /// A builder for a backend in this schema, with a small pool.
    fn builder(&self) -> PgBackendBuilder;

    /// A backend in this schema.
    async fn backend(&self) -> PgBackend;
}

impl Connect for TestSchema {
    fn builder(&self) -> PgBackendBuilder {
        PgBackend::builder(&database_url())
            .schema(self.name.clone())
            .pool_size(2)
    }

    async fn backend(&self) -> PgBackend {
        self.builder()
            .connect()
            .await
            .expect("connect to the test database")
    }
}

/// The tables the migrations create, by name.
pub(crate) const TABLES: [&str; 11] = [
    "calendar_overrides",
    "history_layout",
    "job_run_attempts",
    "job_run_audit",
    "job_runs",
    "job_schedules",
    "jobs",
    "lease_locks",
    "lock_keys",
    "migrations",
    "replicas",
];

/// The tables in `schema`, by name.
pub(crate) async fn tables(pool: &sqlx::PgPool, schema: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 \
         ORDER BY table_name::text COLLATE \"C\"",
    )
    .bind(schema)
    .fetch_all(pool)
    .await
    .expect("tables")
}

/// The lease of a won claim.
pub(crate) fn won(claim: &Claim) -> Lease {
    match claim {
        Claim::Won(lease) => lease.clone(),
        Claim::Taken { status } => panic!("expected to win, found the slot {status}"),
        other => panic!("expected to win, found {other:?}"),
    }
}

/// Waits up to `limit` for `check` to hold, polling.
pub(crate) async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A lock key for one test: negative and random, far from the contract's keys.
pub(crate) fn lock_key() -> i64 {
    -((random_u64() >> 2) as i64) - 1
}

/// Takes `job`'s claim lock (the backend's `LOCK_JOBS` key) in `tx`, as a claim of the job in
/// flight holds it, until `tx` ends.
pub(crate) async fn take_claim_lock(tx: &mut sqlx::PgConnection, job: &str) {
    sqlx::query("SELECT pg_advisory_xact_lock(1936486260, hashtext($1))")
        .bind(job)
        .execute(tx)
        .await
        .expect("claim lock");
}
