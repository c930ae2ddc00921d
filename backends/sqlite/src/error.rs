//! What can go wrong with the file, each error naming it.

use std::path::PathBuf;

use slotguard::store::StoreError;

/// An SQLite store could not do what was asked. Every variant names the database file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteError {
    /// The builder was given settings that cannot work.
    #[error("invalid settings for the SQLite store at {}: {reason}", path.display())]
    Config {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file could not be opened or created.
    #[error("cannot open the SQLite store at {}: {source}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: sqlx::Error,
    },
    /// A migration failed; the file is left at the version before it.
    #[error("cannot migrate the SQLite store at {} to version {version} ({description}): {source}", path.display())]
    Migrate {
        /// The database file.
        path: PathBuf,
        /// The migration that failed.
        version: i64,
        /// Its description.
        description: &'static str,
        /// What SQLite said.
        #[source]
        source: sqlx::Error,
    },
    /// A migration already applied to the file differs from the one this version of the crate ships.
    #[error(
        "the SQLite store at {} has migration {version} ({description}) applied with different SQL; \
         it was written by an incompatible slotguard-sqlite",
        path.display()
    )]
    MigrationChanged {
        /// The database file.
        path: PathBuf,
        /// The migration.
        version: i64,
        /// Its description.
        description: &'static str,
    },
    /// The file was migrated by a newer version of this crate.
    #[error(
        "the SQLite store at {} is at schema version {found}, newer than the {known} this \
         slotguard-sqlite knows; upgrade it",
        path.display()
    )]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// The highest version applied to the file.
        found: i64,
        /// The highest version this crate ships.
        known: i64,
    },
    /// A statement failed.
    #[error("SQLite store at {}: {source}", path.display())]
    Query {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: sqlx::Error,
    },
    /// A row holds a value this crate never writes (edited by hand, or by a newer version).
    #[error("SQLite store at {}: unexpected {what} {value:?} in run {run_id}", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// The run holding the value.
        run_id: i64,
        /// Which value.
        what: &'static str,
        /// The value found.
        value: String,
    },
    /// A job or audit row holds a value this crate never writes.
    #[error("SQLite store at {}: unexpected {what} {value:?} in {table} row {row}", path.display())]
    CorruptRecord {
        /// The database file.
        path: PathBuf,
        /// The table holding the value.
        table: &'static str,
        /// The row's key (a job's name, an audit record's id).
        row: String,
        /// Which value.
        what: &'static str,
        /// The value found.
        value: String,
    },
}

impl SqliteError {
    /// Whether the store is unreachable for now (busy beyond the timeout, I/O, disk full, pool
    /// closed) rather than refusing the request; nothing was changed either way.
    pub fn is_unavailable(&self) -> bool {
        match self {
            SqliteError::Open { .. } => true,
            SqliteError::Query { source, .. } | SqliteError::Migrate { source, .. } => {
                unavailable(source)
            }
            _ => false,
        }
    }
}

impl From<SqliteError> for slotguard::RunOnceError {
    /// For a run-once program (`Scheduler::run_once`): a file that cannot be opened, created,
    /// migrated or read is [`RunOnceError::Store`](slotguard::RunOnceError::Store) (exit 4,
    /// retried); settings that cannot work, or a file written by an incompatible or newer version,
    /// are [`RunOnceError::Config`](slotguard::RunOnceError::Config) (exit 2).
    fn from(e: SqliteError) -> Self {
        match e {
            SqliteError::Config { .. }
            | SqliteError::MigrationChanged { .. }
            | SqliteError::TooNew { .. } => slotguard::RunOnceError::Config(e.to_string()),
            _ => slotguard::RunOnceError::Store(StoreError::from(e)),
        }
    }
}

impl From<SqliteError> for StoreError {
    fn from(e: SqliteError) -> Self {
        if e.is_unavailable() {
            StoreError::unavailable(e.to_string()).with_source(e)
        } else {
            StoreError::rejected(e.to_string()).with_source(e)
        }
    }
}

fn unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            // sqlx reports SQLite's extended result code; its low byte is the primary code.
            let code = db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(0) & 0xff;
            matches!(
                code,
                5   // SQLITE_BUSY: another process held the write lock past busy_timeout
                | 6  // SQLITE_LOCKED
                | 7  // SQLITE_NOMEM
                | 8  // SQLITE_READONLY
                | 10 // SQLITE_IOERR
                | 13 // SQLITE_FULL
                | 14 // SQLITE_CANTOPEN
                | 15 // SQLITE_PROTOCOL
            )
        }
        _ => false,
    }
}
