//! A job as the runtime keeps it, and the work offered to its guard chain: the leaf the runtime and
//! every guard layer share.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use slotguard_cron::{Schedule, Slot};

pub(crate) use crate::context::RunSlot;
use crate::job::{Handler, PartitionProvider};
use crate::monitor::attached::Attached;
use crate::policy::{CatchUp, GuardLevel, Overlap, RetryPolicy};
use crate::store::{CalendarStamp, ClaimRequest, DueSpec, SlotKey, Trigger};

/// The layers of a job's chain, decided once at `build()` from its level and policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layers {
    /// The per-process running flag.
    pub(crate) flag: bool,
    /// The cluster-wide lock.
    pub(crate) lock: bool,
    /// The slot row.
    pub(crate) slot: bool,
}

impl Layers {
    /// The chain of a job at `level` with `overlap`, partitioned or not.
    ///
    /// At the `slot` level, a job whose overlap is not `skip`, or that is partitioned, leaves the
    /// flag and the lock out: they would serialise what the store's overlap policy decides per
    /// partition (buffer, replace, allow, one run per partition at a time).
    pub(crate) fn for_job(level: GuardLevel, overlap: Overlap, partitioned: bool) -> Self {
        let by_store = level == GuardLevel::Slot && (overlap != Overlap::Skip || partitioned);
        Layers {
            flag: level >= GuardLevel::Local && !by_store,
            lock: level >= GuardLevel::Lock && !by_store,
            slot: level == GuardLevel::Slot,
        }
    }

    /// Whether the layer at `level` (`local`, `lock` or `slot`) is in this chain.
    pub(crate) fn includes(self, level: GuardLevel) -> bool {
        match level {
            GuardLevel::None => true,
            GuardLevel::Local => self.flag,
            GuardLevel::Lock => self.lock,
            GuardLevel::Slot => self.slot,
        }
    }
}

/// A validated job, as the runtime keeps it.
pub(crate) struct JobEntry {
    pub(crate) name: Arc<str>,
    pub(crate) schedule: Schedule,
    pub(crate) level: GuardLevel,
    pub(crate) layers: Layers,
    pub(crate) lock_key: i64,
    pub(crate) running: AtomicBool,
    pub(crate) handler: Handler,
    pub(crate) stale_after: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) overlap: Overlap,
    pub(crate) catch_up: CatchUp,
    pub(crate) deadline: Option<Duration>,
    /// How long its finished runs are kept.
    pub(crate) retention: Duration,
    pub(crate) partitions: Option<PartitionProvider>,
    /// Stored pause state, refreshed every recovery interval.
    pub(crate) paused: AtomicBool,
    /// Whether the store had due work of the job at the last look: then the end of a run of it
    /// looks again at once, instead of at the next recovery round (a backfill of a job whose runs
    /// go one at a time drains at its own pace, not one run per round).
    pub(crate) backlog: AtomicBool,
    /// Set when a run of the job ended while it had a backlog: the recovery loop's next wake-up
    /// looks at this job.
    pub(crate) look_again: AtomicBool,
    /// Whether a body of the job is executing in this process right now (not merely holding the
    /// flag while its chain is walked or its permits released): only then does the flag prove "a
    /// previous run is still going".
    pub(crate) in_body: AtomicBool,
    /// Per process and cluster-wide limits on bodies claimed from the store ([`Job::process_limit`](crate::Job::process_limit),
    /// [`Job::cluster_limit`](crate::Job::cluster_limit)).
    pub(crate) limits: (Option<u32>, Option<u32>),
    /// Bodies of the job claimed from the store that run in this process now.
    pub(crate) bodies: AtomicUsize,
    /// Where its check-ins go, if anywhere.
    pub(crate) monitor: Option<Attached>,
    /// For the entry of a stored schedule, the job whose handler it runs: its pause state is the
    /// job's.
    pub(crate) of: Option<Arc<JobEntry>>,
}

impl JobEntry {
    /// Whether the flag and lock layers step aside so the store can apply the overlap policy.
    pub(crate) fn overlap_by_store(&self) -> bool {
        self.layers.slot && !self.layers.flag
    }

    pub(crate) fn is_paused(&self) -> bool {
        self.of
            .as_ref()
            .map_or(&self.paused, |job| &job.paused)
            .load(Ordering::Acquire)
    }

    /// The entry of a stored schedule of this job: its slots on `schedule`, with the job's handler
    /// and policies. Its slots go to the slot layer alone, like a partition's, so that the store
    /// decides overlap per job and partition across the job's code and stored schedules.
    pub(crate) fn for_schedule(self: &Arc<Self>, schedule: Schedule) -> JobEntry {
        JobEntry {
            name: Arc::clone(&self.name),
            schedule,
            level: self.level,
            layers: Layers::for_job(self.level, self.overlap, true),
            lock_key: self.lock_key,
            running: AtomicBool::new(false),
            handler: Arc::clone(&self.handler),
            stale_after: self.stale_after,
            retry: self.retry,
            overlap: self.overlap,
            catch_up: self.catch_up,
            deadline: self.deadline,
            retention: self.retention,
            partitions: None,
            paused: AtomicBool::new(false),
            backlog: AtomicBool::new(false),
            look_again: AtomicBool::new(false),
            in_body: AtomicBool::new(false),
            limits: self.limits,
            bodies: AtomicUsize::new(0),
            monitor: self.monitor.clone(),
            of: Some(Arc::clone(self)),
        }
    }

    /// What the store needs to hand this job's due work out. A job whose chain takes the flag or
    /// the lock gets one run per call: one flag and one lock cover one body (its stored schedules'
    /// partitions may have due work of their own at once).
    pub(crate) fn due_spec(&self) -> DueSpec {
        let here = self.bodies.load(Ordering::Acquire);
        let room = self
            .limits
            .0
            .map(|n| n.saturating_sub(u32::try_from(here).unwrap_or(u32::MAX)));
        let one_at_a_time = (self.layers.flag || self.layers.lock).then_some(1);
        let room = match (room, one_at_a_time) {
            (Some(room), Some(one)) => Some(room.min(one)),
            (room, one) => room.or(one),
        };
        DueSpec {
            job: self.name.to_string(),
            max_attempts: self.retry.max_attempts,
            overlap: self.overlap,
            limit: room,
            cluster_limit: self.limits.1,
            ahead: Duration::ZERO,
        }
    }

    /// Whether this process has room for another body of the job under its process limit.
    pub(crate) fn has_room(&self) -> bool {
        self.limits
            .0
            .is_none_or(|n| self.bodies.load(Ordering::Acquire) < n as usize)
    }
}

/// What a candidate asks the chain for.
#[derive(Clone)]
pub(crate) enum Work {
    /// One slot of the schedule, claimed by its key (trigger `schedule`): a tick, its second look,
    /// or its retry after a store outage.
    Slot {
        slot: Slot,
        /// Empty when the job is not partitioned.
        partition: Arc<str>,
        /// How many times the slot was looked at before (0 at its tick): a slot whose job's lock
        /// was held elsewhere, or whose flag was up here without a body running, is looked at again.
        looks: u8,
        /// The calendar it was planned on, recorded with its row.
        calendar: Option<Arc<CalendarStamp>>,
        /// Offered to the chain ahead of its instant (`claim_ahead`): a layer that finds another
        /// run of the job going sends it back to be offered again at the instant.
        ahead: bool,
        /// How many times its claim was sent back because another claim of its job was in flight
        /// ([`Claim::Contended`](crate::store::Claim::Contended)); from [`MAX_CONTENDED`] on, the
        /// claim waits for the other one instead.
        contended: u8,
        /// Let through the lock layer with its job's lock held elsewhere (a later look, where the
        /// row decides): its claim gives way to a claim of the job in flight, which is nearly
        /// always the lock holder's. A claim made holding the lock waits for the other one.
        lock_elsewhere: bool,
    },
    /// Whatever the store has due for the job: retries, stale attempts of dead or frozen processes,
    /// shutdown hand-overs, buffered slots, catch-up, manual and backfill runs; at most `limit`
    /// runs per round. A worker's also takes the queued slots that fall due within `ahead`
    /// ([`DueSpec::ahead`]): their bodies start at their instants.
    Due { limit: usize, ahead: Duration },
}

/// How many times a slot's claim may be sent back because another claim of its job was in flight
/// (each time it is looked at again after the second look's wait, 250 ms); after that its
/// claim waits for the other one. Bounded, so that a job claimed without pause elsewhere still has
/// its slot decided.
pub(crate) const MAX_CONTENDED: u8 = 2;

/// Work for one job on its way through the job's guard chain.
#[derive(Clone)]
pub(crate) struct Candidate {
    pub(crate) job: Arc<JobEntry>,
    pub(crate) work: Work,
    /// The span of the run it may become: made when the chain first looks at it, kept across
    /// looks (see `trace`).
    pub(crate) span: tracing::Span,
}

impl Candidate {
    /// A slot of the job's schedule as the code gives it.
    pub(crate) fn slot(job: &Arc<JobEntry>, slot: Slot, partition: Arc<str>) -> Self {
        let calendar = CalendarStamp::of(&job.schedule, &slot, None).map(Arc::new);
        Self::planned(job, slot, partition, calendar)
    }

    /// A slot planned on `calendar` (the job's calendar with the overrides in force at it).
    pub(crate) fn planned(
        job: &Arc<JobEntry>,
        slot: Slot,
        partition: Arc<str>,
        calendar: Option<Arc<CalendarStamp>>,
    ) -> Self {
        Candidate {
            job: Arc::clone(job),
            work: Work::Slot {
                slot,
                partition,
                looks: 0,
                calendar,
                ahead: false,
                contended: 0,
                lock_elsewhere: false,
            },
            span: tracing::Span::none(),
        }
    }

    /// The job's due work, at most `limit` runs of it, with the queued slots that fall due
    /// within `ahead`.
    pub(crate) fn due(job: &Arc<JobEntry>, limit: usize, ahead: Duration) -> Self {
        Candidate {
            job: Arc::clone(job),
            work: Work::Due { limit, ahead },
            span: tracing::Span::none(),
        }
    }

    /// The run's span, made if it is not yet: with the slot, for slot work.
    pub(crate) fn traced(mut self, owner: &str) -> Self {
        if self.span.is_none() {
            self.span = crate::trace::run_span(&self.job.name, owner);
            if let Work::Slot {
                slot, partition, ..
            } = &self.work
            {
                crate::trace::describe_slot(
                    &self.span,
                    slot.scheduled_at,
                    Trigger::Schedule,
                    partition,
                );
            }
        }
        self
    }

    /// How many runs due work may claim (1 for slot work).
    pub(crate) fn due_limit(&self) -> usize {
        match self.work {
            Work::Due { limit, .. } => limit,
            Work::Slot { .. } => 1,
        }
    }

    /// The spec of due work's claim (for slot work, the job's spec).
    pub(crate) fn due_spec(&self) -> DueSpec {
        let spec = self.job.due_spec();
        match self.work {
            Work::Due { ahead, .. } => spec.with_ahead(ahead),
            Work::Slot { .. } => spec,
        }
    }

    /// How many times this slot was looked at before (0 for due work and at its tick).
    pub(crate) fn looks(&self) -> u8 {
        match self.work {
            Work::Slot { looks, .. } => looks,
            Work::Due { .. } => 0,
        }
    }

    /// Whether this slot is offered to the chain ahead of its instant.
    pub(crate) fn is_ahead(&self) -> bool {
        matches!(self.work, Work::Slot { ahead: true, .. })
    }

    /// Marks this slot as offered ahead of its instant, or not.
    pub(crate) fn set_ahead(&mut self, early: bool) {
        if let Work::Slot { ahead, .. } = &mut self.work {
            *ahead = early;
        }
    }

    /// Counts a claim sent back because another claim of its job was in flight.
    pub(crate) fn contended(&mut self) {
        if let Work::Slot { contended, .. } = &mut self.work {
            *contended = contended.saturating_add(1);
        }
    }

    /// Notes whether the lock layer let this slot through with its lock held elsewhere.
    pub(crate) fn set_lock_elsewhere(&mut self, elsewhere: bool) {
        if let Work::Slot { lock_elsewhere, .. } = &mut self.work {
            *lock_elsewhere = elsewhere;
        }
    }

    /// Makes this slot's claim wait for another claim of its job in flight, never answered
    /// [`Claim::Contended`](crate::store::Claim::Contended): for a caller that does not look again.
    pub(crate) fn never_defer(&mut self) {
        if let Work::Slot { contended, .. } = &mut self.work {
            *contended = MAX_CONTENDED;
        }
    }

    /// Whether this is a second (or later) look at a slot.
    pub(crate) fn is_recheck(&self) -> bool {
        matches!(self.work, Work::Slot { looks, .. } if looks > 0)
    }

    /// The slot, for slot work; `None` for due work.
    pub(crate) fn slot_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        match &self.work {
            Work::Slot { slot, .. } => Some(slot.scheduled_at),
            Work::Due { .. } => None,
        }
    }

    /// The claim of slot work; `None` for due work.
    pub(crate) fn claim_request(&self) -> Option<ClaimRequest> {
        let Work::Slot {
            slot,
            partition,
            calendar,
            ahead,
            contended,
            lock_elsewhere,
            ..
        } = &self.work
        else {
            return None;
        };
        Some(ClaimRequest {
            key: SlotKey {
                job: self.job.name.to_string(),
                scheduled_at: slot.scheduled_at,
                partition: partition.to_string(),
            },
            trigger: Trigger::Schedule,
            zone: slot.zone.name().to_owned(),
            wall: slot.wall,
            business_date: slot.business_date(),
            fingerprint: self.job.schedule.fingerprint(),
            stale_after: self.job.stale_after,
            overlap: self.job.overlap,
            calendar: calendar.as_deref().cloned(),
            ahead: *ahead,
            defer_if_contended: *lock_elsewhere && *contended < MAX_CONTENDED,
        })
    }
}
