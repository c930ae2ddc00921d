//! A schema per test, and helpers.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use slotguard::store::{Claim, Lease};
use slotguard_postgres::{PgBackend, PgBackendBuilder};
use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// The server the tests use.
pub(crate) fn database_url() -> String {
    std::env::var("SLOTGUARD_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A random 64-bit number (std only: a randomly keyed hasher over time and a counter).
pub(crate) fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// A schema of the test's own, dropped (with everything in it) when this value is dropped, even
/// when the test panicked.
pub(crate) struct TestSchema {
    pub(crate) name: String,
}

impl TestSchema {
    pub(crate) fn new() -> Self {
        TestSchema {
            name: format!("sg_t_{:016x}", random_u64()),
        }
    }

    /// A builder for a backend in this schema, with a small pool.
    pub(crate) fn builder(&self) -> PgBackendBuilder {
        PgBackend::builder(&database_url())
            .schema(self.name.clone())
            .pool_size(2)
    }

    /// A backend in this schema.
    pub(crate) async fn backend(&self) -> PgBackend {
        self.builder()
            .connect()
            .await
            .expect("connect to the test database")
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        // Its own thread and runtime: this may run while a test's runtime is unwinding.
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let mut conn = PgConnection::connect(&database_url()).await?;
                sqlx::raw_sql(AssertSqlSafe(format!(
                    "DROP SCHEMA IF EXISTS \"{name}\" CASCADE"
                )))
                .execute(&mut conn)
                .await?;
                conn.close().await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}: {dropped:?}", self.name);
        }
    }
}

/// The tables the migrations create, by name.
pub(crate) const TABLES: [&str; 6] = [
    "job_run_attempts",
    "job_run_audit",
    "job_runs",
    "jobs",
    "lock_keys",
    "migrations",
];

/// The tables in `schema`, by name.
pub(crate) async fn tables(pool: &sqlx::PgPool, schema: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
    )
    .bind(schema)
    .fetch_all(pool)
    .await
    .expect("tables")
}

/// The lease of a won claim.
pub(crate) fn won(claim: &Claim) -> Lease {
    match claim {
        Claim::Won(lease) => *lease,
        Claim::Taken { status } => panic!("expected to win, found the slot {status}"),
        Claim::NotDue => panic!("expected to win, found the slot not due"),
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
