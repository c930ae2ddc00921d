//! Named policies for wall-clock times that a DST transition skips or repeats.

use std::fmt;
use std::str::FromStr;

/// What a job does with a wall-clock time that does not exist (the clock springs forward over it: a
/// *gap*) or that happens twice (the clock falls back: an *overlap*). `T` is the transition instant.
///
/// | policy | gap | overlap |
/// |---|---|---|
/// | [`Vixie`](DstPolicy::Vixie) (default) | fixed-time jobs fire once at `T` when the gap is under 3 h; others skip | fixed-time jobs fire once, at the first instant; others fire at both |
/// | [`Skip`](DstPolicy::Skip) | skipped | once, at the first instant |
/// | [`Shift`](DstPolicy::Shift) | at the wall time read with the pre-transition offset (02:30 → 03:30 EDT) | once, at the first instant |
/// | [`Instant`](DstPolicy::Instant) | skipped | at both instants |
///
/// A job is *fixed-time* when neither its minute nor its hour field starts with `*` (see
/// [`CronExpr::is_fixed_time`](crate::CronExpr::is_fixed_time)). Several gap times that land on the same
/// instant fire once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum DstPolicy {
    /// cronie's rule, the behaviour most operators expect from cron.
    #[default]
    Vixie,
    /// systemd timers' and OCPS's rule: a time that does not exist does not run.
    Skip,
    /// Keep the job's duration since the last transition: read gap times with the old offset.
    Shift,
    /// robfig/cron's and Kubernetes' rule: every instant whose local reading matches fires.
    Instant,
}

impl DstPolicy {
    /// All policies, in documentation order.
    pub const ALL: [DstPolicy; 4] = [
        DstPolicy::Vixie,
        DstPolicy::Skip,
        DstPolicy::Shift,
        DstPolicy::Instant,
    ];

    /// The policy's name as written in attributes, the CLI and the database.
    pub const fn as_str(self) -> &'static str {
        match self {
            DstPolicy::Vixie => "vixie",
            DstPolicy::Skip => "skip",
            DstPolicy::Shift => "shift",
            DstPolicy::Instant => "instant",
        }
    }
}

impl fmt::Display for DstPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A DST policy name that is not one of `vixie`, `skip`, `shift`, `instant`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown DST policy `{0}`: expected vixie, skip, shift or instant")]
pub struct UnknownDstPolicy(pub String);

impl FromStr for DstPolicy {
    type Err = UnknownDstPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DstPolicy::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownDstPolicy(crate::error::shown(s)))
    }
}
