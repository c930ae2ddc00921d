//! The crate's own migrations, recorded in its own table (`slotguard_migrations`), so an application's
//! `sqlx::migrate!` on the same file never sees them.
//!
//! All of it runs in one `BEGIN IMMEDIATE` transaction: processes opening the same fresh file at once
//! queue on SQLite's write lock (within `busy_timeout`), and each one after the first finds the work
//! done. SQLite's DDL is transactional, so a failed migration leaves nothing half-applied.

use std::path::Path;

use sqlx::SqlitePool;

use crate::error::SqliteError;

/// One numbered migration.
struct Migration {
    version: i64,
    description: &'static str,
    sql: &'static str,
}

/// In order; never edit one that has shipped, add the next number instead.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "slot rows",
        sql: include_str!("../migrations/0001_slot_rows.sql"),
    },
    Migration {
        version: 2,
        description: "lease locks",
        sql: include_str!("../migrations/0002_lease_locks.sql"),
    },
    Migration {
        version: 3,
        description: "overlap and due-work index",
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
        description: "job calendars",
        sql: include_str!("../migrations/0007_job_calendars.sql"),
    },
    Migration {
        version: 8,
        description: "trace context of queued runs",
        sql: include_str!("../migrations/0008_trace_context.sql"),
    },
    Migration {
        version: 9,
        description: "schedules kept as data",
        sql: include_str!("../migrations/0009_schedules.sql"),
    },
    Migration {
        version: 10,
        description: "calendar overrides",
        sql: include_str!("../migrations/0010_calendar_overrides.sql"),
    },
    Migration {
        version: 11,
        description: "calendar stamp on runs",
        sql: include_str!("../migrations/0011_calendar_stamp.sql"),
    },
];

const CREATE_TABLE: &str = "
CREATE TABLE IF NOT EXISTS slotguard_migrations (
    version     INTEGER PRIMARY KEY,
    description TEXT    NOT NULL,
    checksum    INTEGER NOT NULL,
    applied_at  INTEGER NOT NULL
) STRICT";

/// The newest schema version this crate knows.
pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Brings the file up to [`latest_version`].
pub(crate) async fn run(pool: &SqlitePool, path: &Path) -> Result<(), SqliteError> {
    let query = |source| SqliteError::Query {
        path: path.to_owned(),
        source,
    };
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(query)?;
    sqlx::query(CREATE_TABLE)
        .execute(&mut *tx)
        .await
        .map_err(query)?;
    let applied: Vec<(i64, i64)> =
        sqlx::query_as("SELECT version, checksum FROM slotguard_migrations ORDER BY version")
            .fetch_all(&mut *tx)
            .await
            .map_err(query)?;
    let found = applied.last().map_or(0, |&(version, _)| version);
    if found > latest_version() {
        return Err(SqliteError::TooNew {
            path: path.to_owned(),
            found,
            known: latest_version(),
        });
    }
    for migration in MIGRATIONS {
        let checksum = checksum(migration.sql);
        match applied.iter().find(|(v, _)| *v == migration.version) {
            Some(&(_, recorded)) if recorded == checksum => continue,
            Some(_) => {
                return Err(SqliteError::MigrationChanged {
                    path: path.to_owned(),
                    version: migration.version,
                    description: migration.description,
                });
            }
            None => {}
        }
        let failed = |source| SqliteError::Migrate {
            path: path.to_owned(),
            version: migration.version,
            description: migration.description,
            source,
        };
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(failed)?;
        sqlx::query(concat!(
            "INSERT INTO slotguard_migrations (version, description, checksum, applied_at) ",
            "VALUES (?1, ?2, ?3, ",
            crate::now_ms!(),
            ")"
        ))
        .bind(migration.version)
        .bind(migration.description)
        .bind(checksum)
        .execute(&mut *tx)
        .await
        .map_err(failed)?;
        tracing::info!(
            path = %path.display(),
            version = migration.version,
            description = migration.description,
            "slotguard-sqlite migration applied"
        );
    }
    tx.commit().await.map_err(query)?;
    Ok(())
}

/// FNV-1a over the SQL text: enough to notice that a shipped migration was edited.
fn checksum(sql: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in sql.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_numbered_in_order() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "{}", m.description);
        }
    }
}
