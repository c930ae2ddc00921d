//! A failed operation: its one-line message and the exit code it maps to.

use slotguard_admin::AdminError;

use super::{NOT_FOUND, REFUSED, show};
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
            AdminError::PauseState { .. } => (REFUSED, e.to_string()),
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
