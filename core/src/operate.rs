//! What operating slotguard shares with the runtime: instants and user input as messages write
//! them, the bounds of a rate of spread-out runs, the page sizes of listings, and a run's
//! idempotency key.
//!
//! The admin API itself (the `slotguard-admin` crate: the Rust API, the HTTP router, the
//! dashboard, and what the `slotguard` CLI runs) builds on these; the runtime uses them too (the
//! scheduler's catch-up rate is bounded as a backfill's is), so they live here, where both can
//! reach them without core depending on the admin crate.

use chrono::{DateTime, Utc};

use crate::store::RunFilter;

pub use crate::context::idempotency_key;

/// The slowest spread accepted, in runs per second (a backfill's `perSecond`, the scheduler's
/// catch-up rate): one run every 1,000 s, so that the 1,000 runs of the largest backfill are all
/// due within 12 days.
pub const MIN_PER_SECOND: f64 = 0.001;
/// The fastest spread accepted, in runs per second: one run every millisecond.
pub const MAX_PER_SECOND: f64 = 1_000.0;

/// The most runs or audit records one listing returns.
pub const MAX_PAGE: usize = 1_000;

/// The page size of a listing that does not name one: `RunFilter::default().limit`, the HTTP
/// router's `limit` when the query has none, the CLI's `--limit` default.
pub const DEFAULT_PAGE: usize = 50;

/// An instant as the admin API writes it back: RFC 3339, UTC, with milliseconds only when it has
/// them.
pub fn rfc3339(at: &DateTime<Utc>) -> String {
    let format = if at.timestamp_subsec_millis() == 0 {
        chrono::SecondsFormat::Secs
    } else {
        chrono::SecondsFormat::Millis
    };
    at.to_rfc3339_opts(format, true)
}

/// User input for messages: escaped and shortened to 64 characters.
pub fn shown(input: &str) -> String {
    slotguard_cron::shown_within(input, 64)
}

/// Every run, newest slot first, a page of [`DEFAULT_PAGE`]: `limit` 0 would be refused by the
/// admin API, so the default filter names the default page.
impl Default for RunFilter {
    fn default() -> Self {
        RunFilter {
            job: None,
            status: None,
            partition: None,
            from: None,
            to: None,
            limit: DEFAULT_PAGE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_written_with_milliseconds_only_when_they_have_them() {
        let whole: DateTime<Utc> = "2026-03-07T17:00:00Z".parse().unwrap();
        assert_eq!(rfc3339(&whole), "2026-03-07T17:00:00Z");
        let manual = whole + chrono::Duration::milliseconds(7);
        assert_eq!(rfc3339(&manual), "2026-03-07T17:00:00.007Z");
        assert_eq!(RunFilter::default().limit, DEFAULT_PAGE);
    }
}
