//! The library's own migrations: own schema, own table, idempotent, safe to race.

use slotguard_postgres::{PgBackend, PgError};
use tokio::task::JoinSet;

use crate::common::{Connect, TABLES, TestSchema, database_url, tables};

async fn applied(backend: &PgBackend) -> Vec<(i64, String)> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT version, description FROM \"{}\".migrations ORDER BY version",
        backend.schema()
    )))
    .fetch_all(backend.pool())
    .await
    .expect("migrations table")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_replicas_starting_at_once_migrate_a_fresh_schema_once() {
    let schema = TestSchema::new();
    let mut set = JoinSet::new();
    for _ in 0..5 {
        let builder = schema.builder().pool_size(1);
        set.spawn(async move { builder.connect().await });
    }
    let mut backends = Vec::new();
    while let Some(result) = set.join_next().await {
        backends.push(result.expect("task").expect("connect and migrate"));
    }
    let want = vec![
        (1, "slot rows".to_owned()),
        (2, "lock keys".to_owned()),
        (3, "overlap and due indexes".to_owned()),
        (4, "jobs and audit trail".to_owned()),
        (5, "checkpoints".to_owned()),
        (6, "replica registry and retention indexes".to_owned()),
        (7, "dashboard indexes".to_owned()),
        (8, "queue: active runs by slot".to_owned()),
        (9, "job calendars".to_owned()),
        (10, "trace context of queued runs".to_owned()),
        (11, "schedules kept as data".to_owned()),
        (12, "fencing tokens that never repeat".to_owned()),
        (13, "owner presence".to_owned()),
        (14, "calendar overrides".to_owned()),
        (15, "calendar stamp on runs".to_owned()),
        (16, "lock leases".to_owned()),
        (17, "history layout".to_owned()),
        (18, "queue order".to_owned()),
        (19, "queue collation".to_owned()),
        (20, "running runs found by job".to_owned()),
    ];
    assert_eq!(applied(&backends[0]).await, want);

    // Idempotent: connecting again applies nothing and changes nothing.
    let again = schema.backend().await;
    assert_eq!(applied(&again).await, want);

    // The application's own migrator never sees ours: nothing named like sqlx's table here, and
    // our table is in our schema only.
    let sqlx_table: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
        .bind(format!("\"{}\"._sqlx_migrations", schema.name))
        .fetch_one(again.pool())
        .await
        .expect("to_regclass");
    assert_eq!(sqlx_table, None);
    assert_eq!(tables(again.pool(), &schema.name).await, TABLES);
    for b in backends {
        b.close().await;
    }
    again.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_names_are_validated() {
    for bad in ["Slotguard", "1x", "x\"; DROP SCHEMA public; --", ""] {
        let err = PgBackend::builder(&database_url())
            .schema(bad)
            .connect()
            .await
            .expect_err("invalid schema");
        assert!(matches!(err, PgError::InvalidSchema(_)), "{bad}: {err}");
    }
}

/// The status CHECK constraint holds even against hand-written rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_are_constrained() {
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let err = sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO \"{}\".job_runs (job_name, scheduled_at, status, fencing_token, stale_after, zone,
             wall_time, business_date, \"trigger\", schedule_fingerprint)
         VALUES ('j', now(), 'exploded', 1, '1 minute', 'UTC', now(), current_date, 'schedule', 0)",
        schema.name
    )))
    .execute(backend.pool())
    .await
    .expect_err("unknown status");
    assert!(err.to_string().contains("job_runs_status_check"), "{err}");
    backend.close().await;
}
