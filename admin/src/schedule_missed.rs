//! Missed slots of a stored schedule: the slots its versions produce in a range, up to now, that
//! have no row (nothing ran and nothing recorded why), oldest first, a page at a time.

use chrono::{DateTime, TimeDelta, Utc};
use slotguard::store::SlotKey;
use slotguard::timeline::Timeline;

use crate::planned::stored_timeline;

use crate::{Admin, AdminError, CHUNK, MAX_SCAN_SLOTS, MissedSlot, check_page};

/// One page of a stored schedule's missed slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleMissed {
    /// The schedule's partition: the key of its slots' rows.
    pub partition: String,
    /// The missed slots of the page, oldest first.
    pub missed: Vec<MissedSlot>,
    /// The `from` of the next page; `None` when the range is done.
    pub next: Option<DateTime<Utc>>,
}

impl Admin {
    /// The slots schedule `id` produced in `[from, to)` (`to` at most now) that have no row, at most
    /// `limit`; a page looks at no more than [`MAX_SCAN_SLOTS`] slots and ends with a `next` when
    /// the range goes on. A removed schedule's slots are listed too, up to its removal.
    ///
    /// # Errors
    /// [`AdminError::UnknownSchedule`]; [`AdminError::Invalid`] for the range or the limit;
    /// [`AdminError::Store`].
    pub async fn schedule_missed(
        &self,
        id: &str,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        limit: usize,
    ) -> Result<ScheduleMissed, AdminError> {
        check_page(limit)?;
        let to = self.settled_end(from, to)?;
        let history = self.store.schedule_history(id).await?;
        let Some(spec) = history.iter().rev().find_map(|v| v.spec.clone()) else {
            return Err(AdminError::UnknownSchedule {
                id: crate::shown(id),
            });
        };
        let record = self.job(&spec.job).await?;
        let overrides = self.overrides_of(std::slice::from_ref(&record)).await?;
        let timeline = stored_timeline(&record, &history, &overrides);
        let mut page = ScheduleMissed {
            partition: spec.partition.clone(),
            missed: Vec::new(),
            next: None,
        };
        let mut cursor = from - TimeDelta::nanoseconds(1);
        let mut scanned = 0;
        while page.missed.len() < limit {
            let slots: Vec<_> = chunk(&timeline, cursor, to, CHUNK.min(MAX_SCAN_SLOTS - scanned));
            let Some(last) = slots.last() else {
                return Ok(page);
            };
            cursor = last.scheduled_at;
            scanned += slots.len();
            let keys: Vec<SlotKey> = slots
                .iter()
                .map(|s| SlotKey {
                    job: spec.job.clone(),
                    scheduled_at: s.scheduled_at,
                    partition: spec.partition.clone(),
                })
                .collect();
            let exists = self.store.existing_slots(&keys).await?;
            for (slot, _) in slots.iter().zip(exists).filter(|(_, e)| !e) {
                if page.missed.len() == limit {
                    page.next = Some(slot.scheduled_at);
                    return Ok(page);
                }
                page.missed.push(MissedSlot {
                    scheduled_at: slot.scheduled_at,
                    wall: slot.wall,
                    business_date: slot.business_date(),
                });
            }
            if scanned >= MAX_SCAN_SLOTS {
                break;
            }
        }
        // Full, or out of slots to look at: the rest of the range is the next page's.
        let resume = cursor + TimeDelta::seconds(1);
        page.next = (resume < to).then_some(resume);
        Ok(page)
    }
}

/// Up to `n` slots of `timeline` after `after` and before `to`.
fn chunk(
    timeline: &Timeline,
    after: DateTime<Utc>,
    to: DateTime<Utc>,
    n: usize,
) -> Vec<slotguard::Slot> {
    timeline
        .upcoming(after, n)
        .into_iter()
        .take_while(|s| s.scheduled_at < to)
        .collect()
}
