//! The reasons the rules record on runs and attempts, spelled once for every store.

/// A new slot recorded `skipped` because another run of its job and partition is still running.
pub const SKIPPED_OVERLAP: &str = "overlap: a previous run is still running";

/// A waiting slot (`buffer_one`) that a newer one replaced.
pub const SUPERSEDED: &str = "overlap: superseded by a newer slot";

/// A new slot that waits (`buffer_one`) for the running one to end.
pub const WAITING: &str = "overlap: waiting for the running slot";

/// A running run stopped (`replace`) for a newer slot of its job and partition.
pub const REPLACED: &str = "replaced by a newer slot";

/// A running attempt whose heartbeat is older than its threshold, by the store's clock.
pub const HEARTBEAT_EXPIRED: &str = "heartbeat expired";

/// The message of a run that has had all its attempts and became `dead` (any `Display` values:
/// a store that formats in SQL passes its placeholders).
pub fn exhausted(attempt: impl std::fmt::Display, max_attempts: impl std::fmt::Display) -> String {
    format!("attempts exhausted ({attempt} of {max_attempts})")
}

/// The message of a slot that the job's business calendar removed (convention `skip`): the
/// holiday's name, or `weekend`.
pub fn calendar(holiday: Option<&str>) -> String {
    format!("calendar: {}", holiday.unwrap_or("weekend"))
}

/// The message of a slot whose nominal date already ran in an earlier slot: an operator's calendar
/// override moved the date after that slot ran.
pub fn nominal_ran(
    nominal: impl std::fmt::Display,
    earlier: chrono::DateTime<chrono::Utc>,
) -> String {
    format!(
        "calendar: its nominal date {nominal} already ran in the slot of {}",
        earlier.format("%Y-%m-%dT%H:%M:%SZ")
    )
}
