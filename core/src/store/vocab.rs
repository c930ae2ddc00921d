//! The words a store records and an operator types: run statuses and triggers (and, through
//! [`vocabulary!`], [`ErrorClass`](crate::ErrorClass)). Each has one `as_str`, one [`Display`] and one
//! [`FromStr`], so that the backends, the HTTP router and the command line read and print the same
//! names.
//!
//! [`Display`]: std::fmt::Display
//! [`FromStr`]: std::str::FromStr

/// `a, b or c`.
pub(crate) fn listed(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Gives the fieldless enum `$name` its names: `ALL`, `as_str`, `Display`, and `FromStr` failing with
/// the error type `$err` (declared here) that names the `$kind` and lists the accepted names.
macro_rules! vocabulary {
    ($name:ident, $err:ident, $kind:literal { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $name {
            #[doc = concat!("Every ", $kind, ", in the order they are listed to users.")]
            pub const ALL: &[Self] = &[$($name::$variant),+];

            /// The name stored with the value and shown to users.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        #[doc = concat!("A name that is not a ", $kind, "; the message lists the accepted names.")]
        #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
        #[error(
            "unknown {} `{}`: expected {}",
            $kind,
            .0,
            $crate::store::vocab::listed(&[$($text),+])
        )]
        pub struct $err(String);

        impl $err {
            /// The name that was given, escaped and shortened for an error message.
            pub fn given(&self) -> &str {
                &self.0
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $err;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $err(slotguard_cron::shown_within(s, 64)))
            }
        }
    };
}

pub(crate) use vocabulary;

/// Why a run exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// The schedule fell due.
    Schedule,
    /// A slot missed while no replica ran, caught up by policy.
    CatchUp,
    /// An operator asked for a run now.
    Manual,
    /// An operator asked for a range of past slots.
    Backfill,
}

vocabulary!(Trigger, UnknownTrigger, "trigger" {
    Schedule => "schedule",
    CatchUp => "catch_up",
    Manual => "manual",
    Backfill => "backfill",
});

/// The states of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Waiting for its next attempt.
    Pending,
    /// An attempt holds it.
    Running,
    /// Done.
    Succeeded,
    /// The last attempt failed; it may be retried.
    Failed,
    /// The last attempt stopped without an outcome (shutdown, a dead process).
    Abandoned,
    /// Not run, by policy, with a reason.
    Skipped,
    /// Attempts exhausted or a permanent error: needs a person.
    Dead,
}

vocabulary!(RunStatus, UnknownRunStatus, "run status" {
    Pending => "pending",
    Running => "running",
    Succeeded => "succeeded",
    Failed => "failed",
    Abandoned => "abandoned",
    Skipped => "skipped",
    Dead => "dead",
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorClass;

    fn round_trips<T>(all: &[T])
    where
        T: Copy + PartialEq + std::fmt::Debug + std::fmt::Display + std::str::FromStr,
        T::Err: std::fmt::Debug,
    {
        for value in all {
            let text = value.to_string();
            assert_eq!(text.parse::<T>().expect(&text), *value);
        }
    }

    #[test]
    fn every_name_reads_back_as_its_value() {
        round_trips(RunStatus::ALL);
        round_trips(Trigger::ALL);
        round_trips(ErrorClass::ALL);
        assert_eq!(RunStatus::ALL.len(), 7);
        assert_eq!(Trigger::CatchUp.as_str(), "catch_up");
        assert_eq!(ErrorClass::Permanent.to_string(), "permanent");
    }

    #[test]
    fn unknown_names_are_named_escaped_and_shortened() {
        let err = "Failed".parse::<RunStatus>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown run status `Failed`: expected pending, running, succeeded, failed, abandoned, \
             skipped or dead"
        );
        let err = "catch-up\n".parse::<Trigger>().unwrap_err();
        assert_eq!(err.given(), "catch-up\\n");
        assert!(
            err.to_string()
                .ends_with("schedule, catch_up, manual or backfill")
        );
        let err = "x".repeat(10_000).parse::<ErrorClass>().unwrap_err();
        assert!(err.to_string().len() < 200, "{err}");
        assert!(
            err.to_string().starts_with("unknown error class `xxx"),
            "{err}"
        );
        assert!(err.to_string().ends_with("expected transient or permanent"));
        assert!("".parse::<Trigger>().is_err());
    }

    #[test]
    fn a_list_reads_as_a_sentence() {
        assert_eq!(listed(&[]), "");
        assert_eq!(listed(&["a"]), "a");
        assert_eq!(listed(&["a", "b"]), "a or b");
        assert_eq!(listed(&["a", "b", "c"]), "a, b or c");
    }
}
