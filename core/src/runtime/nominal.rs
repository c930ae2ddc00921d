//! A nominal date runs once. A business calendar moves a cron expression's nominal date onto a
//! business day, and an operator's override added after that slot ran can move the date again:
//! with `following`, today's payday made a holiday after it ran moves the 25th to the 28th; with
//! `preceding`, a holiday removed after the day before ran moves it back onto the 25th. The slot it
//! lands on stands for a nominal date that already ran, so it is recorded `skipped` (reason
//! [`reason::nominal_ran`]) instead of running a second time.
//!
//! Each run records its nominal dates ([`CalendarStamp`](crate::store::CalendarStamp)); before a
//! tick claims a `slot`-level job's slot on a calendar that moves dates, the history around it is
//! read once for the earlier runs of the same job, partition and wall time. Every replica reads the
//! same committed rows (the earlier slot is a day or more older), so they all decide alike.

use chrono::Days;
use slotguard_cron::Adjust;

use crate::entry::{Candidate, Work};
use crate::guard::GuardLevel;
use crate::store::rules::reason;
use crate::store::{AdminStore, RunFilter, RunStatus};

use super::Runtime;

/// Days beyond a calendar's reach that the earlier run of a nominal date is looked for: an
/// override may lengthen a run of non-business days.
const MARGIN_DAYS: u64 = 7;

/// The most earlier runs read per slot.
const LOOK: usize = crate::operate::MAX_PAGE;

/// `batch` without the slots whose nominal date already ran; those are recorded `skipped`.
pub(crate) async fn without_repeated(rt: &Runtime, batch: Vec<Candidate>) -> Vec<Candidate> {
    if !batch.iter().any(moves) {
        return batch;
    }
    let (Some(slots), Some(admin)) = (
        &rt.slots,
        rt.slots.as_ref().and_then(|s| s.store.admin.clone()),
    ) else {
        return batch;
    };
    let mut keep = Vec::with_capacity(batch.len());
    for candidate in batch {
        let why = match moves(&candidate) {
            true => ran_before(&*admin, &candidate).await,
            false => None,
        };
        let Some(why) = why else {
            keep.push(candidate);
            continue;
        };
        tracing::warn!(event = "job_nominal_ran", job = %candidate.job.name, slot = ?candidate.slot_at(), reason = %why, "a calendar override moved a nominal date that already ran; not run again");
        crate::metrics::skipped(&candidate.job.name, "nominal_ran");
        let requests: Vec<_> = candidate.claim_request().into_iter().collect();
        if let Err(e) = slots.record_skipped(&requests, &why).await {
            tracing::warn!(error = %e, job = %candidate.job.name, "slot of a nominal date that already ran not recorded");
        }
    }
    keep
}

/// A `slot`-level job's slot planned on a calendar that moves dates.
fn moves(candidate: &Candidate) -> bool {
    let Work::Slot {
        calendar: Some(_), ..
    } = &candidate.work
    else {
        return false;
    };
    candidate.job.level == GuardLevel::Slot
        && candidate
            .job
            .schedule
            .business()
            .is_some_and(|rule| rule.convention() != Adjust::Skip || rule.shift() != 0)
}

/// Why the candidate's slot must not run: an earlier run of its job and partition at the same wall
/// time stands for one of its nominal dates. `None` when none does, or the history cannot be read
/// (the slot's row then decides as always).
async fn ran_before(admin: &dyn AdminStore, candidate: &Candidate) -> Option<String> {
    let Work::Slot {
        slot,
        partition,
        calendar: Some(stamp),
        ..
    } = &candidate.work
    else {
        return None;
    };
    let reach = candidate.job.schedule.business()?.reach();
    let days = Days::new(u64::try_from(reach).unwrap_or(0) + MARGIN_DAYS);
    let first = stamp.nominal_dates.first()?.checked_sub_days(days)?;
    let filter = RunFilter {
        job: Some(candidate.job.name.to_string()),
        partition: Some(partition.to_string()),
        from: Some(first.and_hms_opt(0, 0, 0)?.and_utc() - chrono::Duration::days(1)),
        to: Some(slot.scheduled_at),
        limit: LOOK,
        ..RunFilter::default()
    };
    let runs = admin.runs(&filter).await.ok()?;
    runs.iter()
        .filter(|r| r.status != RunStatus::Skipped && r.wall_time.time() == slot.wall.time())
        .find_map(|r| {
            let earlier = r.calendar.as_ref()?;
            let date = stamp
                .nominal_dates
                .iter()
                .find(|d| earlier.nominal_dates.contains(d))?;
            Some(reason::nominal_ran(*date, r.key.scheduled_at))
        })
}
