//! The library's own migrations, in its own schema and its own migrations table.
//!
//! An application's `sqlx::migrate!` keeps its `_sqlx_migrations` table in its own schema; ours is
//! `<schema>.migrations(version, description, applied_at)`, so neither ever sees the other's
//! versions. Starting replicas race to migrate; a transaction-scoped advisory lock per schema
//! serializes them, and the one that comes second finds everything applied.

use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// One numbered migration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) description: &'static str,
    /// The SQL, with `{schema}` standing for the schema's quoted name.
    pub(crate) sql: &'static str,
}

/// Every migration, in order. Append only: an applied migration is never edited.
///
/// A migration must work on both layouts of the history (`partitions.rs`): on a partitioned
/// `job_runs`, `ADD COLUMN` reaches every partition and `CREATE INDEX` builds on each (never
/// `CONCURRENTLY`), and a unique key must hold `scheduled_at`.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "slot rows",
        sql: include_str!("../migrations/0001_slot_rows.sql"),
    },
    Migration {
        version: 2,
        description: "lock keys",
        sql: include_str!("../migrations/0002_lock_keys.sql"),
    },
    Migration {
        version: 3,
        description: "overlap and due indexes",
        sql: include_str!("../migrations/0003_overlap_and_due.sql"),
    },
    Migration {
        version: 4,
        description: "jobs and audit trail",
        sql: include_str!("../migrations/0004_admin.sql"),
    },
    Migration {
        version: 5,
        description: "checkpoints",
        sql: include_str!("../migrations/0005_checkpoints.sql"),
    },
    Migration {
        version: 6,
        description: "replica registry and retention indexes",
        sql: include_str!("../migrations/0006_replicas_and_retention.sql"),
    },
    Migration {
        version: 7,
        description: "dashboard indexes",
        sql: include_str!("../migrations/0007_dashboard_indexes.sql"),
    },
    Migration {
        version: 8,
        description: "queue: active runs by slot",
        sql: include_str!("../migrations/0008_queue.sql"),
    },
    Migration {
        version: 9,
        description: "job calendars",
        sql: include_str!("../migrations/0009_job_calendars.sql"),
    },
    Migration {
        version: 10,
        description: "trace context of queued runs",
        sql: include_str!("../migrations/0010_trace_context.sql"),
    },
    Migration {
        version: 11,
        description: "schedules kept as data",
        sql: include_str!("../migrations/0011_schedules.sql"),
    },
    Migration {
        version: 12,
        description: "fencing tokens that never repeat",
        sql: include_str!("../migrations/0012_token_floor.sql"),
    },
    Migration {
        version: 13,
        description: "owner presence",
        sql: include_str!("../migrations/0013_owner_presence.sql"),
    },
    Migration {
        version: 14,
        description: "calendar overrides",
        sql: include_str!("../migrations/0014_calendar_overrides.sql"),
    },
    Migration {
        version: 15,
        description: "calendar stamp on runs",
        sql: include_str!("../migrations/0015_calendar_stamp.sql"),
    },
    Migration {
        version: 16,
        description: "lock leases",
        sql: include_str!("../migrations/0016_lease_locks.sql"),
    },
    Migration {
        version: 17,
        description: "history layout",
        sql: include_str!("../migrations/0017_history_layout.sql"),
    },
    Migration {
        version: 18,
        description: "queue order",
        sql: include_str!("../migrations/0018_queue_order.sql"),
    },
    Migration {
        version: 19,
        description: "queue collation",
        sql: include_str!("../migrations/0019_queue_collation.sql"),
    },
    Migration {
        version: 20,
        description: "running runs found by job",
        sql: include_str!("../migrations/0020_running_runs_by_job.sql"),
    },
];

/// The first half of the two-`int4` advisory-lock key that serializes migrations (ASCII `slot`);
/// the second half is `hashtext(schema)`. The two-key form lives in a different lock space from the
/// single `bigint` keys that jobs lock, so the two can never collide.
pub(crate) const MIGRATION_LOCK_CLASS: i32 = 0x736c_6f74;

/// Where a migration failed.
#[derive(Debug)]
pub(crate) struct MigrateFailure {
    pub(crate) version: i64,
    pub(crate) description: &'static str,
    pub(crate) source: sqlx::Error,
}

fn at(version: i64, description: &'static str) -> impl FnOnce(sqlx::Error) -> MigrateFailure {
    move |source| MigrateFailure {
        version,
        description,
        source,
    }
}

/// Applies every migration that `schema` lacks, in one transaction, under the schema's migration
/// lock (a transaction lock, so this works through a transaction pooler too). Returns the versions
/// applied now. `prepared`: whether the statements may be prepared and kept (not through a
/// pooler).
pub(crate) async fn run(
    conn: &mut PgConnection,
    schema: &str,
    quoted_schema: &str,
    prepared: bool,
) -> Result<Vec<i64>, MigrateFailure> {
    let mut tx = conn.begin().await.map_err(at(0, "begin"))?;
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .persistent(prepared)
        .bind(MIGRATION_LOCK_CLASS)
        .bind(schema)
        .execute(&mut *tx)
        .await
        .map_err(at(0, "take the migration lock"))?;

    // `CREATE SCHEMA IF NOT EXISTS` checks the CREATE privilege on the database even when the schema
    // exists; look first so that a role which may only use an existing schema can start.
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .persistent(prepared)
            .bind(schema)
            .fetch_one(&mut *tx)
            .await
            .map_err(at(0, "look up the schema"))?;
    if !exists {
        sqlx::raw_sql(AssertSqlSafe(format!("CREATE SCHEMA {quoted_schema}")))
            .execute(&mut *tx)
            .await
            .map_err(at(0, "create the schema"))?;
    }
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {quoted_schema}.migrations (
             version     bigint      PRIMARY KEY,
             description text        NOT NULL,
             applied_at  timestamptz NOT NULL DEFAULT now()
         )"
    )))
    .execute(&mut *tx)
    .await
    .map_err(at(0, "create the migrations table"))?;

    let applied: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT version FROM {quoted_schema}.migrations ORDER BY version"
    )))
    .persistent(prepared)
    .fetch_all(&mut *tx)
    .await
    .map_err(at(0, "read the applied migrations"))?;

    let mut now_applied = Vec::new();
    for m in MIGRATIONS {
        if applied.contains(&m.version) {
            continue;
        }
        sqlx::raw_sql(AssertSqlSafe(m.sql.replace("{schema}", quoted_schema)))
            .execute(&mut *tx)
            .await
            .map_err(at(m.version, m.description))?;
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {quoted_schema}.migrations (version, description) VALUES ($1, $2)"
        )))
        .persistent(prepared)
        .bind(m.version)
        .bind(m.description)
        .execute(&mut *tx)
        .await
        .map_err(at(m.version, m.description))?;
        now_applied.push(m.version);
    }
    if let Some(newest) = applied.last().filter(|&&v| v > latest_version()) {
        // A newer release migrated this schema. Its changes are additive by policy, so this release
        // keeps working; say so, because a rollback of the binary is the usual cause.
        tracing::warn!(
            schema,
            applied = newest,
            known = latest_version(),
            "the slotguard schema was migrated by a newer release"
        );
    }
    tx.commit().await.map_err(at(0, "commit"))?;
    Ok(now_applied)
}

/// The newest version this release knows.
pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

#[cfg(test)]
mod tests {
    use super::MIGRATIONS;

    #[test]
    fn versions_are_numbered_in_order_and_name_the_schema() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1);
            assert!(m.sql.contains("{schema}."), "{}", m.description);
        }
    }
}
