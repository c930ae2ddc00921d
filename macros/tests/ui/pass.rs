#![forbid(unsafe_code)]
#![deny(warnings, missing_docs, unreachable_pub)]
//! Every accepted form of `#[scheduled]`, compiled with the strictest lints a user might turn on.

use slotguard::{JobContext, JobError, ScheduledJob, jobs, scheduled};

/// Every argument.
#[scheduled("0 2 * * *", tz = "Asia/Seoul", name = "daily-settlement", guard = slot, dst = skip, lock_key = 42)]
pub async fn daily_settlement(ctx: JobContext) -> Result<(), JobError> {
    let _ = ctx.business_date();
    Ok(())
}

#[scheduled("*/5 * * * *", guard = local,)]
async fn expire_sessions() {}

#[scheduled("0 0 * * * *", dst = instant, guard = none, lock_key = -9223372036854775808)]
async fn r#type(_: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[scheduled("@daily", dst = vixie, guard = lock, tz = "UTC", lock_key = 0x7fi64)]
async fn ctx() {}

/// Payday: the 25th, or the business day before; and two business days before month end.
#[scheduled("0 2 25 * *", tz = "Asia/Seoul", guard = slot, calendar = "KR", adjust = preceding)]
pub async fn payday() {}

#[scheduled("0 18 28 * *", calendar = "US", adjust = modified_preceding, shift = -2, guard = local)]
async fn close_books() {}

#[scheduled("0 9 * * *", calendar = "GB", guard = local)]
async fn weekday_report() {}

/// Gone with its function: no job, no registration, no error.
#[scheduled("0 3 * * *")]
#[cfg(any())]
pub async fn compiled_out() {}

/// Still a job; calling it from the generated code is not a deprecation warning.
#[scheduled("0 4 * * *")]
#[deprecated = "use `daily_settlement`"]
pub async fn legacy() {}

mod reports {
    use slotguard::{JobContext, scheduled};

    /// Weekly.
    #[scheduled("0 6 * * MON", tz = "Europe/Berlin", dst = shift)]
    pub(crate) async fn weekly(_ctx: JobContext) -> Result<(), String> {
        Ok(())
    }
}

fn main() {
    let jobs = jobs![
        daily_settlement,
        expire_sessions,
        r#type,
        ctx,
        reports::weekly,
        payday,
        close_books,
        weekday_report
    ];
    assert_eq!(jobs.len(), 8);
    assert_eq!(<legacy as ScheduledJob>::job().name(), "legacy");
    assert_eq!(<r#type as ScheduledJob>::job().name(), "type");
    let _called = (daily_settlement, reports::weekly);
    let _ = async {
        expire_sessions().await;
        ctx().await;
    };
}
