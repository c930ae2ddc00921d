//! A run-once pod as docs/workers.md writes it: one slot of `nightly_export`, then exit with the
//! code that tells Kubernetes or systemd what happened. The store comes from `DATABASE_URL`
//! (`postgres://…`, or `sqlite:<path>` here, for the tests), the slot from `SLOTGUARD_SLOT`.

use std::process::ExitCode;

use slotguard::{RunOnce, RunOnceError, Scheduler, SlotSource, jobs, scheduled};
use slotguard_postgres::PgBackend;
use slotguard_sqlite::SqliteBackend;

#[scheduled("* * * * *")]
async fn nightly_export() {}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(done) => {
            println!("{done}");
            done.exit_code()
        }
        Err(e) => {
            eprintln!("{e}");
            e.exit_code()
        }
    }
}

async fn run() -> Result<RunOnce, RunOnceError> {
    let url = std::env::var("DATABASE_URL")
        .map_err(|_| RunOnceError::Config("DATABASE_URL is not set".into()))?;
    let builder = Scheduler::builder().jobs(jobs![nightly_export]);
    let builder = match url.strip_prefix("sqlite:") {
        Some(path) => builder.backend(SqliteBackend::open(path).await?), // cannot open: 4
        None => builder.backend(PgBackend::connect(&url).await?),        // unreachable: 4
    };
    let scheduler = builder.build()?; // a job build() refuses: 2
    scheduler
        .run_once("nightly_export", SlotSource::from_env()?)
        .await
}
