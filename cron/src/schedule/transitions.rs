//! DST resolution: a day touched by transitions has its wall times split into runs read with one
//! offset, and the DST policy decides the slots of the gaps and repeated times between them.

use super::civil::DAY;
use super::{MAX_OFFSET, Schedule, earliest};
use crate::DstPolicy;

/// cronie runs fixed-time jobs of a skipped hour at the transition only for gaps shorter than this.
const VIXIE_MAX_GAP: i64 = 3 * 3600;

impl Schedule {
    /// Whether wall times that happen twice (an overlap) fire at both instants under the policy.
    fn fires_twice(&self) -> bool {
        match self.dst {
            DstPolicy::Instant => true,
            DstPolicy::Vixie => !self.expr.is_fixed_time(),
            DstPolicy::Skip | DstPolicy::Shift => false,
        }
    }

    /// A day touched by one or more transitions: split its wall times into runs read with one offset,
    /// and apply the DST policy to the gaps and overlaps between them.
    pub(super) fn first_on_irregular_date(&self, d0: i64, min_inst: i64) -> Option<(i64, i64)> {
        let (lo, hi) = (d0 - MAX_OFFSET, d0 + DAY + MAX_OFFSET);
        let last_offset = self.offset_at(hi);
        // offsets[i] holds between transitions[i - 1] and transitions[i].
        let mut transitions = [0i64; 4];
        let mut offsets = [self.offset_at(lo); 5];
        let mut count = 0;
        let mut cursor = lo;
        while offsets[count] != last_offset && count < transitions.len() {
            let (mut a, mut b) = (cursor, hi);
            let known = self.transition.get().filter(|&(t, before, after)| {
                cursor < t
                    && t <= hi
                    && before == offsets[count]
                    && self.offset_at(t - 1) == before
                    && self.offset_at(t) == after
            });
            if let Some((t, _, _)) = known {
                (a, b) = (t - 1, t);
            }
            while b - a > 1 {
                let mid = a + (b - a) / 2;
                if self.offset_at(mid) == offsets[count] {
                    a = mid;
                } else {
                    b = mid;
                }
            }
            transitions[count] = b;
            offsets[count + 1] = self.offset_at(b);
            if known.is_none() {
                self.transition.put(b, offsets[count], offsets[count + 1]);
            }
            count += 1;
            cursor = b;
        }

        let mut best = None;
        for i in 0..=count {
            let offset = offsets[i];
            let mut seg_lo = if i == 0 {
                i64::MIN / 2
            } else {
                transitions[i - 1] + offset
            };
            let seg_hi = if i == count {
                i64::MAX / 2
            } else {
                transitions[i] + offset
            };
            if i > 0 {
                let (t, before) = (transitions[i - 1], offsets[i - 1]);
                if offset < before && !self.fires_twice() {
                    // The repeated wall times already fired with the earlier offset.
                    seg_lo = t + before;
                }
                if offset > before {
                    let gap = self.in_gap(d0, t, before, offset, min_inst);
                    best = earliest(best, gap);
                }
            }
            best = earliest(
                best,
                self.first_between(d0, seg_lo, seg_hi, offset, min_inst),
            );
        }
        best
    }

    /// The slot a gap yields under the policy: wall times `[t + before, t + after)` do not exist.
    fn in_gap(
        &self,
        d0: i64,
        t: i64,
        before: i64,
        after: i64,
        min_inst: i64,
    ) -> Option<(i64, i64)> {
        let (gap_lo, gap_hi) = (t + before, t + after);
        match self.dst {
            DstPolicy::Vixie if self.expr.is_fixed_time() && after - before < VIXIE_MAX_GAP => {
                let wall = self.first_wall(d0, gap_lo, gap_hi)?;
                (t >= min_inst).then_some((t, wall))
            }
            DstPolicy::Shift => self.first_between(d0, gap_lo, gap_hi, before, min_inst),
            DstPolicy::Vixie | DstPolicy::Skip | DstPolicy::Instant => None,
        }
    }
}
