//! Slots a job's business calendar removes (convention `skip`): recorded `skipped` as they fall
//! due, with the holiday that removed them, so that a job's history says why a day has no run and
//! `missed` does not count it. No body starts here; nothing walks the guard chain.

use std::sync::Arc;

use slotguard_cron::Slot;

use crate::entry::{Candidate, JobEntry};
use crate::guard::GuardLevel;
use crate::store::rules::reason;

use super::Runtime;
use super::window::OUTAGE_RETRY;

/// How many times a record meets an unavailable store before it is given up (and logged).
const TRIES: u32 = 6;

/// Logs and counts the removed slots, and records those of `slot`-level jobs.
///
/// `removed` holds each slot's job and the holiday that removed it (`None`: a weekend day).
pub(crate) async fn record(rt: Arc<Runtime>, removed: Vec<(Arc<JobEntry>, Slot, Option<String>)>) {
    let mut by_reason: Vec<(String, Vec<Candidate>)> = Vec::new();
    for (job, slot, holiday) in removed {
        let holiday = holiday.as_deref();
        tracing::info!(event = "job_calendar_skipped", job = %job.name, %slot, holiday = holiday.unwrap_or("weekend"), "not a business day on the job's calendar; no run");
        crate::metrics::skipped(&job.name, "calendar");
        if job.level != GuardLevel::Slot {
            continue;
        }
        let why = reason::calendar(holiday);
        let candidate = Candidate::slot(&job, slot, Arc::from(""));
        match by_reason.iter_mut().find(|(r, _)| *r == why) {
            Some((_, group)) => group.push(candidate),
            None => by_reason.push((why, vec![candidate])),
        }
    }
    let Some(slots) = &rt.slots else { return };
    for (why, group) in by_reason {
        let requests: Vec<_> = group.iter().filter_map(Candidate::claim_request).collect();
        let mut wait = OUTAGE_RETRY.0;
        for attempt in 1..=TRIES {
            match slots.record_skipped(&requests, &why).await {
                Ok(()) => break,
                Err(e) if attempt == TRIES => {
                    tracing::warn!(error = %e, slots = requests.len(), "calendar-skipped slots not recorded");
                }
                Err(_) => {
                    tokio::select! {
                        () = rt.stop.cancelled() => return,
                        () = tokio::time::sleep(wait) => {}
                    }
                    wait = (wait * 2).min(OUTAGE_RETRY.1);
                }
            }
        }
    }
}
