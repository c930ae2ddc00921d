//! What the rules read of a row, and what they may write to an existing one.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::reason;
use crate::store::{RunStatus, SlotKey, Trigger};

/// One row as the rules see it: its identity and the columns a decision depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowFacts {
    /// The row's id in the store.
    pub id: i64,
    /// The slot.
    pub key: SlotKey,
    /// The run's status.
    pub status: RunStatus,
    /// Attempts made so far (0 for a slot that never ran).
    pub attempt: u32,
    /// The last heartbeat of the running attempt; `None` when it has none.
    pub heartbeat_at: Option<DateTime<Utc>>,
    /// The row's staleness threshold.
    pub stale_after: Duration,
    /// When the run may be claimed again; `None` for none (a waiting `buffer_one` slot when
    /// `pending`).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Why the run exists.
    pub trigger: Trigger,
}

impl RowFacts {
    /// `running` with a heartbeat older than its threshold at `now` (the store's clock): its holder
    /// is dead, frozen or cut off.
    pub fn is_stale(&self, now: DateTime<Utc>) -> bool {
        self.status == RunStatus::Running && !self.heartbeat_is_fresh(now)
    }

    /// `running` with a heartbeat within its threshold at `now`.
    pub fn is_fresh_running(&self, now: DateTime<Utc>) -> bool {
        self.status == RunStatus::Running && self.heartbeat_is_fresh(now)
    }

    /// A `buffer_one` slot waiting for the running one: `pending` with no next attempt.
    pub fn is_waiting(&self) -> bool {
        self.status == RunStatus::Pending && self.next_attempt_at.is_none()
    }

    /// A slot a scheduler queued that no worker has picked yet: `pending`, attempt 0, due at
    /// its instant, from the schedule (catch-up runs, which the catch-up policy asked for one by one,
    /// and an operator's runs are not queued slots).
    pub fn is_queued_slot(&self, now: DateTime<Utc>) -> bool {
        self.is_queued() && self.is_due_again(now)
    }

    /// A slot a scheduler queued (as [`is_queued_slot`](Self::is_queued_slot)) that falls due
    /// after `now` and at most `lead` later ([`DueSpec::lead`](crate::store::DueSpec::lead)): a
    /// worker may claim it early.
    pub fn is_queued_ahead(&self, now: DateTime<Utc>, lead: Duration) -> bool {
        let Ok(lead) = TimeDelta::from_std(lead) else {
            return false;
        };
        self.is_queued()
            && self.next_attempt_at.is_some_and(|at| {
                at > now && at.checked_sub_signed(lead).is_none_or(|from| from <= now)
            })
    }

    /// `pending`, never attempted, from the schedule: the shape of a slot a scheduler queued.
    fn is_queued(&self) -> bool {
        self.status == RunStatus::Pending && self.attempt == 0 && self.trigger == Trigger::Schedule
    }

    /// `pending` or `abandoned` and due again at `now`.
    pub fn is_due_again(&self, now: DateTime<Utc>) -> bool {
        matches!(self.status, RunStatus::Pending | RunStatus::Abandoned)
            && self.next_attempt_at.is_some_and(|at| at <= now)
    }

    /// A store compares `heartbeat_at + stale_after >= now`; a threshold too large for the
    /// calendar never expires.
    fn heartbeat_is_fresh(&self, now: DateTime<Utc>) -> bool {
        let Some(beat) = self.heartbeat_at else {
            return false;
        };
        TimeDelta::from_std(self.stale_after)
            .ok()
            .and_then(|limit| beat.checked_add_signed(limit))
            .is_none_or(|deadline| deadline >= now)
    }

    /// Whether `other` is another row of the same job and partition.
    pub(crate) fn is_sibling_of(&self, other: &SlotKey) -> bool {
        self.key.job == other.job
            && self.key.partition == other.partition
            && self.key.scheduled_at != other.scheduled_at
    }
}

/// A change the rules make to an existing row (other than a new attempt of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A stale run of the job and partition, fenced because a newer slot runs now: `abandoned`,
    /// due again at once (it runs when the newer one has ended), its attempt closed; its frozen
    /// holder's heartbeats and writes are refused from now on.
    Fence,
    /// A waiting `buffer_one` slot that a newer one replaced: `skipped`.
    Supersede,
    /// A running run stopped for a newer slot (`replace`): `abandoned` with no next attempt, so
    /// nothing recovers it, its attempt closed.
    Replace,
    /// A queued slot a worker picked while another run of its job and partition is running
    /// (`skip`): `skipped`, [`reason::SKIPPED_OVERLAP`].
    Skip,
    /// A queued slot a worker picked while another run of its job and partition is running
    /// (`buffer_one`): it waits, `pending` with no next attempt, [`reason::WAITING`].
    Wait,
    /// A stale or abandoned run that has had all its attempts: `dead`, its attempt closed.
    Bury {
        /// Attempts made.
        attempt: u32,
        /// The job's `max_attempts`.
        max_attempts: u32,
    },
}

impl Change {
    /// The run's new status.
    pub fn status(&self) -> RunStatus {
        match self {
            Change::Fence | Change::Replace => RunStatus::Abandoned,
            Change::Supersede | Change::Skip => RunStatus::Skipped,
            Change::Wait => RunStatus::Pending,
            Change::Bury { .. } => RunStatus::Dead,
        }
    }

    /// The run's new message.
    pub fn message(&self) -> String {
        match self {
            Change::Fence => reason::HEARTBEAT_EXPIRED.to_owned(),
            Change::Supersede => reason::SUPERSEDED.to_owned(),
            Change::Replace => reason::REPLACED.to_owned(),
            Change::Skip => reason::SKIPPED_OVERLAP.to_owned(),
            Change::Wait => reason::WAITING.to_owned(),
            Change::Bury {
                attempt,
                max_attempts,
            } => reason::exhausted(*attempt, *max_attempts),
        }
    }

    /// The run's new `next_attempt_at`.
    pub fn next_attempt_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Change::Fence => Some(now),
            _ => None,
        }
    }

    /// Whether the run is finished (`finished_at` set to now); a fenced or waiting run is not.
    pub fn finishes(&self) -> bool {
        !matches!(self, Change::Fence | Change::Wait)
    }

    /// The message recorded on the run's attempt if it was still `running` (it becomes
    /// `abandoned`).
    pub fn attempt_message(&self) -> &'static str {
        match self {
            Change::Replace => reason::REPLACED,
            _ => reason::HEARTBEAT_EXPIRED,
        }
    }
}
