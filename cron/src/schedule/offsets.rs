//! The zone's offsets as the slot engine reads them: a lookup in the tz data, and spans of one offset
//! remembered between calls so that most lookups need no search.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering, fence};

use chrono::{DateTime, Offset, TimeZone, Utc};

use super::civil::{DAY, MAX_INSTANT, MIN_INSTANT};
use super::{MAX_OFFSET, Schedule};

/// A span of instants `[start, end]` over which the zone has one offset, remembered between calls so
/// that most offset lookups need no search of the tz data. It only ever holds a union of overlapping
/// spans the slot engine has established as regular (two equal offsets no more than a few days apart,
/// the rule it reads the zone by), so an old or lost value is never wrong, only less useful.
///
/// A sequence lock: a reader retries nothing, it falls back to a lookup when a write was in progress.
#[derive(Default)]
pub(super) struct OffsetCache {
    /// Even when no write is in progress; 0 while empty.
    seq: AtomicU64,
    start: AtomicI64,
    end: AtomicI64,
    offset: AtomicI64,
}

impl OffsetCache {
    pub(super) fn get(&self) -> Option<(i64, i64, i64)> {
        let before = self.seq.load(Ordering::Acquire);
        if before == 0 || before & 1 == 1 {
            return None;
        }
        let span = (
            self.start.load(Ordering::Relaxed),
            self.end.load(Ordering::Relaxed),
            self.offset.load(Ordering::Relaxed),
        );
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == before).then_some(span)
    }

    pub(super) fn put(&self, start: i64, end: i64, offset: i64) {
        let seq = self.seq.load(Ordering::Relaxed);
        if seq & 1 == 1
            || self
                .seq
                .compare_exchange(seq, seq + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            // Another thread is writing: this span is not needed for correctness.
            return;
        }
        fence(Ordering::Release);
        self.start.store(start, Ordering::Relaxed);
        self.end.store(end, Ordering::Relaxed);
        self.offset.store(offset, Ordering::Relaxed);
        self.seq.store(seq + 2, Ordering::Release);
    }
}

impl Clone for OffsetCache {
    fn clone(&self) -> Self {
        OffsetCache::default()
    }
}

impl PartialEq for OffsetCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for OffsetCache {}

impl Hash for OffsetCache {
    fn hash<H: Hasher>(&self, _: &mut H) {}
}

impl fmt::Debug for OffsetCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OffsetCache")
    }
}

impl Schedule {
    /// The zone's offset at `instant`. Beyond the instants chrono can represent, the offset at the
    /// nearest one: the tz database has no transitions out there, and the searches look a few days
    /// past the ends of the calendar.
    pub(super) fn offset_at(&self, instant: i64) -> i64 {
        for cache in &self.cache {
            if let Some((start, end, offset)) = cache.get()
                && start <= instant
                && instant <= end
            {
                return offset;
            }
        }
        let clamped = instant.clamp(MIN_INSTANT, MAX_INSTANT);
        let utc = DateTime::from_timestamp(clamped, 0)
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
            .naive_utc();
        i64::from(
            self.zone
                .offset_from_utc_datetime(&utc)
                .fix()
                .local_minus_utc(),
        )
    }

    /// `Some(offset)` when no transition touches any instant whose wall time could fall on the day
    /// starting at wall second `d0`.
    pub(super) fn regular_offset(&self, d0: i64) -> Option<i64> {
        let before = self.offset_at(d0 - MAX_OFFSET);
        let after = self.offset_at(d0 + DAY + MAX_OFFSET);
        if before != after {
            return None;
        }
        self.note_regular(
            &self.cache[1],
            d0 - MAX_OFFSET,
            d0 + DAY + MAX_OFFSET,
            before,
        );
        Some(before)
    }

    /// Remembers that `[start, end]` was read as having the one offset `offset`.
    pub(super) fn note_regular(&self, cache: &OffsetCache, start: i64, end: i64, offset: i64) {
        let (start, end) = match cache.get() {
            Some((s, e, o)) if o == offset && s <= end && start <= e => {
                if s <= start && end <= e {
                    return;
                }
                (s.min(start), e.max(end))
            }
            _ => (start, end),
        };
        cache.put(start, end, offset);
    }
}
