//! The stores the traces are tested on: a SQLite file and a PostgreSQL schema of the test's own.

use slotguard::SchedulerBuilder;
use slotguard_postgres::PgBackend;
use slotguard_sqlite::SqliteBackend;
use slotguard_tests::pg::{TestSchema, database_url};

/// Where a test's replicas keep their slot rows; each replica opens its own connection to it.
pub(crate) enum Store {
    Sqlite(tempfile::TempDir),
    Postgres(TestSchema),
}

impl Store {
    pub(crate) fn sqlite() -> Self {
        Store::Sqlite(tempfile::tempdir().expect("temp dir"))
    }

    pub(crate) fn postgres() -> Self {
        Store::Postgres(TestSchema::with_prefix("sg_otel"))
    }

    /// `builder` with a new backend on this store.
    pub(crate) async fn attach(&self, builder: SchedulerBuilder) -> SchedulerBuilder {
        match self {
            Store::Sqlite(dir) => {
                let path = dir.path().join("slots.db");
                builder.backend(SqliteBackend::open(path).await.expect("open"))
            }
            Store::Postgres(schema) => builder.backend(
                PgBackend::builder(&database_url())
                    .schema(schema.name.clone())
                    .connect()
                    .await
                    .expect("connect"),
            ),
        }
    }
}
