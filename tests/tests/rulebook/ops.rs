//! The operations a sequence is made of, and how they are drawn.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use proptest::prelude::*;
use slotguard::store::{ClaimRequest, DueSpec, Finish, SlotKey, Trigger};
use slotguard::{ErrorClass, Overlap};

/// The owners (replicas) that claim.
pub(crate) const OWNERS: [&str; 3] = ["a", "b", "c"];
/// The staleness threshold of every request.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(3600);
/// How far one `Age` moves the clock: past [`STALE_AFTER`] and past a later retry.
pub(crate) const AGE: TimeDelta = TimeDelta::hours(2);
/// How far `EnqueueAhead` puts a queued slot's next attempt after now: inside [`LEAD`], before one `Age`.
pub(crate) const DELAY: TimeDelta = TimeDelta::hours(1);
/// The lead of a `claim_due` that claims ahead (`DueSpec::ahead`).
pub(crate) const LEAD: Duration = Duration::from_secs(90 * 60);

/// How an attempt ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum End {
    Succeeded,
    RetryNow,
    RetryLater,
    Failed,
    Dead,
    HandOver,
    Abandon,
}

impl End {
    pub(crate) fn finish(self) -> Finish {
        let hour = Duration::from_secs(3600);
        match self {
            End::Succeeded => Finish::succeeded(),
            End::RetryNow => Finish::failed(ErrorClass::Transient, "boom", Some(Duration::ZERO)),
            End::RetryLater => Finish::failed(ErrorClass::Transient, "boom", Some(hour)),
            End::Failed => Finish::failed(ErrorClass::Transient, "boom", None),
            End::Dead => Finish::failed(ErrorClass::Permanent, "bad input", None),
            End::HandOver => Finish::abandoned("shutdown", Some(Duration::ZERO)),
            End::Abandon => Finish::abandoned("shutdown", None),
        }
    }
}

/// One step of a sequence.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// A replica claims a slot (`claim`).
    Claim {
        owner: usize,
        slot: Slot,
        overlap: Overlap,
        /// Claimed ahead of the slot's instant (`ClaimRequest::ahead`).
        ahead: bool,
        /// May be answered `Contended` (`ClaimRequest::defer_if_contended`): one claim at a
        /// time here, so never; PostgreSQL then takes its claim locks without waiting.
        defer: bool,
    },
    /// A scheduler queues a slot (`enqueue_slots`).
    Enqueue { slot: Slot, overlap: Overlap },
    /// A slot recorded skipped by the process (`record_skipped`).
    Skip { slot: Slot },
    /// A scheduler queues a slot ahead of its instant: `Enqueue`, then the slot's row, if it is
    /// `pending`, never attempted and due at a time, falls due [`DELAY`] after now.
    EnqueueAhead { slot: Slot, overlap: Overlap },
    /// A claim of a slot far ahead of the store's clock.
    Future { owner: usize, slot: Slot },
    /// A worker claims due work (`claim_due`) of both jobs.
    ClaimDue { owner: usize, due: Due },
    /// Which jobs have due work (`due_jobs`).
    DueJobs { due: Due },
    /// A replica's heartbeat for every lease it was ever handed.
    Heartbeat { owner: usize },
    /// The holder of the `n`-th lease handed out (modulo their number) records how it ended.
    Finish { lease: usize, end: End },
    /// The clock moves past every heartbeat and retry delay.
    Age,
}

/// A slot of one of two jobs, in one of two partitions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub(crate) job: usize,
    pub(crate) minute: i64,
    pub(crate) partition: usize,
}

/// The parameters of a `claim_due` call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Due {
    pub(crate) max_attempts: u32,
    pub(crate) overlap: Overlap,
    pub(crate) limit: usize,
    pub(crate) job_limit: Option<u32>,
    pub(crate) cluster_limit: Option<u32>,
    /// Claims queued slots that fall due within [`LEAD`].
    pub(crate) ahead: bool,
}

impl Slot {
    pub(crate) fn request(&self, base: DateTime<Utc>, overlap: Overlap) -> ClaimRequest {
        let at = base + TimeDelta::minutes(self.minute);
        ClaimRequest {
            key: SlotKey {
                job: format!("j{}", self.job),
                scheduled_at: at,
                partition: ["", "p"][self.partition].to_owned(),
            },
            trigger: Trigger::Schedule,
            zone: "UTC".to_owned(),
            wall: at.naive_utc(),
            business_date: at.date_naive(),
            fingerprint: 7,
            stale_after: STALE_AFTER,
            overlap,
            calendar: None,
            ahead: false,
            defer_if_contended: false,
        }
    }

    /// The claim of the slot, made ahead of its instant or not, and allowed to defer or not.
    pub(crate) fn claim(
        &self,
        base: DateTime<Utc>,
        overlap: Overlap,
        (ahead, defer_if_contended): (bool, bool),
    ) -> ClaimRequest {
        ClaimRequest {
            ahead,
            defer_if_contended,
            ..self.request(base, overlap)
        }
    }
}

impl Due {
    pub(crate) fn specs(&self) -> Vec<DueSpec> {
        (0..2)
            .map(|job| {
                DueSpec::new(format!("j{job}"), self.max_attempts)
                    .with_overlap(self.overlap)
                    .with_limits(self.job_limit, self.cluster_limit)
                    .with_ahead(if self.ahead { LEAD } else { Duration::ZERO })
            })
            .collect()
    }
}

fn overlap() -> impl Strategy<Value = Overlap> {
    prop_oneof![
        Just(Overlap::Skip),
        Just(Overlap::BufferOne),
        Just(Overlap::Allow),
        Just(Overlap::Replace),
    ]
}

fn slot() -> impl Strategy<Value = Slot> {
    (0..2usize, 0..5i64, 0..2usize).prop_map(|(job, minute, partition)| Slot {
        job,
        minute,
        partition,
    })
}

fn due() -> impl Strategy<Value = Due> {
    let cap = proptest::option::weighted(0.3, 1..3u32);
    (
        1..4u32,
        overlap(),
        1..5usize,
        cap.clone(),
        cap,
        any::<bool>(),
    )
        .prop_map(
            |(max_attempts, overlap, limit, job_limit, cluster_limit, ahead)| Due {
                max_attempts,
                overlap,
                limit,
                job_limit,
                cluster_limit,
                ahead,
            },
        )
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        Just(End::Succeeded),
        Just(End::RetryNow),
        Just(End::RetryLater),
        Just(End::Failed),
        Just(End::Dead),
        Just(End::HandOver),
        Just(End::Abandon),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let owner = || 0..OWNERS.len();
    prop_oneof![
        5 => (owner(), slot(), overlap(), any::<bool>(), any::<bool>()).prop_map(|(owner, slot, overlap, ahead, defer)| Op::Claim { owner, slot, overlap, ahead, defer }),
        2 => (slot(), overlap()).prop_map(|(slot, overlap)| Op::Enqueue { slot, overlap }),
        1 => slot().prop_map(|slot| Op::Skip { slot }),
        2 => (slot(), overlap()).prop_map(|(slot, overlap)| Op::EnqueueAhead { slot, overlap }),
        1 => (owner(), slot()).prop_map(|(owner, slot)| Op::Future { owner, slot }),
        3 => (owner(), due()).prop_map(|(owner, due)| Op::ClaimDue { owner, due }),
        1 => due().prop_map(|due| Op::DueJobs { due }),
        2 => owner().prop_map(|owner| Op::Heartbeat { owner }),
        4 => (any::<usize>(), end()).prop_map(|(lease, end)| Op::Finish { lease, end }),
        2 => Just(Op::Age),
    ]
}

/// A sequence of up to `len` operations.
pub(crate) fn sequence(len: usize) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), 1..len)
}
