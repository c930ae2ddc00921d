//! The timer: a heap of each job's next slot (and of the next slot its calendar removes). It sleeps
//! until the earliest is due, hands every slot due by then to a tick task (and every removed one to
//! be recorded), and never awaits a run.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard_cron::Slot;

use crate::entry::Candidate;

use super::lead::Instants;
use super::{Runtime, deadline, removed, tick};

/// Due time, job index, and whether the entry is a slot the job's calendar removed.
type Heap = BinaryHeap<Reverse<(DateTime<Utc>, usize, bool)>>;

/// Each job's next slot, its next removed slot, the last slot fired per job (a clock that steps
/// back never fires a slot twice here), the heap of due times, and how many slots of the heap fall
/// due at each instant (the lead grows with them: `lead.rs`).
struct Plan {
    next: Vec<Option<Slot>>,
    removed: Vec<Option<Slot>>,
    fired: Vec<Option<DateTime<Utc>>>,
    heap: Heap,
    instants: Instants,
}

/// What one turn of the timer found due.
#[derive(Default)]
struct Due {
    slots: Vec<Candidate>,
    removed: Vec<(Arc<crate::entry::JobEntry>, Slot, Option<String>)>,
}

/// Runs the timer until shutdown.
pub(crate) async fn drive(rt: Arc<Runtime>) {
    let n = rt.jobs.len();
    let mut plan = Plan {
        next: vec![None; n],
        removed: vec![None; n],
        fired: vec![None; n],
        heap: BinaryHeap::with_capacity(n),
        instants: Instants::default(),
    };
    let mut changes = rt.synced.as_ref().map(|c| c.changes());
    let mut overrides = rt.calendars.as_ref().map(|c| c.subscribe());
    report_periods(&rt);
    super::coverage::report(&rt);
    plan.replan(&rt);
    let base = chrono::Duration::from_std(rt.lead.base()).unwrap_or(chrono::Duration::zero());
    loop {
        let Some(&Reverse((due, _, _))) = plan.heap.peek() else {
            // No job will ever fire again (the calendar ran out); wait for shutdown.
            rt.stop.cancelled().await;
            return;
        };
        // The earliest entry may be a removed slot, which the instants do not count.
        let wake = plan
            .instants
            .wake(rt.lead)
            .map_or(due - base, |w| w.min(due - base));
        let now = rt.clock.now();
        let mut wait = (wake - now).to_std().unwrap_or(Duration::ZERO);
        if wait.is_zero() {
            if rt.stop.is_cancelled() {
                return;
            }
            let lead = plan.instants.horizon(rt.lead, now);
            let due = plan.take_due(&rt, lead);
            spawn_ticks(&rt, due.slots);
            if !due.removed.is_empty() {
                rt.tracker
                    .spawn(removed::record(Arc::clone(&rt), due.removed));
            }
            if !plan.holds(&rt, lead) {
                continue;
            }
            // Due, but an override in force at it may not be read yet: look again after a while.
            wait = HOLD;
        }
        let stepped = async {
            let stepped = match &mut changes {
                Some(changes) => changes.changed().await.is_ok(),
                None => false,
            };
            if !stepped {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
            // The scheduler's time stepped (see `ClockSync`): plan from the new time.
            () = stepped => plan.replan(&rt),
            // An override changed a job's calendar: plan on it.
            () = overridden(&mut overrides) => plan.replan(&rt),
        }
        // Re-read the clock: a wake-up is never trusted to be on time.
    }
}

/// How long the timer waits before it looks again at a due slot whose calendar overrides are not
/// all read yet.
const HOLD: Duration = Duration::from_millis(50);

/// Resolves when an override changed a job's calendar; never without overrides.
async fn overridden(overrides: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    let changed = match overrides {
        Some(rx) => rx.changed().await.is_ok(),
        None => false,
    };
    if !changed {
        std::future::pending::<()>().await;
    }
}

impl Plan {
    /// Each job's next slot after the current time less [`Runtime::settle`] (and after the last slot
    /// it fired here). A slot that fell due that recently is still this replica's to offer: the
    /// replicas that started before it may not have claimed it yet, and catch-up leaves it to the
    /// ticks (see `catchup::plan`).
    fn replan(&mut self, rt: &Runtime) {
        self.heap.clear();
        self.instants.clear();
        let now = rt.clock.now();
        let from_now = now - rt.settle();
        for i in 0..rt.jobs.len() {
            let from = self.fired[i].map_or(from_now, |f| f.max(from_now));
            let slot = rt.next_slot(i, from);
            if let Some(slot) = slot {
                self.heap.push(Reverse((slot.scheduled_at, i, false)));
                self.instants.add(slot.scheduled_at);
            }
            self.next[i] = slot;
            self.removed[i] = None;
            self.plan_removed(rt, i, from);
        }
    }

    /// Plans the job's next removed slot after `after`, when none is planned.
    fn plan_removed(&mut self, rt: &Runtime, i: usize, after: DateTime<Utc>) {
        if self.removed[i].is_some() {
            return;
        }
        let removed = rt.next_removed(i, after);
        if let Some(slot) = removed {
            self.heap.push(Reverse((slot.scheduled_at, i, true)));
        }
        self.removed[i] = removed;
    }

    /// Whether the earliest slot is due but held: an override in force at it may not be read yet.
    fn holds(&self, rt: &Runtime, lead: chrono::Duration) -> bool {
        self.heap.peek().is_some_and(|&Reverse((at, i, _))| {
            at - lead <= rt.clock.now() && !rt.calendar_knows(i, at)
        })
    }

    /// Pops every slot due by now (plus the claim lead), one per job, and plans each job's next;
    /// and every removed slot due by now, planning the job's next removed one. A slot whose
    /// calendar overrides are not all read yet stays in the heap.
    fn take_due(&mut self, rt: &Arc<Runtime>, lead: chrono::Duration) -> Due {
        let now = rt.clock.now();
        let mut due = Due::default();
        let mut in_batch = HashSet::new();
        let mut held = Vec::new();
        while let Some(&Reverse((at, i, removed))) = self.heap.peek() {
            if at > now + lead {
                break;
            }
            if !rt.calendar_knows(i, at) {
                held.extend(self.heap.pop());
                continue;
            }
            // Recorded as early as slots are claimed (the lead): the wait above counts it.
            if removed {
                self.heap.pop();
                if let Some(slot) = self.removed[i].take() {
                    let holiday = rt.holiday(i, &slot);
                    due.removed.push((Arc::clone(&rt.jobs[i]), slot, holiday));
                    self.plan_removed(rt, i, slot.scheduled_at);
                }
                continue;
            }
            // One slot per job per tick: a job's next slot inside the horizon goes to the next tick.
            if in_batch.contains(&i) {
                break;
            }
            self.heap.pop();
            self.instants.remove(at);
            in_batch.insert(i);
            let Some(slot) = self.next[i] else { continue };
            self.fired[i] = Some(slot.scheduled_at);
            let following = following(rt, i, slot, now);
            self.next[i] = following;
            if let Some(f) = following {
                self.heap.push(Reverse((f.scheduled_at, i, false)));
                self.instants.add(f.scheduled_at);
            }
            // A calendar whose next removed slot lay beyond the horizon: look again from here.
            self.plan_removed(rt, i, slot.scheduled_at);
            let job = &rt.jobs[i];
            deadline::watch(rt, job, slot.scheduled_at);
            let calendar = rt.calendar_stamp(i, &slot);
            due.slots
                .push(Candidate::planned(job, slot, Arc::from(""), calendar));
        }
        self.heap.extend(held);
        due
    }
}

/// The job's slot after `slot`; when that is already past (the timer was not running: suspended,
/// starved), the first one after now: the latest due slot fires once rather than a burst, and the
/// catch-up policies decide about the rest.
fn following(rt: &Runtime, i: usize, slot: Slot, now: DateTime<Utc>) -> Option<Slot> {
    let job = &rt.jobs[i];
    let following = rt.next_slot(i, slot.scheduled_at);
    if following.is_none_or(|f| f.scheduled_at > now) {
        return following;
    }
    let skipped = rt
        .schedule_of(i)
        .slots_after(slot.scheduled_at)
        .take_while(|s| s.scheduled_at <= now)
        .take(100_000)
        .count() as u64;
    crate::metrics::slots_missed(&job.name, skipped.saturating_sub(1).max(1));
    tracing::warn!(
        event = "job_slots_missed",
        job = %job.name,
        from = %slot.scheduled_at,
        until = %now,
        "timer fell behind; slots in between were not fired"
    );
    rt.next_slot(i, now)
}

/// Hands the batch to tick tasks, grouped by this replica's spread delay for each slot.
pub(super) fn spawn_ticks(rt: &Arc<Runtime>, batch: Vec<Candidate>) {
    if batch.is_empty() {
        return;
    }
    let mut groups: BTreeMap<Duration, Vec<Candidate>> = BTreeMap::new();
    for candidate in batch {
        let delay = spread_delay(rt, &candidate);
        groups.entry(delay).or_default().push(candidate);
    }
    for (delay, group) in groups {
        rt.tracker.spawn(tick::tick(Arc::clone(rt), delay, group));
    }
}

/// How many steps the load spread has: each replica offers a slot to the chain after one of them.
const SPREAD_STEPS: u64 = 4;

/// This replica's delay for a slot: one of [`SPREAD_STEPS`] steps of the spread, chosen by a hash of
/// the replica, the job and the slot. Replicas whose timers fire together then start each job's
/// slot in an order that differs per job and per slot, so the first to claim — the one that runs
/// it — is a different replica from job to job, instead of the fastest one taking the whole tick.
fn spread_delay(rt: &Runtime, candidate: &Candidate) -> Duration {
    if rt.spread.is_zero() {
        return Duration::ZERO;
    }
    let slot_ms = candidate.slot_at().map_or(0, |s| s.timestamp_millis());
    let hash = crate::policy::fnv1a(
        rt.owner
            .bytes()
            .chain([0])
            .chain(candidate.job.name.bytes())
            .chain(slot_ms.to_le_bytes()),
    );
    // The high bits: FNV's low bits mix poorly.
    let step = (hash >> 32) % SPREAD_STEPS;
    rt.spread.mul_f64(step as f64 / SPREAD_STEPS as f64)
}

/// Sets `job_period_seconds` of every job: the longest gap between its next ten slots, so that an
/// alert can tell a job that stopped from one that is quiet by design.
fn report_periods(rt: &Runtime) {
    let now = rt.clock.now();
    for job in &rt.jobs {
        let slots: Vec<_> = job
            .schedule
            .slots_after(now)
            .take(10)
            .map(|s| s.scheduled_at)
            .collect();
        let longest = slots
            .windows(2)
            .filter_map(|w| (w[1] - w[0]).to_std().ok())
            .max();
        if let Some(gap) = longest {
            crate::metrics::period(&job.name, gap, now.timestamp_millis() as f64 / 1000.0);
        }
    }
}
