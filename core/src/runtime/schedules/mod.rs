//! Stored schedules in the runtime: every replica (and scheduler) reads the changes each
//! [`POLL`], keeps each schedule's versions ([`book`]), and fires its slots like the timer does
//! the code schedules': through a tick, the chain and the slot row, so that a slot is claimed once
//! whichever replica, schedule or version named it. A slot is fired only once this replica knows
//! every version in force at its instant; after a pause (a frozen process, a store outage) it reads
//! the changes first.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::entry::Candidate;
use crate::store::ScheduleStore;

use super::Runtime;

mod book;
pub(crate) mod failure;

use book::Book;

/// How often the changes are read.
pub(crate) const POLL: Duration = Duration::from_millis(250);

/// The most changes one read returns.
const PAGE: usize = 1_000;

/// The slots of stored schedules due next: instant and schedule id (an entry whose schedule was
/// replanned since is passed over).
type Heap = BinaryHeap<Reverse<(DateTime<Utc>, String)>>;

/// Follows the stored schedules and fires their slots until shutdown.
pub(crate) async fn drive(rt: Arc<Runtime>, store: Arc<dyn ScheduleStore>) {
    let mut book = Book::default();
    let mut heap = Heap::new();
    // Half the fence at most: a slot claimed ahead must be one whose versions a recent read knows.
    let lead = rt.lead.base().min(crate::store::SCHEDULE_FENCE / 2);
    let lead = chrono::Duration::from_std(lead).unwrap_or_default();
    let mut next_read = rt.clock.now();
    let mut last_read = next_read;
    let mut failures = 0u32;
    let mut overrides = rt.calendars.as_ref().map(|c| c.subscribe());
    loop {
        if let Some(rx) = overrides.as_mut()
            && rx.has_changed().unwrap_or(false)
        {
            rx.mark_unchanged();
            follow_calendars(&rt, &mut book, &mut heap);
        }
        if rt.clock.now() >= next_read {
            last_read = rt.clock.now();
            let read = read(&rt, &*store, &mut book, &mut heap).await;
            failures = if read { 0 } else { failures.saturating_add(1) };
            next_read =
                rt.clock.now() + chrono::Duration::from_std(backoff(failures)).unwrap_or_default();
        }
        let now = rt.clock.now();
        let top = heap
            .peek()
            .map(|Reverse((at, id))| (*at - lead, knows(&rt, &book, *at, id)));
        let wake = match top {
            Some((due, true)) => due.min(next_read),
            // Due, but a version in force at it may be unknown here: read first (at once after a
            // good read, at most every 50 ms; after a failed one, with the backoff).
            Some((due, false)) if due <= now && failures == 0 => {
                next_read = next_read.min(last_read + MIN_READ_GAP);
                next_read
            }
            _ => next_read,
        };
        let wait = (wake - now).to_std().unwrap_or(Duration::ZERO);
        if !wait.is_zero() {
            tokio::select! {
                () = rt.stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            continue;
        }
        if rt.stop.is_cancelled() {
            return;
        }
        if matches!(top, Some((_, true))) {
            let batch = take_due(&rt, &mut book, &mut heap, lead);
            super::timer::spawn_ticks(&rt, batch);
        }
    }
}

/// Whether slot `at` of schedule `id` is decided by what is known here: its versions, and the
/// overrides of its job's calendar.
fn knows(rt: &Runtime, book: &Book, at: DateTime<Utc>, id: &str) -> bool {
    book.knows(at)
        && book
            .followed
            .get(id)
            .is_none_or(|f| rt.calendar_knows(f.base_index, at))
}

/// Reads every followed schedule of a job with a calendar on that calendar with the overrides
/// read so far, and plans each again; the others are left as they are.
fn follow_calendars(rt: &Runtime, book: &mut Book, heap: &mut Heap) {
    let from = rt.clock.now() - rt.settle();
    for (id, followed) in &mut book.followed {
        if !followed.follow_calendar(rt) {
            continue;
        }
        followed.replan(from);
        if let Some((slot, _)) = followed.next {
            heap.push(Reverse((slot.scheduled_at, id.clone())));
        }
    }
}

/// The shortest gap between two reads that a due slot asks for.
const MIN_READ_GAP: chrono::Duration = chrono::Duration::milliseconds(50);

/// How long after a read the next one starts: [`POLL`], longer after failed reads (up to 5 s).
fn backoff(failures: u32) -> Duration {
    POLL.saturating_mul(1 << failures.min(4))
        .min(Duration::from_secs(5))
}

/// Reads the changes since the last read, page by page, and replans the schedules they touch.
async fn read(rt: &Runtime, store: &dyn ScheduleStore, book: &mut Book, heap: &mut Heap) -> bool {
    loop {
        let changes = match store.schedule_changes(book.seq, PAGE).await {
            Ok(changes) => changes,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the stored schedules; their slots wait");
                return false;
            }
        };
        let more = changes.versions.len() >= PAGE;
        let read = changes.versions.len();
        let from = rt.clock.now() - rt.settle();
        let changed = book.apply(changes, &rt.jobs);
        if read > 0 {
            tracing::debug!(
                event = "schedules_read",
                seq = book.seq,
                followed = book.followed.len(),
                "stored schedules read"
            );
        }
        for id in changed {
            if let Some(followed) = book.followed.get_mut(&id) {
                let _ = followed.follow_calendar(rt);
                followed.replan(from);
                if let Some((slot, _)) = followed.next {
                    heap.push(Reverse((slot.scheduled_at, id)));
                }
            }
        }
        if !more {
            return true;
        }
    }
}

/// Pops every slot due by now (plus the lead) that this replica knows the versions of, one per
/// schedule, and plans each schedule's next; stops at a slot a version may be unknown of (past
/// what the last read knows).
fn take_due(
    rt: &Runtime,
    book: &mut Book,
    heap: &mut Heap,
    lead: chrono::Duration,
) -> Vec<Candidate> {
    let now = rt.clock.now();
    let mut batch = Vec::new();
    while let Some(Reverse((at, id))) = heap.peek().cloned() {
        if at > now + lead {
            break;
        }
        if !knows(rt, book, at, &id) {
            break;
        }
        heap.pop();
        let Some(followed) = book.followed.get_mut(&id) else {
            continue;
        };
        let Some((slot, version)) = followed.next.filter(|(s, _)| s.scheduled_at == at) else {
            continue;
        };
        followed.fired = Some(at);
        followed.forget_before(at);
        followed.replan(now - rt.settle());
        if let Some((next, _)) = followed.next {
            heap.push(Reverse((next.scheduled_at, id.clone())));
        }
        if let Some((entry, partition)) = followed.entry(version) {
            let calendar = followed.stamp(&slot);
            batch.push(Candidate::planned(&entry, slot, partition, calendar));
        }
    }
    batch
}
