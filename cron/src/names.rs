//! The rules for job names and partition keys, shared by the runtime (`build()` and partition
//! providers), the `#[scheduled]` macro (at compile time) and the admin API (lookups): names
//! identify slot rows in every store and appear in idempotency keys, logs and pages.

use std::fmt;

/// The longest job name or partition key accepted, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// Why a job name or partition key cannot be stored or shown safely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameProblem {
    /// Empty, or only white space (for a partition key: empty, the key of unpartitioned runs).
    Empty,
    /// Longer than [`MAX_NAME_CHARS`]; the number of characters it has.
    TooLong(usize),
    /// Contains a control character (NUL, newline, ...).
    Control,
    /// Contains `:`, the separator of idempotency keys (job names only).
    Colon,
}

impl NameProblem {
    /// The problem in a few words, as `build()` reports it.
    pub const fn reason(self) -> &'static str {
        match self {
            NameProblem::Empty => "empty",
            NameProblem::TooLong(_) => "longer than 200 characters",
            NameProblem::Control => "contains a control character (NUL, newline, ...)",
            NameProblem::Colon => "contains `:`, the separator of idempotency keys",
        }
    }
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for NameProblem {}

/// Checks a job name: not blank, at most [`MAX_NAME_CHARS`] characters, no control character,
/// no `:`.
pub fn check_job_name(name: &str) -> Result<(), NameProblem> {
    if name.trim().is_empty() {
        return Err(NameProblem::Empty);
    }
    check_common(name)?;
    if name.contains(':') {
        return Err(NameProblem::Colon);
    }
    Ok(())
}

/// Checks a partition key: not empty (the empty key is that of unpartitioned runs), at most
/// [`MAX_NAME_CHARS`] characters, no control character. `:` is allowed: it is the last part of an
/// idempotency key.
pub fn check_partition(key: &str) -> Result<(), NameProblem> {
    if key.is_empty() {
        return Err(NameProblem::Empty);
    }
    check_common(key)
}

fn check_common(value: &str) -> Result<(), NameProblem> {
    let chars = value.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(NameProblem::TooLong(chars));
    }
    if value.chars().any(char::is_control) {
        return Err(NameProblem::Control);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names() {
        assert_eq!(check_job_name("daily-settlement"), Ok(()));
        assert_eq!(check_job_name(" "), Err(NameProblem::Empty));
        assert_eq!(check_job_name(&"x".repeat(200)), Ok(()));
        assert_eq!(
            check_job_name(&"x".repeat(201)),
            Err(NameProblem::TooLong(201))
        );
        assert_eq!(check_job_name("a\0b"), Err(NameProblem::Control));
        assert_eq!(check_job_name("a:b"), Err(NameProblem::Colon));
    }

    #[test]
    fn partition_keys() {
        assert_eq!(check_partition("tenant:7"), Ok(()));
        assert_eq!(check_partition(""), Err(NameProblem::Empty));
        assert_eq!(check_partition("a\nb"), Err(NameProblem::Control));
        assert_eq!(
            check_partition(&"é".repeat(201)),
            Err(NameProblem::TooLong(201))
        );
    }
}
