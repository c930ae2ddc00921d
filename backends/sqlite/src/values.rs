//! How slot values are written in SQLite, and the statement that keeps the fencing counter above
//! every token handed out: shared by claims, operators' runs and leases.

use chrono::{NaiveDate, NaiveDateTime};
use slotguard::store::CalendarStamp;

/// Raises the fencing counter to at least `?1`.
pub(crate) const ADVANCE_TOKEN: &str =
    "UPDATE slotguard_fencing SET last_token = max(last_token, ?1) WHERE id = 1";

/// The wall time as stored (ISO 8601 without offset).
pub(crate) fn wall_text(wall: NaiveDateTime) -> String {
    wall.format("%Y-%m-%dT%H:%M:%S%.f").to_string()
}

/// The business date as stored.
pub(crate) fn date_text(date: NaiveDate) -> String {
    date.format("%Y-%m-%d").to_string()
}

/// The calendar columns of a row (nominal dates, calendar name, version); all `NULL` without one.
pub(crate) fn stamp_columns(
    stamp: Option<&CalendarStamp>,
) -> (Option<String>, Option<&str>, Option<&str>) {
    (
        stamp.map(CalendarStamp::nominal_text),
        stamp.map(|s| s.calendar.as_str()),
        stamp.map(|s| s.version.as_str()),
    )
}
