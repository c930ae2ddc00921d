//! What a process does with its jobs: compute and enqueue slots, run them, both, or neither.

use std::fmt;
use std::str::FromStr;

/// A process's part in the cluster, chosen at [`build`](crate::SchedulerBuilder::build) with
/// [`SchedulerBuilder::role`](crate::SchedulerBuilder::role).
///
/// The slot table is the durable queue between the roles: a scheduler writes each slot as a
/// `pending` row due at its instant (the slot key is the message id, so several schedulers write
/// it once), and workers claim due rows and run them through the job's guard chain, with the same
/// attempts, heartbeats, fencing tokens, retries, overlap policy, checkpoints, recovery and drain as
/// a run started by a tick. See `docs/workers.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Role {
    /// Computes slots and runs them in the same process (the default): every replica schedules and
    /// executes.
    #[default]
    All,
    /// Computes slots and enqueues each as a `pending` row; runs no body. Run two for availability:
    /// each slot is still enqueued once.
    Scheduler,
    /// Claims due `pending` rows of the jobs it links in and runs them; computes no slot. Wakes when
    /// work is enqueued (PostgreSQL `LISTEN`/`NOTIFY`) or falls due, with a slow poll as the safety
    /// net.
    Worker,
    /// Neither enqueues nor runs: a process that serves the admin API (an API replica).
    Admin,
}

impl Role {
    /// Every role, in the order of the documentation.
    pub const ALL: [Role; 4] = [Role::All, Role::Scheduler, Role::Worker, Role::Admin];

    /// The role's name: `all`, `scheduler`, `worker` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Scheduler => "scheduler",
            Role::Worker => "worker",
            Role::Admin => "admin",
        }
    }

    /// What [`ConfigError::NeedsSlotLevel`](crate::ConfigError::NeedsSlotLevel) names for a job
    /// this role cannot take.
    pub(crate) fn queue_needs(self) -> &'static str {
        match self {
            Role::Scheduler => "the `scheduler` role (its queue is the slot table)",
            _ => "the `worker` role (its queue is the slot table)",
        }
    }

    /// Whether the process computes slots (runs the timer and catch-up planning).
    pub fn schedules(self) -> bool {
        matches!(self, Role::All | Role::Scheduler)
    }

    /// Whether the process runs job bodies.
    pub fn executes(self) -> bool {
        matches!(self, Role::All | Role::Worker)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role name that is not one of `all`, `scheduler`, `worker`, `admin`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role `{0}`: expected all, scheduler, worker or admin")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownRole(slotguard_cron::shown_within(s, 64)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        assert_eq!(" Worker ".parse::<Role>(), Ok(Role::Worker));
        let err = "workers".parse::<Role>().unwrap_err();
        assert!(err.to_string().contains("unknown role `workers`"), "{err}");
    }

    #[test]
    fn only_all_both_schedules_and_executes() {
        let both: Vec<Role> = Role::ALL
            .into_iter()
            .filter(|r| r.schedules() && r.executes())
            .collect();
        assert_eq!(both, vec![Role::All]);
        assert!(!Role::Admin.schedules() && !Role::Admin.executes());
    }
}
