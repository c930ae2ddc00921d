//! Operators' holiday overrides in the runtime: every replica (and scheduler) reads the overrides
//! each [`POLL`] and applies those of its jobs' calendars ([`Overrides`]); the timer plans each
//! job's slots on the calendar in force at their instant, and fires a slot only once this replica
//! knows every override in force at its instant (up to the last read's `fresh_at` plus the fence).
//! A slot already fired is never planned again, so an override never moves a slot claimed before
//! it took effect.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard_cron::{Schedule, Slot};

use crate::entry::JobEntry;
use crate::store::{CalendarStamp, CalendarStore, OverrideChanges, SCHEDULE_FENCE};
use crate::timeline::CalendarSpan;

use super::Runtime;
use super::schedules::POLL;

use crate::calendar_timeline::CalendarTimeline;

/// The most overrides one read returns.
const PAGE: usize = 1_000;

/// What this replica knows of the overrides: each job's timeline (by the job's index; `None`
/// without a calendar), and how far the copy is complete.
struct Book {
    jobs: Vec<Option<CalendarTimeline>>,
    seq: i64,
    known_until: Option<DateTime<Utc>>,
}

/// The overrides of the jobs' calendars, shared by the reader and the timer.
pub(crate) struct Overrides {
    book: RwLock<Book>,
    /// Bumped when an override changed a job's timeline: the timer plans again.
    changed: tokio::sync::watch::Sender<u64>,
}

impl Overrides {
    /// The overrides of `jobs`' calendars, none read yet; `None` when no job has a calendar.
    pub(crate) fn new(jobs: &[Arc<JobEntry>]) -> Option<Self> {
        let timelines: Vec<_> = jobs
            .iter()
            .map(|j| CalendarTimeline::new(&j.schedule))
            .collect();
        timelines.iter().any(Option::is_some).then(|| Overrides {
            book: RwLock::new(Book {
                jobs: timelines,
                seq: 0,
                known_until: None,
            }),
            changed: tokio::sync::watch::Sender::new(0),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Book> {
        // Every update of the book is made whole before the guard is dropped.
        self.book.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// A receiver told when an override changed a job's timeline.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Whether job `i`'s slot at `at` is decided by what this replica read: always for a job
    /// without a calendar.
    pub(crate) fn knows(&self, i: usize, at: DateTime<Utc>) -> bool {
        let book = self.read();
        book.jobs.get(i).is_none_or(Option::is_none) || book.known_until.is_some_and(|k| at <= k)
    }

    /// Runs `f` on job `i`'s timeline (`None`: the job has no calendar).
    fn with<T>(&self, i: usize, f: impl FnOnce(Option<&CalendarTimeline>) -> T) -> T {
        f(self.read().jobs.get(i).and_then(Option::as_ref))
    }

    /// Applies one read; answers whether a job's timeline changed.
    fn apply(&self, changes: &OverrideChanges, forget_before: DateTime<Utc>) -> bool {
        let mut book = self.book.write().unwrap_or_else(PoisonError::into_inner);
        let mut changed = false;
        for o in &changes.overrides {
            book.seq = book.seq.max(o.seq);
            for timeline in book.jobs.iter_mut().flatten() {
                if timeline.follows(&o.spec.calendar) {
                    timeline.apply(o);
                    changed = true;
                }
            }
        }
        for timeline in book.jobs.iter_mut().flatten() {
            timeline.forget_before(forget_before);
        }
        let fence = chrono::Duration::from_std(SCHEDULE_FENCE).unwrap_or_default();
        book.known_until = Some(changes.fresh_at + fence);
        changed
    }
}

/// Reads the overrides each [`POLL`] (longer after failures) until shutdown.
pub(crate) async fn drive(rt: Arc<Runtime>, store: Arc<dyn CalendarStore>, book: Arc<Overrides>) {
    let mut failures = 0u32;
    loop {
        failures = if read(&rt, &*store, &book).await {
            0
        } else {
            failures.saturating_add(1)
        };
        let wait = POLL
            .saturating_mul(1 << failures.min(4))
            .min(Duration::from_secs(5));
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Reads every override not read yet, once: for what plans slots before the reader's first round
/// (catch-up at start-up, run-once). `false` when they cannot be read; `true` when there are none
/// to follow.
pub(crate) async fn read_once(rt: &Runtime) -> bool {
    let store = rt.slots.as_ref().and_then(|s| s.store.calendars.clone());
    match (&rt.calendars, store) {
        (Some(book), Some(store)) => read(rt, &*store, book).await,
        _ => true,
    }
}

/// Reads the overrides since the last read, page by page.
async fn read(rt: &Runtime, store: &dyn CalendarStore, book: &Overrides) -> bool {
    loop {
        let after = book.read().seq;
        let changes = match store.override_changes(after, PAGE).await {
            Ok(changes) => changes,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the calendar overrides; slots of jobs with a calendar wait");
                return false;
            }
        };
        let more = changes.overrides.len() >= PAGE;
        // A slot fired here is at least this recent (see `Runtime::settle`).
        let keep = rt.clock.now() - rt.settle() - chrono::Duration::seconds(1);
        if book.apply(&changes, keep) {
            tracing::info!(
                event = "calendar_overrides_read",
                overrides = changes.overrides.len(),
                "calendar overrides changed the jobs' calendars"
            );
            book.changed.send_modify(|n| *n += 1);
        }
        if !more {
            return true;
        }
    }
}

/// The timer's view of each job's schedule: on the calendar with its overrides when the runtime
/// follows them, else the code's.
impl Runtime {
    /// `on_timeline` of job `i`'s timeline when it has one, else `on_code` of its code schedule.
    fn on_schedule<T>(
        &self,
        i: usize,
        on_timeline: impl FnOnce(&CalendarTimeline) -> T,
        on_code: impl FnOnce(&Schedule) -> T,
    ) -> T {
        let code = &self.jobs[i].schedule;
        match &self.calendars {
            Some(c) => c.with(i, |t| t.map_or_else(|| on_code(code), on_timeline)),
            None => on_code(code),
        }
    }

    /// Job `i`'s first slot strictly after `after`.
    pub(crate) fn next_slot(&self, i: usize, after: DateTime<Utc>) -> Option<Slot> {
        self.on_schedule(i, |t| t.next_after(after), |s| s.next_after(after))
    }

    /// Job `i`'s first slot strictly after `after` that its calendar removes.
    pub(crate) fn next_removed(&self, i: usize, after: DateTime<Utc>) -> Option<Slot> {
        self.on_schedule(
            i,
            |t| t.next_removed_after(after),
            |s| s.next_removed_after(after),
        )
    }

    /// The holiday that removed job `i`'s `slot` (`None`: a weekend day), in the calendar in force
    /// at its instant.
    pub(crate) fn holiday(&self, i: usize, slot: &Slot) -> Option<String> {
        let code = |s: &Schedule| {
            s.business()
                .and_then(|r| r.calendar().holiday(slot.business_date()))
                .map(str::to_owned)
        };
        self.on_schedule(i, |t| t.holiday(slot), code)
    }

    /// The calendar job `i`'s `slot` is planned on, with the overrides in force at its instant.
    pub(crate) fn calendar_stamp(&self, i: usize, slot: &Slot) -> Option<Arc<CalendarStamp>> {
        self.on_schedule(i, |t| t.stamp(slot), |s| CalendarStamp::of(s, slot, None))
            .map(Arc::new)
    }

    /// Job `i`'s calendar span by span as the overrides read so far change it; `None` when the
    /// runtime does not follow overrides or the job has no calendar.
    pub(crate) fn calendar_spans(&self, i: usize) -> Option<Vec<CalendarSpan>> {
        let calendars = self.calendars.as_ref()?;
        calendars.with(i, |t| t.map(CalendarTimeline::calendar_spans))
    }

    /// Job `i`'s schedule with every override read so far.
    pub(crate) fn schedule_of(&self, i: usize) -> Schedule {
        self.on_schedule(i, |t| t.schedule().clone(), Schedule::clone)
    }

    /// Whether job `i`'s slot at `at` is decided by the overrides read here.
    pub(crate) fn calendar_knows(&self, i: usize, at: DateTime<Utc>) -> bool {
        self.calendars.as_ref().is_none_or(|c| c.knows(i, at))
    }
}
