//! The rules of [`SlotStore::claim`](crate::store::SlotStore::claim) and
//! [`QueueStore::enqueue_slots`](crate::store::QueueStore::enqueue_slots): one request, decided.

use chrono::{DateTime, Utc};

use super::{Change, Event, RowFacts, reason};
use crate::policy::Overlap;
use crate::store::{Claim, ClaimRequest, Lease, RunStatus, not_due};

/// Whether a request runs the slot here or queues it for a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// [`SlotStore::claim`](crate::store::SlotStore::claim): a slot that runs is claimed for the
    /// caller.
    Claim,
    /// [`QueueStore::enqueue_slots`](crate::store::QueueStore::enqueue_slots): a new slot is written
    /// `pending`, due at its instant, for a worker; nothing else is decided or changed.
    Enqueue,
}

/// The row a new slot gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewRow {
    /// `running`, attempt 1, claimed for the caller.
    Running,
    /// `pending`, attempt 0, due at the slot's instant, for a worker.
    Queued,
    /// `skipped` (finished), [`reason::SKIPPED_OVERLAP`].
    Skipped,
    /// `pending` with no next attempt, [`reason::WAITING`]: it runs once the running one ended.
    Waiting,
}

impl NewRow {
    /// The row's status.
    pub fn status(&self) -> RunStatus {
        match self {
            NewRow::Running => RunStatus::Running,
            NewRow::Queued | NewRow::Waiting => RunStatus::Pending,
            NewRow::Skipped => RunStatus::Skipped,
        }
    }

    /// The row's message.
    pub fn message(&self) -> Option<&'static str> {
        match self {
            NewRow::Skipped => Some(reason::SKIPPED_OVERLAP),
            NewRow::Waiting => Some(reason::WAITING),
            NewRow::Running | NewRow::Queued => None,
        }
    }
}

/// What becomes of the requested slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotPlan {
    /// A scheduled slot more than [`MAX_EARLY`](crate::store::MAX_EARLY) ahead of the store's
    /// clock: nothing is written.
    NotDue,
    /// The row exists and is not claimable: nothing is written.
    Taken(RunStatus),
    /// A request made [`ahead`](ClaimRequest::ahead) of its instant whose job and partition has
    /// another run `running` with a fresh heartbeat (not `allow`): nothing is written, and the
    /// caller claims again at the instant.
    Busy,
    /// The row (its id) is `running` with a stale heartbeat: it gets a new attempt for the caller,
    /// its previous attempt closed `abandoned` ([`reason::HEARTBEAT_EXPIRED`]).
    TakeOver(i64),
    /// A new row.
    Insert(NewRow),
}

/// The decision on one request: the slot's row and the changes to other rows of its job and
/// partition, to be written together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimPlan {
    /// The slot's row.
    pub slot: SlotPlan,
    /// Other rows of the job and partition, by id.
    pub changes: Vec<(i64, Change)>,
}

impl ClaimPlan {
    /// The answer to the request, with the lease the store handed out when the plan claims.
    pub fn answer(&self, lease: Option<Lease>) -> Claim {
        match (self.slot, lease) {
            (SlotPlan::NotDue, _) => Claim::NotDue,
            (SlotPlan::Busy, _) => Claim::Busy,
            (SlotPlan::Taken(status), _) => Claim::Taken { status },
            (SlotPlan::Insert(NewRow::Queued), _) => Claim::Queued,
            (SlotPlan::Insert(row @ (NewRow::Skipped | NewRow::Waiting)), _) => Claim::Taken {
                status: row.status(),
            },
            (SlotPlan::TakeOver(_) | SlotPlan::Insert(NewRow::Running), Some(lease)) => {
                Claim::Won(lease)
            }
            (SlotPlan::TakeOver(_) | SlotPlan::Insert(NewRow::Running), None) => Claim::Taken {
                status: RunStatus::Running,
            },
        }
    }

    /// The events the plan implies for `request`'s slot, in the order to log them.
    pub fn events<'a>(&'a self, request: &'a ClaimRequest) -> Vec<Event<'a>> {
        let key = &request.key;
        let mut events: Vec<Event<'a>> = self
            .changes
            .iter()
            .filter(|(_, change)| *change == Change::Fence)
            .map(|(run_id, _)| Event::Fenced {
                key,
                run_id: *run_id,
            })
            .collect();
        let count = |wanted: Change| self.changes.iter().filter(|(_, c)| *c == wanted).count();
        match self.slot {
            SlotPlan::Insert(NewRow::Skipped) => events.push(Event::Skipped { key }),
            SlotPlan::Insert(NewRow::Waiting) => events.push(Event::Buffered {
                key,
                superseded: count(Change::Supersede),
            }),
            SlotPlan::Insert(_) if request.overlap == Overlap::Replace => {
                let replaced = count(Change::Replace);
                if replaced > 0 {
                    events.push(Event::Replaced { key, replaced });
                }
            }
            _ => {}
        }
        events
    }
}

/// Decides one request at `now` (the store's clock).
///
/// `existing` is the slot's row, if it has one; `siblings` are rows of the same job and partition
/// (any others are ignored), of which the rules read the `running` and waiting ones.
///
/// - A scheduled slot more than [`MAX_EARLY`](crate::store::MAX_EARLY) ahead is not due.
/// - An existing row is taken over when it is `running` with a stale heartbeat (claims only; a
///   worker recovers it), and otherwise taken.
/// - Enqueueing queues a new slot whatever runs: the worker that picks it decides its overlap
///   ([`plan_due`](super::plan_due)).
/// - A new slot requested [`ahead`](ClaimRequest::ahead) of its instant whose job and partition
///   has another run `running` with a fresh heartbeat is busy (not `allow`): nothing is written.
/// - Otherwise, a new slot whose job and partition has another run `running` with a fresh
///   heartbeat is decided by the overlap policy: `skip` records it skipped; `buffer_one` lets it wait and the
///   older waiting slots give way; `replace` stops every running run and runs it; `allow` runs it.
/// - A new slot that runs under `skip` or `buffer_one` (claims only) fences the stale running runs
///   of its job and partition.
pub fn plan_claim(
    request: &ClaimRequest,
    mode: Mode,
    existing: Option<&RowFacts>,
    siblings: &[RowFacts],
    now: DateTime<Utc>,
) -> ClaimPlan {
    let slot = |slot| ClaimPlan {
        slot,
        changes: Vec::new(),
    };
    if not_due(request, now) {
        return slot(SlotPlan::NotDue);
    }
    if let Some(row) = existing {
        return match mode {
            Mode::Claim if row.is_stale(now) => slot(SlotPlan::TakeOver(row.id)),
            _ => slot(SlotPlan::Taken(row.status)),
        };
    }
    if mode == Mode::Enqueue {
        // The worker that picks the slot decides its overlap then, as a tick decides it at the
        // slot's instant: deciding it here, ahead of the instant, skipped slots whose predecessor
        // was about to end.
        return slot(SlotPlan::Insert(NewRow::Queued));
    }
    let key = &request.key;
    let siblings = || siblings.iter().filter(|row| row.is_sibling_of(key));
    let busy = request.overlap != Overlap::Allow && siblings().any(|r| r.is_fresh_running(now));
    let changed = |pick: &dyn Fn(&RowFacts) -> bool, change: Change| -> Vec<(i64, Change)> {
        siblings()
            .filter(|row| pick(row))
            .map(|row| (row.id, change))
            .collect()
    };
    match (busy, request.overlap) {
        (true, _) if request.ahead => slot(SlotPlan::Busy),
        (true, Overlap::Skip) => slot(SlotPlan::Insert(NewRow::Skipped)),
        (true, Overlap::BufferOne) => ClaimPlan {
            slot: SlotPlan::Insert(NewRow::Waiting),
            changes: changed(&RowFacts::is_waiting, Change::Supersede),
        },
        (true, _) => ClaimPlan {
            slot: SlotPlan::Insert(NewRow::Running),
            changes: changed(&|r| r.status == RunStatus::Running, Change::Replace),
        },
        (false, Overlap::Skip | Overlap::BufferOne) => ClaimPlan {
            slot: SlotPlan::Insert(NewRow::Running),
            changes: changed(&|r| r.is_stale(now), Change::Fence),
        },
        (false, _) => slot(SlotPlan::Insert(NewRow::Running)),
    }
}
