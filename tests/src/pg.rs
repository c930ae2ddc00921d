//! PostgreSQL test schemas: the server the tests use, and a schema of a test's own, dropped with
//! everything in it when the test ends, pass or fail.
//!
//! The server is `postgres://postgres@127.0.0.1:5432/test` unless `SLOTGUARD_TEST_DATABASE_URL` says
//! otherwise. Nothing outside a test's schema is touched.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// The server the tests use: `SLOTGUARD_TEST_DATABASE_URL`, or the local `test` database.
pub fn database_url() -> String {
    std::env::var("SLOTGUARD_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// A random 64-bit number (std only: a randomly keyed hasher over a counter, the time and the
/// process id), different on every call.
pub fn random_u64() -> u64 {
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

/// Drops the schema `name` with everything in it, if it exists.
///
/// # Errors
///
/// When the server cannot be reached or refuses.
pub async fn drop_schema(name: &str) -> Result<(), sqlx::Error> {
    let mut conn = PgConnection::connect(&database_url()).await?;
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP SCHEMA IF EXISTS \"{name}\" CASCADE"
    )))
    .execute(&mut conn)
    .await?;
    conn.close().await
}

/// A schema name of a test's own, dropped (with everything in it) when this value is dropped, even
/// when the test panicked. Creating it creates nothing on the server: the backend's migrations do.
#[derive(Debug)]
pub struct TestSchema {
    /// `{prefix}_{16 hex digits}`.
    pub name: String,
}

impl TestSchema {
    /// A new name, `sg_t_` and 16 random hex digits.
    pub fn new() -> Self {
        TestSchema::with_prefix("sg_t")
    }

    /// A new name, `{prefix}_` and 16 random hex digits, for tests that want to tell their schemas
    /// apart on the server.
    pub fn with_prefix(prefix: &str) -> Self {
        TestSchema {
            name: format!("{prefix}_{:016x}", random_u64()),
        }
    }
}

impl Default for TestSchema {
    fn default() -> Self {
        TestSchema::new()
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        // Its own thread and runtime: this may run inside a test's runtime, or while it unwinds.
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(sqlx::Error::Io)?
                .block_on(drop_schema(&name))
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}: {dropped:?}", self.name);
        }
    }
}
