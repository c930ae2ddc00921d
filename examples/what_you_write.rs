//! The README's "What you write", as a program: the part between the `ANCHOR` comments is quoted
//! there exactly (`examples/tests/readme.rs` checks the quote and runs this program). `Bank` and
//! `shutdown_signal` below the quote stand for the application's own.
//!
//! ```text
//! DATABASE_URL=postgres://localhost/app cargo run --example what_you_write
//! curl localhost:3000/internal/jobs                           # the jobs, their next slots, last runs
//! slotguard --database-url postgres://localhost/app runs daily-settlement
//! ```

// ANCHOR: readme
use axum::{Router, routing::get};
use slotguard::{JobContext, JobError, Scheduler, jobs, scheduled};
use slotguard_admin::Admin;
use slotguard_postgres::PgBackend;

#[scheduled("0 2 * * *", tz = "Asia/Seoul", name = "daily-settlement")] // guard: the default, `slot`
async fn daily_settlement(ctx: JobContext) -> Result<(), JobError> {
    let bank = ctx.state::<Bank>()?; // a state never given: the run fails for good (`dead`)
    // Same key on every attempt and every replica. `fencing_token()` is an `Option<i64>`, `Some` at
    // the `slot` level and rising with each attempt: the bank refuses a late writer's lower token.
    bank.settle(
        ctx.business_date(),
        ctx.idempotency_key(),
        ctx.fencing_token(),
    )
    .await?;
    Ok(())
}

#[scheduled("*/5 * * * *", guard = local)] // cheap, per-process only
async fn expire_sessions() {}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler = Scheduler::builder()
        .jobs(jobs![daily_settlement, expire_sessions]) // or .discover(): every #[scheduled] fn linked in
        .backend(PgBackend::connect(&std::env::var("DATABASE_URL")?).await?) // or SqliteBackend::open(path)
        .state(Bank::new())
        .build()?; // fails fast, listing every problem: bad cron, unknown zone, duplicates
    let admin = Admin::of(&scheduler).expect("a backend"); // before try_start()
    let handle = scheduler.try_start().await?; // registers the jobs and lock keys, checks the store
    let app = Router::new()
        .nest("/internal", slotguard_admin::http::router(admin)) // put your auth in front
        .route("/health", get(|| async { "ok" }));
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(handle.clone().shutdown_on(shutdown_signal()))
        .await?;
    Ok(())
}
// ANCHOR_END: readme

/// The application's bank client: a settlement keyed by its idempotency key, fenced by the token.
struct Bank {
    settled: std::sync::Mutex<std::collections::HashMap<String, Option<i64>>>,
}

impl Bank {
    fn new() -> Bank {
        Bank {
            settled: std::sync::Mutex::default(),
        }
    }

    /// Settles `date` once per `key`; a write with a token lower than one already seen is refused.
    async fn settle(
        &self,
        date: slotguard::chrono::NaiveDate,
        key: &str,
        token: Option<i64>,
    ) -> Result<(), std::io::Error> {
        let mut settled = self
            .settled
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        if let Some(Some(seen)) = settled.get(key)
            && token.is_some_and(|t| t < *seen)
        {
            return Err(std::io::Error::other(format!(
                "stale fencing token for {date}"
            )));
        }
        settled.insert(key.to_owned(), token);
        println!("settled {date} under {key} (token {token:?})");
        Ok(())
    }
}

/// SIGTERM (Kubernetes, systemd) or Ctrl-C.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
