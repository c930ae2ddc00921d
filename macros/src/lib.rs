//! The `#[scheduled]` attribute of [slotguard](https://docs.rs/slotguard). Use it through
//! `slotguard::scheduled`; this crate is an implementation detail of `slotguard`.
//!
//! Arguments are parsed and checked in `args.rs` with the same cron and zone rules the runtime applies
//! (`slotguard-cron`), and the code is generated in `expand.rs`.

mod args;
mod expand;

use proc_macro::TokenStream;

/// Turns an `async fn` into a scheduled job.
///
/// ```
/// use slotguard::{JobContext, JobError, Scheduler, scheduled};
///
/// /// Settles yesterday's payments at 02:00 Seoul time, once across all replicas.
/// #[scheduled("0 2 * * *", tz = "Asia/Seoul", name = "daily-settlement", guard = slot, dst = skip, lock_key = 42)]
/// pub async fn daily_settlement(ctx: JobContext) -> Result<(), JobError> {
///     println!("settling {} with key {}", ctx.business_date(), ctx.idempotency_key());
///     Ok(())
/// }
///
/// // Every five minutes, in UTC, at most one run at a time in this process.
/// #[scheduled("*/5 * * * *", guard = local)]
/// async fn expire_sessions() {}
///
/// #[tokio::main(flavor = "current_thread")]
/// async fn main() -> Result<(), Box<dyn std::error::Error>> {
///     // The function stays an ordinary function.
///     expire_sessions().await;
///
///     let scheduler = Scheduler::builder()
///         .jobs(slotguard::jobs![daily_settlement, expire_sessions]) // or `.discover()`
///         .backend(slotguard::MemoryBackend::new())
///         .build()?;
///     let names: Vec<&str> = scheduler.jobs().map(|job| job.name).collect();
///     assert_eq!(names, ["daily-settlement", "expire_sessions"]);
///
///     let handle = scheduler.start();
///     handle.shutdown().await;
///     Ok(())
/// }
/// ```
///
/// # Arguments
///
/// The cron expression comes first; the other arguments are `key = value` pairs in any order, each at
/// most once.
///
/// | argument | value | default | |
/// |---|---|---|---|
/// | *(first)* | a string literal: 5 fields `min hour dom month dow`, 6 with seconds first, or `@daily`, `@hourly`, ... | required | the schedule, in the Unix cron dialect |
/// | `tz` | an IANA zone name as a string literal: `"Asia/Seoul"`, `"UTC"` | the scheduler's default zone (UTC unless set) | the zone the expression is read in |
/// | `name` | a string literal | the function's name | the job's name, stable across deploys: it identifies the job's slots in every store. At most 200 characters, no control characters, no `:` |
/// | `guard` | `none`, `local`, `lock` or `slot`, a bare word | the scheduler's default (`slot` with a backend, `local` without) | how much exclusion the job gets ([`GuardLevel`](https://docs.rs/slotguard/latest/slotguard/enum.GuardLevel.html)) |
/// | `dst` | `vixie`, `skip`, `shift` or `instant`, a bare word | the scheduler's default (`vixie`) | what happens to a time that a DST change skips or repeats ([`DstPolicy`](https://docs.rs/slotguard/latest/slotguard/enum.DstPolicy.html)) |
/// | `lock_key` | an integer literal that fits in an `i64` | derived from the lock namespace and the name | the advisory-lock key at the `lock` and `slot` levels |
/// | `monitor` | an expression that makes an `Arc` of a `slotguard::Monitor` (`monitor = monitors::sentry()`), evaluated once per process | the scheduler's monitor, if any | where the job's check-ins go (`Job::monitor`) |
///
/// # The function
///
/// It must be an `async fn` that is not generic and not a method, and takes either no parameter or one
/// `JobContext`. It returns `()` or a `Result<(), E>` whose error converts into a `JobError` (any
/// `std::error::Error`, `anyhow::Error`, a `String`), and its future must be `Send + 'static`.
///
/// The function is kept exactly as written and can still be called directly. Next to it the attribute
/// declares a hidden type of the same name that implements `slotguard::ScheduledJob` (so that
/// `slotguard::jobs![daily_settlement]` names the job by the function's path; it has the function's
/// visibility), and registers the job for `SchedulerBuilder::discover`. The generated code refers to
/// the runtime as `::slotguard`, so the crate must be a dependency under that name.
///
/// # Compile-time errors
///
/// The attribute checks what can be known before the program runs, with the runtime's own rules, and
/// reports every problem at once, each at the key or literal it is about:
///
/// - the cron expression: `minute field `61`: 61 is out of range 0-59`, a wrong number of fields, an
///   expression that can never fire (`0 0 30 2 *`);
/// - the zone: `unknown time zone `Asia/Seol`; did you mean `Asia/Seoul`?`;
/// - unknown, duplicate or misspelt keys, and values of the wrong kind;
/// - job names that are empty, too long, or contain control characters or `:`;
/// - functions that are not `async`, are generic or methods, or take more than one parameter.
///
/// The function is still emitted when there are errors, so editors keep working on it.
/// `SchedulerBuilder::build` checks everything again at start-up, for jobs built by hand.
#[proc_macro_attribute]
pub fn scheduled(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::scheduled(args.into(), item.into()).into()
}
