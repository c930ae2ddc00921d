//! A slot's window: how long a slot that met an unavailable store may still be claimed, and what
//! is recorded when the window closes first. Shared by the ticks, the scheduler role's enqueue and
//! run-once.

use std::time::Duration;

use crate::entry::Candidate;
use crate::guard::GuardLevel;
use crate::policy::CatchUp;

use super::{Runtime, STORE_UNAVAILABLE};

/// The first and the longest wait between claims of slots that met an unavailable store.
pub(crate) const OUTAGE_RETRY: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(2));

/// Whether a slot that met an unavailable store may no longer be claimed at `now`.
pub(crate) fn window_closed(candidate: &Candidate, now: chrono::DateTime<chrono::Utc>) -> bool {
    let Some(slot) = candidate.slot_at() else {
        return true;
    };
    let job = &candidate.job;
    match job.catch_up {
        CatchUp::All { within, .. } => {
            now - slot > chrono::Duration::from_std(within).unwrap_or(chrono::Duration::MAX)
        }
        CatchUp::Skip | CatchUp::Latest => job
            .schedule
            .next_after(slot)
            .is_none_or(|next| next.scheduled_at <= now),
    }
}

/// Records expired slots of `slot`-level jobs; `true` once the store took them (or there were none
/// to record).
pub(crate) async fn record_expired(rt: &Runtime, expired: &[Candidate]) -> bool {
    for candidate in expired {
        crate::metrics::slots_missed(&candidate.job.name, 1);
        crate::trace::skipped(&candidate.span, "store_unavailable");
        tracing::error!(event = "job_slot_missed", job = %candidate.job.name, slot = ?candidate.slot_at(), "the store was unavailable until the slot's window closed; it did not run");
    }
    let requests: Vec<_> = expired
        .iter()
        .filter(|c| c.job.level == GuardLevel::Slot)
        .filter_map(Candidate::claim_request)
        .collect();
    let Some(slots) = &rt.slots else { return true };
    slots
        .record_skipped(&requests, STORE_UNAVAILABLE)
        .await
        .is_ok()
}
