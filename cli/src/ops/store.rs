//! Finding and opening the store the replicas share.
//!
//! The backends create their tables (and migrate them) when they open a store, which is right for a
//! scheduler and wrong for an operator's command: a typo in `--schema` or in a file name would
//! create an empty store and then report every job as unknown. So the CLI first looks, without
//! changing anything, whether a slotguard store is where the URL says, and refuses (exit 2) if not.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use slotguard::store::{Backend, CalendarOverride};
use slotguard_admin::Admin;
use slotguard_postgres::{PgBackend, PgError};
use slotguard_sqlite::SqliteBackend;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{Connection as _, Row as _};

use super::failure::{Failure, failure, usage};
use super::show::shown;

/// How long to wait for PostgreSQL to answer, to connect and to look for the schema.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the store is, shared by every operation.
#[derive(Debug, Args)]
pub(crate) struct Store {
    /// The store the replicas share: `postgres://user@host/db` or `sqlite:path/to/file.db`.
    #[arg(
        long,
        env = "SLOTGUARD_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true,
        global = true
    )]
    database_url: Option<String>,

    /// The PostgreSQL schema slotguard's tables live in.
    #[arg(
        long,
        env = "SLOTGUARD_SCHEMA",
        default_value = slotguard_postgres::DEFAULT_SCHEMA,
        global = true
    )]
    schema: String,

    /// The PostgreSQL URL goes through a transaction-mode pooler (PgBouncer `pool_mode =
    /// transaction`): every statement runs unprepared, in a transaction of its own
    /// (docs/poolers.md).
    #[arg(long, global = true)]
    transaction_pooler: bool,
}

impl Store {
    /// The overrides in force of `calendar` in the store, for `slotguard next`; `None` when no
    /// store is given (`next` works offline). A failure is its exit code and message.
    pub(crate) fn calendar_overrides(&self) -> Option<Result<Vec<CalendarOverride>, (u8, String)>> {
        self.database_url.as_ref()?;
        let read = async {
            let admin = self.open().await?;
            Ok::<_, Failure>(admin.calendar_overrides(None).await?)
        };
        let answer = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failure(format!("starting the async runtime: {e}")))
            .and_then(|runtime| runtime.block_on(read));
        Some(answer.map_err(|f| (f.code, f.message)))
    }

    /// The admin API over the store, which must exist already.
    pub(super) async fn open(&self) -> Result<Admin, Failure> {
        let url = self
            .database_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                usage(
                    "no store given: pass --database-url postgres://... or sqlite:PATH (or set SLOTGUARD_DATABASE_URL)",
                )
            })?;
        let backend: Arc<dyn Backend> = if let Some(path) = url.strip_prefix("sqlite:") {
            Arc::new(sqlite(path.strip_prefix("//").unwrap_or(path)).await?)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Arc::new(postgres(url, &self.schema, self.transaction_pooler).await?)
        } else {
            // Not the URL itself: it may hold a password.
            return Err(usage(
                "--database-url must start with postgres://, postgresql:// or sqlite:",
            ));
        };
        Ok(Admin::shared(backend))
    }
}

async fn sqlite(path: &str) -> Result<SqliteBackend, Failure> {
    if path.is_empty() {
        return Err(usage(
            "sqlite: needs a path, such as sqlite:/var/lib/app/slotguard.db",
        ));
    }
    let file = Path::new(path);
    if !file.exists() {
        return Err(usage(format!(
            "no SQLite store at `{}`: the file does not exist",
            shown(path)
        )));
    }
    if !file.is_file() {
        return Err(usage(format!("`{}` is not a file", shown(path))));
    }
    let cannot = |e: sqlx::Error| {
        let text = format!("cannot read the SQLite file `{}`: {e}", shown(path));
        // SQLITE_NOTADB: the path names some other file.
        if e.as_database_error()
            .and_then(|d| d.code())
            .is_some_and(|c| c == "26")
        {
            usage(text)
        } else {
            failure(text)
        }
    };
    let options = SqliteConnectOptions::new()
        .filename(file)
        .create_if_missing(false);
    let mut conn = SqliteConnection::connect_with(&options)
        .await
        .map_err(cannot)?;
    let found: i64 = sqlx::query(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'slotguard_job_runs'",
    )
    .fetch_one(&mut conn)
    .await
    .and_then(|row| row.try_get(0))
    .map_err(cannot)?;
    let _ = conn.close().await;
    if found == 0 {
        return Err(usage(format!(
            "no slotguard store in `{}`: the file has no slotguard tables (a scheduler creates them when it first starts)",
            shown(path)
        )));
    }
    SqliteBackend::open(file)
        .await
        .map_err(|e| failure(e.to_string()))
}

/// The backend at `url`, once a store is found in `schema` there; built for a transaction pooler
/// when `pooler`.
async fn postgres(url: &str, schema: &str, pooler: bool) -> Result<PgBackend, Failure> {
    // The driver's message for a bad URL does not repeat the URL, which may hold a password.
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| usage(format!("invalid PostgreSQL URL: {e}")))?;
    let database = options
        .get_database()
        .unwrap_or(options.get_username())
        .to_owned();
    let place = format!(
        "PostgreSQL at {}:{} (database `{}`)",
        options.get_host(),
        options.get_port(),
        shown(&database)
    );
    let exists = tokio::time::timeout(CONNECT_TIMEOUT, async {
        let mut conn = PgConnection::connect_with(&options).await?;
        // Unprepared, in a transaction: it works through a transaction pooler too.
        let mut tx = conn.begin().await?;
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relname = 'job_runs')",
        )
        .persistent(false)
        .bind(schema)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        let _ = conn.close().await;
        Ok::<_, sqlx::Error>(exists)
    })
    .await
    .map_err(|_| {
        failure(format!(
            "cannot connect to {place}: no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))
    })?
    .map_err(|e| {
        let text = format!("cannot connect to {place}: {e}");
        // invalid_catalog_name: the database named does not exist.
        if e.as_database_error()
            .and_then(|d| d.code())
            .is_some_and(|c| c == "3D000")
        {
            usage(text)
        } else {
            failure(text)
        }
    })?;
    if !exists {
        return Err(usage(format!(
            "no slotguard store in schema `{}` of {place}: check --schema (a scheduler creates it when it first starts)",
            shown(schema)
        )));
    }
    PgBackend::builder(url)
        .schema(schema)
        .pool_size(2)
        .connect_timeout(CONNECT_TIMEOUT)
        .transaction_pooler(pooler)
        .connect()
        .await
        .map_err(|e| match e {
            PgError::InvalidSchema(_) | PgError::InvalidUrl { .. } => usage(e.to_string()),
            e => failure(e.to_string()),
        })
}
