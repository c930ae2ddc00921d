//! A failed operation: its one-line message and the exit code it maps to.

use slotguard_admin::AdminError;

use super::{NOT_FOUND, REFUSED, STALE_VERSION, show};
use crate::exit;

/// A failure, with the exit code it maps to.
#[derive(Debug)]
pub(super) struct Failure {
    pub(super) code: u8,
    pub(super) message: String,
}

impl From<AdminError> for Failure {
    fn from(e: AdminError) -> Self {
        // The admin API's own messages, except that slots are written as the CLI writes and reads
        // them (RFC 3339), not as chrono displays them (`2026-03-08 17:00:00 UTC`), so that a slot in
        // a message can be pasted back into a command.
        let (code, message) = match &e {
            AdminError::UnknownJob { .. } => (NOT_FOUND, e.to_string()),
            AdminError::UnknownRun {
                job,
                slot,
                partition,
            } => (
                NOT_FOUND,
                format!(
                    "job `{job}` has no run for slot {}{}",
                    show::ts(slot),
                    if partition.is_empty() {
                        String::new()
                    } else {
                        format!(" (partition `{}`)", show::shown(partition))
                    }
                ),
            ),
            AdminError::Refused {
                action,
                job,
                slot,
                status,
                hint,
            } => (
                REFUSED,
                format!(
                    "{action} refused for job `{job}` slot {}: the run is {status}; {hint}",
                    show::ts(slot)
                ),
            ),
            AdminError::PauseState { .. } | AdminError::ScheduleExists { .. } => {
                (REFUSED, e.to_string())
            }
            AdminError::UnknownSchedule { .. } => (NOT_FOUND, e.to_string()),
            AdminError::StaleVersion { .. } => (STALE_VERSION, e.to_string()),
            AdminError::Invalid { .. } => (exit::USAGE, e.to_string()),
            AdminError::Store(_) => (exit::FAILURE, e.to_string()),
        };
        Failure { code, message }
    }
}

/// Bad input (exit 2).
pub(super) fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: exit::USAGE,
        message: message.into(),
    }
}

/// Any other failure (exit 1).
pub(super) fn failure(message: impl Into<String>) -> Failure {
    Failure {
        code: exit::FAILURE,
        message: message.into(),
    }
}

/// A parser's refusal of the argument `name` (`SLOT`, `--from`): bad input, said as
/// `NAME: problem`, whatever field the parser named.
pub(super) fn argument(name: &'static str) -> impl Fn(AdminError) -> Failure {
    move |error| match error {
        AdminError::Invalid { problem, .. } => usage(format!("{name}: {problem}")),
        other => Failure::from(other),
    }
}

/// The arguments of `schedule add|set|preview|list`, by the field the admin API names.
pub(super) const SCHEDULE_ARGS: &[(&str, &str)] = &[
    ("id", "ID"),
    ("job", "--job"),
    ("cron", "--cron"),
    ("tz", "--tz"),
    ("dst", "--dst"),
    ("partition", "--partition"),
    ("startAt", "--start-at"),
    ("endAt", "--end-at"),
    ("remainingRuns", "--remaining-runs"),
    ("note", "--note"),
    ("limit", "--limit"),
];

/// The arguments of `skip` and `unskip`, by the field the admin API names.
pub(super) const SKIP_ARGS: &[(&str, &str)] = &[
    ("job", "JOB"),
    ("scheduleSlot", "SLOT"),
    ("partition", "--partition"),
];

/// The arguments of `holiday add|remove`, by the field the admin API names.
pub(super) const HOLIDAY_ARGS: &[(&str, &str)] = &[
    ("calendar", "CALENDAR"),
    ("date", "DATE"),
    ("name", "--name"),
    ("reason", "--reason"),
    ("actor", "--actor"),
];

/// The admin API's refusal of a field, said as `ARGUMENT: problem` with the field named as the
/// CLI's argument is (`cron` is `--cron`), by `names`; any other failure as it is.
pub(super) fn fields(names: &'static [(&str, &str)]) -> impl Fn(AdminError) -> Failure {
    move |error| match error {
        AdminError::Invalid { field, problem } => match names.iter().find(|(f, _)| *f == field) {
            Some((_, name)) => usage(format!("{name}: {problem}")),
            None => Failure::from(AdminError::Invalid { field, problem }),
        },
        other => Failure::from(other),
    }
}
