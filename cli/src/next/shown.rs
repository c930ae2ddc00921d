//! User input as error messages show it.

/// Shortens and escapes user input for an error message, so that a message stays one readable line
/// whatever it was given (10,000 characters, control characters, NUL bytes).
pub(crate) fn shown(input: &str) -> String {
    slotguard_cron::shown_within(input, 48)
}
