//! The backend's error type, and the redaction of connection URLs that go into it.

use slotguard::store::StoreError;

/// What can go wrong in the PostgreSQL backend.
///
/// Every variant that names the database carries the URL with its password replaced by `***`, so an
/// error can be logged as it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The URL could not be parsed.
    #[error("invalid PostgreSQL URL {url}: {source}")]
    InvalidUrl {
        /// The URL, password redacted.
        url: String,
        /// Why it was refused.
        #[source]
        source: sqlx::Error,
    },

    /// The database could not be reached, or refused the connection.
    #[error("cannot connect to PostgreSQL at {url}: {}", described(source))]
    Connect {
        /// The URL, password redacted.
        url: String,
        /// What the driver reported.
        #[source]
        source: sqlx::Error,
    },

    /// The schema name is not a plain lower-case SQL identifier.
    #[error(
        "invalid schema name `{}`: use 1 to 63 characters of a-z, 0-9 and _, not starting with a digit",
        slotguard_cron::shown_within(.0, 64)
    )]
    InvalidSchema(String),

    /// A migration of the library's schema failed; the transaction was rolled back, so nothing of it
    /// was applied.
    #[error(
        "migration {version} ({description}) of schema {schema} at {url} failed: {}",
        described(source)
    )]
    Migrate {
        /// The URL, password redacted.
        url: String,
        /// The library's schema.
        schema: String,
        /// The migration's number (0 while taking the migration lock or reading the applied versions).
        version: i64,
        /// The migration's description, or the step that failed.
        description: &'static str,
        /// What the database reported.
        #[source]
        source: sqlx::Error,
    },

    /// Two statements on one connection ran in two different server sessions: a transaction-mode
    /// pooler (PgBouncer `pool_mode = transaction`) sits between us and the database. Session
    /// advisory locks cannot work through it; point the backend at the database directly or at a
    /// session-mode pool.
    #[error(
        "session advisory locks need a dedicated server session, but {url} handed out backend {first} \
         and then backend {second} on one connection: is a transaction-mode pooler (PgBouncer) in \
         between? Connect to PostgreSQL directly or use session pooling"
    )]
    TransactionPooler {
        /// The URL, password redacted.
        url: String,
        /// The server process id of the first statement.
        first: i32,
        /// The server process id of a later statement on the same connection.
        second: i32,
    },

    /// The backend was told it reaches the database through a transaction-mode pooler
    /// ([`PgBackendBuilder::transaction_pooler`](crate::PgBackendBuilder::transaction_pooler)), and
    /// a job asked it for a session advisory lock, which such a pooler cannot hold.
    #[error(
        "session advisory locks cannot be held through a transaction-mode pooler: give the `lock` \
         level lease rows instead (Store::full(backend).with_locks(PgLeaseLocks), or \
         SchedulerBuilder::lock_store), or connect to PostgreSQL directly"
    )]
    SessionLocksThroughPooler,

    /// A lock key is already registered to another job, in this or another application sharing the
    /// database. Give one of the jobs an explicit key.
    #[error(
        "lock key {key} is registered to job `{}` of namespace `{}`, not to job `{}` of namespace \
         `{}`: give one of them an explicit lock key",
        slotguard_cron::shown_within(registered_job, 64),
        slotguard_cron::shown_within(registered_namespace, 64),
        slotguard_cron::shown_within(job, 64),
        slotguard_cron::shown_within(namespace, 64)
    )]
    LockKeyCollision {
        /// The key.
        key: i64,
        /// The namespace that registered it first.
        registered_namespace: String,
        /// The job that registered it first.
        registered_job: String,
        /// The namespace asking now.
        namespace: String,
        /// The job asking now.
        job: String,
    },

    /// The database holds a value this version of the library does not know (a newer version wrote
    /// it, or someone edited a row by hand).
    #[error("unexpected value {value:?} in column {column}")]
    UnexpectedValue {
        /// The column.
        column: &'static str,
        /// The value.
        value: String,
    },

    /// The library's schema has no table this part of it needs: it was never migrated, or by an
    /// older version. [`PgLeaseLocks`](crate::PgLeaseLocks) does not migrate (migrations take a
    /// session lock, which a transaction pooler cannot hold); a [`PgBackend`](crate::PgBackend)
    /// connected directly does.
    #[error(
        "schema {schema} at {url} has no table {table}: connect a PgBackend to the database \
         directly (not through the pooler) once to migrate it"
    )]
    NotMigrated {
        /// The URL, password redacted.
        url: String,
        /// The library's schema.
        schema: String,
        /// The missing table.
        table: &'static str,
    },

    /// The history could not be partitioned by slot time
    /// ([`PgBackendBuilder::partitioned_history`](crate::PgBackendBuilder::partitioned_history));
    /// the conversion is one transaction, rolled back, so the tables are as they were.
    #[error(
        "partitioning the history of schema {schema} failed ({step}): {}",
        described(source)
    )]
    Partition {
        /// The library's schema.
        schema: String,
        /// The step that failed.
        step: &'static str,
        /// What the database reported.
        #[source]
        source: sqlx::Error,
    },

    /// A query failed.
    #[error("PostgreSQL query failed: {}", described(.0))]
    Query(#[source] sqlx::Error),
}

impl PgError {
    /// Whether the failure is about reaching the database (worth retrying later) rather than about
    /// the request.
    pub fn is_unavailable(&self) -> bool {
        match self {
            PgError::Connect { .. } => true,
            PgError::Query(e)
            | PgError::Migrate { source: e, .. }
            | PgError::Partition { source: e, .. } => is_unavailable(e),
            _ => false,
        }
    }
}

impl From<sqlx::Error> for PgError {
    fn from(e: sqlx::Error) -> Self {
        PgError::Query(e)
    }
}

impl From<PgError> for slotguard::RunOnceError {
    /// For a run-once program (`Scheduler::run_once`): a server that cannot be reached, or a
    /// schema that cannot be read or migrated, is [`RunOnceError::Store`](slotguard::RunOnceError::Store)
    /// (exit 4, retried); a URL or schema name that can never work, a transaction-mode pooler or a
    /// lock-key collision is [`RunOnceError::Config`](slotguard::RunOnceError::Config) (exit 2).
    fn from(e: PgError) -> Self {
        match e {
            PgError::InvalidUrl { .. }
            | PgError::InvalidSchema(_)
            | PgError::TransactionPooler { .. }
            | PgError::SessionLocksThroughPooler
            | PgError::LockKeyCollision { .. } => slotguard::RunOnceError::Config(e.to_string()),
            _ => slotguard::RunOnceError::Store(StoreError::from(e)),
        }
    }
}

/// What the driver reported, as a person reads it: for a server error its message, SQLSTATE and
/// detail, without the "at line 948" of sqlx's `Display` (a line of the PostgreSQL source file
/// that raised it, which means nothing to an operator).
pub(crate) fn described(e: &sqlx::Error) -> String {
    let sqlx::Error::Database(db) = e else {
        return e.to_string();
    };
    let mut text = db.message().to_owned();
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        if let Some(detail) = pg.detail() {
            text.push_str(": ");
            text.push_str(detail);
        }
        if let Some(hint) = pg.hint() {
            text.push_str(" (hint: ");
            text.push_str(hint);
            text.push(')');
        }
    }
    if let Some(code) = db.code() {
        text.push_str(&format!(" [SQLSTATE {code}]"));
    }
    if through_transaction_pooler(db.code().as_deref(), db.message()) {
        text.push_str(TRANSACTION_POOLER);
    }
    text
}

/// What an error says when a transaction-mode pooler sits between the backend and the database.
pub(crate) const TRANSACTION_POOLER: &str = " (is a transaction-mode pooler, such as PgBouncer with \
     pool_mode = transaction, between slotguard and PostgreSQL? Then build the backend with \
     PgBackendBuilder::transaction_pooler(true), or connect to PostgreSQL directly or through \
     session pooling; see docs/poolers.md)";

/// Whether a server error is the mark of a transaction-mode pooler: one of the driver's named
/// prepared statements (`sqlx_s_<n>`) missing, already there, or another statement of that name
/// with other parameters, on the server session the pooler handed the statement to (PgBouncer
/// before 1.21 does not track prepared statements).
fn through_transaction_pooler(code: Option<&str>, message: &str) -> bool {
    matches!(code, Some("26000" | "42P05" | "08P01")) && message.contains("\"sqlx_s_")
}

impl From<PgError> for StoreError {
    fn from(e: PgError) -> Self {
        if e.is_unavailable() {
            StoreError::unavailable(e.to_string()).with_source(e)
        } else {
            StoreError::rejected(e.to_string()).with_source(e)
        }
    }
}

/// Whether `e` means "the database could not do it now" (connection trouble, a shutdown, a
/// deadlock or serialization failure that rolled the statement back) rather than "this request is
/// wrong". In every such case the failed statement changed nothing.
pub(crate) fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // 08: connection exception; 40: transaction rollback (serialization failure, deadlock);
            // 53: insufficient resources; 57: operator intervention (admin shutdown,
            // terminated backend, cannot connect now); 58: system error.
            ["08", "40", "53", "57", "58"]
                .iter()
                .any(|class| code.starts_with(class))
        }),
        _ => false,
    }
}

/// `url` with its password replaced by `***`: the one in the user-info part
/// (`postgres://user:secret@host`) and any `password=` parameter. Safe to log.
pub(crate) fn redact_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let rest = match url.find("://") {
        Some(scheme_end) => {
            let (scheme, after) = url.split_at(scheme_end + 3);
            out.push_str(scheme);
            // The authority ends at the first '/', '?' or '#'; the user info ends at its last '@'.
            let authority_end = after.find(['/', '?', '#']).unwrap_or(after.len());
            let (authority, tail) = after.split_at(authority_end);
            match authority.rfind('@') {
                Some(at) => {
                    let (userinfo, host) = authority.split_at(at);
                    match userinfo.find(':') {
                        Some(colon) => {
                            out.push_str(&userinfo[..colon]);
                            out.push_str(":***");
                        }
                        None => out.push_str(userinfo),
                    }
                    out.push_str(host);
                }
                None => out.push_str(authority),
            }
            tail
        }
        None => url,
    };
    // `password=...` in the query string (`?password=x&...`) or in a key/value string
    // (`host=h password=x`).
    let mut remaining = rest;
    while let Some(pos) = find_password_param(remaining) {
        let value_start = pos + "password=".len();
        out.push_str(&remaining[..value_start]);
        out.push_str("***");
        let after = &remaining[value_start..];
        let value_end = after.find(['&', ' ', '#']).unwrap_or(after.len());
        remaining = &after[value_end..];
    }
    out.push_str(remaining);
    out
}

fn find_password_param(s: &str) -> Option<usize> {
    let lower = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("password=") {
        let pos = from + found;
        // Only a whole parameter name: `?password=`, `&password=`, ` password=` or the start.
        if pos == 0 || matches!(lower.as_bytes()[pos - 1], b'?' | b'&' | b' ') {
            return Some(pos);
        }
        from = pos + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{redact_url, through_transaction_pooler};

    #[test]
    fn the_driver_s_prepared_statements_lost_by_a_pooler_name_it() {
        let exists = r#"prepared statement "sqlx_s_1" already exists"#;
        let missing = r#"prepared statement "sqlx_s_12" does not exist"#;
        assert!(through_transaction_pooler(Some("42P05"), exists));
        assert!(through_transaction_pooler(Some("26000"), missing));
        let other =
            r#"bind message supplies 3 parameters, but prepared statement "sqlx_s_2" requires 1"#;
        assert!(through_transaction_pooler(Some("08P01"), other));
        // An application's own statements, or another error, are not the pooler's mark.
        assert!(!through_transaction_pooler(
            Some("26000"),
            r#"prepared statement "mine" does not exist"#
        ));
        assert!(!through_transaction_pooler(Some("42P01"), exists));
        assert!(!through_transaction_pooler(None, exists));
    }

    #[test]
    fn passwords_are_redacted() {
        let cases = [
            (
                "postgres://app:s3cret@db.example:5432/prod",
                "postgres://app:***@db.example:5432/prod",
            ),
            (
                "postgresql://app:p%40ss@db/prod?sslmode=require",
                "postgresql://app:***@db/prod?sslmode=require",
            ),
            ("postgres://app:a@b@db/prod", "postgres://app:***@db/prod"),
            (
                "postgres://postgres@127.0.0.1/test",
                "postgres://postgres@127.0.0.1/test",
            ),
            ("postgres://127.0.0.1/test", "postgres://127.0.0.1/test"),
            (
                "postgres://db/prod?user=app&password=s3cret&sslmode=disable",
                "postgres://db/prod?user=app&password=***&sslmode=disable",
            ),
            (
                "postgres://db/prod?Password=s3cret",
                "postgres://db/prod?Password=***",
            ),
            (
                "host=db user=app password=s3cret dbname=prod",
                "host=db user=app password=*** dbname=prod",
            ),
            (
                "postgres://db/prod?mypassword=x",
                "postgres://db/prod?mypassword=x",
            ),
        ];
        for (url, want) in cases {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }
}
