//! Operators' holiday overrides kept in the store ([`CalendarStore`]): a date added to a business
//! calendar as a holiday, or removed from it, by name, with who, when and why, changed without a
//! deploy (a temporary holiday or an election day announced late).
//!
//! Overrides are appended and never rewritten; the latest one of a calendar and date decides it.
//! Like a stored schedule's version, an override takes effect at its
//! [`effective_at`](CalendarOverride::effective_at), [`SCHEDULE_FENCE`](super::SCHEDULE_FENCE) after the store wrote it,
//! and a slot at instant `T` is decided by the overrides in force at `T`: every replica that knows
//! the overrides up to `T` (see [`OverrideChanges::fresh_at`]) decides it alike.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Datelike, NaiveDate, Utc};

use super::StoreError;

/// What an override does to its date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OverrideKind {
    /// The date is a holiday (named by the override).
    Add,
    /// The date is no holiday (a weekend day stays one).
    Remove,
}

impl OverrideKind {
    /// `add` or `remove`, as the stores keep it.
    pub fn as_str(self) -> &'static str {
        match self {
            OverrideKind::Add => "add",
            OverrideKind::Remove => "remove",
        }
    }
}

impl fmt::Display for OverrideKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OverrideKind {
    type Err = OverrideError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "add" => Ok(OverrideKind::Add),
            "remove" => Ok(OverrideKind::Remove),
            other => Err(OverrideError::Kind(other.chars().take(20).collect())),
        }
    }
}

/// An override as an operator writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideSpec {
    /// The calendar's name (`KR`, or the name of one built in code).
    pub calendar: String,
    /// The date.
    pub date: NaiveDate,
    /// Whether the date becomes a holiday or stops being one.
    pub kind: OverrideKind,
    /// The holiday's name (`Temporary holiday`); the name of the removed one is not needed.
    pub name: String,
}

/// One override as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarOverride {
    /// What it changes.
    pub spec: OverrideSpec,
    /// Why.
    pub reason: String,
    /// Who wrote it.
    pub changed_by: String,
    /// When it was written (store clock).
    pub changed_at: DateTime<Utc>,
    /// When it takes effect (store clock).
    pub effective_at: DateTime<Utc>,
    /// Its place in the order of all overrides in the store, rising.
    pub seq: i64,
}

/// What [`CalendarStore::override_changes`] read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideChanges {
    /// The overrides written after the caller's `seq`, in the order they were written.
    pub overrides: Vec<CalendarOverride>,
    /// The store's clock when the read saw every override written before it: one the read missed
    /// takes effect after `fresh_at + SCHEDULE_FENCE`.
    pub fresh_at: DateTime<Utc>,
}

/// Holiday overrides kept in the store: appended by operators, read by every replica.
#[async_trait]
pub trait CalendarStore: Send + Sync + 'static {
    /// Appends `spec` (checked with [`OverrideSpec::check`]), by `by` for `reason`, in one
    /// transaction with an audit record (job `""`, action `calendar_add` or `calendar_remove`). It
    /// takes effect at the store's clock plus [`SCHEDULE_FENCE`](super::SCHEDULE_FENCE), or at the previous override's,
    /// whichever is later. Writes are serialized with each other and with
    /// [`override_changes`](Self::override_changes), as [`ScheduleStore`](super::ScheduleStore)'s.
    ///
    /// # Errors
    /// [`StoreError::Rejected`] for a spec, actor or reason [`OverrideSpec::check`] refuses.
    async fn write_override(
        &self,
        spec: &OverrideSpec,
        by: &str,
        reason: &str,
    ) -> Result<CalendarOverride, StoreError>;

    /// The overrides written after `after` (a [`CalendarOverride::seq`]; 0 for all), at most
    /// `limit`, oldest first, and the time the read saw every override before it.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    async fn override_changes(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<OverrideChanges, StoreError>;
}

/// The longest calendar name, holiday name, actor and reason an override may have (characters).
pub const MAX_CALENDAR_NAME: usize = 64;
/// See [`MAX_CALENDAR_NAME`].
pub const MAX_HOLIDAY_NAME: usize = 200;
/// See [`MAX_CALENDAR_NAME`].
pub const MAX_OVERRIDE_REASON: usize = 1_024;
/// The years an override's date may be in.
pub const OVERRIDE_YEARS: std::ops::RangeInclusive<i32> = 1970..=2200;

/// What is wrong with an override.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OverrideError {
    /// A text is empty, too long, or holds control characters.
    #[error("{field} must be 1 to {max} characters without control characters")]
    Text {
        /// Which text.
        field: &'static str,
        /// Its longest length.
        max: usize,
    },
    /// The date is outside [`OVERRIDE_YEARS`].
    #[error("year {0} is outside 1970..=2200")]
    Year(i32),
    /// The kind is not `add` or `remove`.
    #[error("kind `{0}` is not `add` or `remove`")]
    Kind(String),
    /// The calendar is neither a builtin one nor one of a registered job.
    #[error("unknown calendar `{0}`")]
    UnknownCalendar(String),
    /// The date does not parse as `YYYY-MM-DD`.
    #[error("date `{0}` is not a date (YYYY-MM-DD)")]
    Date(String),
}

/// Checks one text of an override.
fn text(field: &'static str, value: &str, max: usize, empty_ok: bool) -> Result<(), OverrideError> {
    let n = value.chars().count();
    if (n == 0 && !empty_ok) || n > max || value.chars().any(char::is_control) {
        return Err(OverrideError::Text { field, max });
    }
    Ok(())
}

impl OverrideSpec {
    /// Checks the spec, `by` and `reason`: the texts' lengths, no control characters, a reason and
    /// an actor, a holiday name for an added date, a year in [`OVERRIDE_YEARS`]. Every store calls
    /// it before it writes.
    ///
    /// # Errors
    /// The first thing wrong.
    pub fn check(&self, by: &str, reason: &str) -> Result<(), OverrideError> {
        text("calendar", &self.calendar, MAX_CALENDAR_NAME, false)?;
        let unnamed_ok = self.kind == OverrideKind::Remove;
        text("name", &self.name, MAX_HOLIDAY_NAME, unnamed_ok)?;
        text("actor", by, MAX_HOLIDAY_NAME, false)?;
        text("reason", reason, MAX_OVERRIDE_REASON, false)?;
        if !OVERRIDE_YEARS.contains(&self.date.year()) {
            return Err(OverrideError::Year(self.date.year()));
        }
        Ok(())
    }
}

/// Parses an operator's date (`YYYY-MM-DD`, within [`OVERRIDE_YEARS`]).
///
/// # Errors
/// [`OverrideError::Date`] or [`OverrideError::Year`].
pub fn parse_override_date(text: &str) -> Result<NaiveDate, OverrideError> {
    let date = NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
        .map_err(|_| OverrideError::Date(text.chars().take(40).collect()))?;
    if !OVERRIDE_YEARS.contains(&date.year()) {
        return Err(OverrideError::Year(date.year()));
    }
    Ok(date)
}

/// When an override written at `now` takes effect: [`SCHEDULE_FENCE`](super::SCHEDULE_FENCE) later, and never before the
/// override written before it (in force from `previous`), so that overrides take effect in the
/// order they were written.
pub fn override_effective_at(now: DateTime<Utc>, previous: Option<DateTime<Utc>>) -> DateTime<Utc> {
    super::schedules::effective_at(now, previous)
}

/// The audit action of an override: `calendar_add` or `calendar_remove`.
pub fn override_action(kind: OverrideKind) -> &'static str {
    match kind {
        OverrideKind::Add => "calendar_add",
        OverrideKind::Remove => "calendar_remove",
    }
}

/// The audit reason of an override: the calendar, date, holiday and the operator's reason.
pub fn override_audit_reason(spec: &OverrideSpec, reason: &str) -> String {
    match spec.kind {
        OverrideKind::Add => format!(
            "calendar `{}` {}: holiday `{}`: {reason}",
            spec.calendar, spec.date, spec.name
        ),
        OverrideKind::Remove => format!(
            "calendar `{}` {}: no holiday: {reason}",
            spec.calendar, spec.date
        ),
    }
}

/// The overrides in force now: the latest of each calendar and date, of `calendar` if given,
/// ordered by calendar and date.
pub fn overrides_in_force<'a>(
    overrides: &'a [CalendarOverride],
    calendar: Option<&str>,
) -> Vec<&'a CalendarOverride> {
    let mut latest = std::collections::BTreeMap::new();
    for o in overrides {
        if calendar.is_none_or(|c| c == o.spec.calendar) {
            latest.insert((o.spec.calendar.as_str(), o.spec.date), o);
        }
    }
    latest.into_values().collect()
}

/// Checks an override before a store writes it, as [`StoreError::Rejected`].
///
/// # Errors
/// What [`OverrideSpec::check`] refuses.
pub fn check_override(spec: &OverrideSpec, by: &str, reason: &str) -> Result<(), StoreError> {
    spec.check(by, reason)
        .map_err(|e| StoreError::rejected(format!("calendar override: {e}")))
}

/// The answer to a write that stored `o`, logged (`event = "calendar_override_written"`).
pub fn override_written(o: CalendarOverride) -> CalendarOverride {
    tracing::info!(
        event = "calendar_override_written",
        calendar = %o.spec.calendar,
        date = %o.spec.date,
        kind = %o.spec.kind,
        actor = ?o.changed_by,
        effective_at = %o.effective_at,
        "calendar override stored"
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: OverrideKind, name: &str) -> OverrideSpec {
        OverrideSpec {
            calendar: "KR".into(),
            date: NaiveDate::from_ymd_opt(2026, 10, 2).unwrap(),
            kind,
            name: name.into(),
        }
    }

    #[test]
    fn hostile_overrides_are_refused_with_a_typed_error() {
        assert_eq!(
            spec(OverrideKind::Add, "Temporary holiday").check("kim", "decree"),
            Ok(())
        );
        assert_eq!(
            spec(OverrideKind::Remove, "").check("kim", "decree"),
            Ok(())
        );
        let long = "x".repeat(MAX_OVERRIDE_REASON + 1);
        assert!(matches!(
            spec(OverrideKind::Add, "h").check("kim", &long),
            Err(OverrideError::Text {
                field: "reason",
                ..
            })
        ));
        assert!(matches!(
            spec(OverrideKind::Add, "").check("kim", "r"),
            Err(OverrideError::Text { field: "name", .. })
        ));
        assert!(matches!(
            spec(OverrideKind::Add, "a\nb").check("kim", "r"),
            Err(OverrideError::Text { field: "name", .. })
        ));
        let mut far = spec(OverrideKind::Add, "h");
        far.date = NaiveDate::from_ymd_opt(9999, 1, 1).unwrap();
        assert_eq!(far.check("kim", "r"), Err(OverrideError::Year(9999)));
        assert_eq!(
            parse_override_date("2026-02-30"),
            Err(OverrideError::Date("2026-02-30".into()))
        );
        assert_eq!(parse_override_date("+99999-01-01").map_err(|_| ()), Err(()));
        assert_eq!(
            parse_override_date("3000-01-01"),
            Err(OverrideError::Year(3000))
        );
        assert_eq!(
            "drop".parse::<OverrideKind>(),
            Err(OverrideError::Kind("drop".into()))
        );
    }

    #[test]
    fn the_latest_override_of_a_date_is_in_force() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let row = |seq, kind| CalendarOverride {
            spec: spec(kind, "h"),
            reason: "r".into(),
            changed_by: "kim".into(),
            changed_at: at,
            effective_at: at,
            seq,
        };
        let rows = [row(1, OverrideKind::Add), row(2, OverrideKind::Remove)];
        let force = overrides_in_force(&rows, Some("KR"));
        assert_eq!(force.iter().map(|o| o.seq).collect::<Vec<_>>(), [2]);
        assert!(overrides_in_force(&rows, Some("US")).is_empty());
    }
}
