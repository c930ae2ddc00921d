//! Catch-up: at start-up, the slots each job missed while no replica ran become `catch_up` runs,
//! created once for the cluster and paced at a fixed rate.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard_cron::Slot;

use super::Runtime;
use super::recover::due_round;
use crate::entry::JobEntry;
use crate::guard::GuardLevel;
use crate::guard::slot::SlotGuard;
use crate::policy::{CatchUp, slot_jitter};
use crate::store::{
    AuditEntry, CalendarStamp, ClaimRequest, Enqueue, SlotKey, StoreError, Trigger,
};

/// The most schedule slots looked at per job: a per-second job down for a year is not enumerated.
const MAX_SCAN: usize = 100_000;

/// Creates the catch-up runs of every job with a catch-up policy and returns when each becomes due,
/// in order. Replicas starting together create each run once (the slot key is unique); the rows of
/// whichever replica wrote first hold.
pub(crate) async fn plan(
    rt: &Runtime,
    slots: &SlotGuard,
    per_second: f64,
) -> Result<Vec<DateTime<Utc>>, StoreError> {
    let jobs: Vec<(usize, &Arc<JobEntry>)> = rt
        .jobs
        .iter()
        .enumerate()
        .filter(|(_, j)| j.level == GuardLevel::Slot && j.catch_up != CatchUp::Skip)
        .filter(|(_, j)| !j.is_paused())
        .collect();
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    if !super::calendars::read_once(rt).await {
        return Err(StoreError::unavailable(
            "the calendar overrides cannot be read; the missed slots of calendar jobs are unknown",
        ));
    }
    let names: Vec<String> = jobs.iter().map(|(_, j)| j.name.to_string()).collect();
    let marks = slots.store.admin()?.latest_slots(&names).await?;
    let records = slots.store.admin()?.jobs().await?;
    let now = rt.clock.now();
    let mut missed = Vec::new();
    for (&(i, job), mark) in jobs.iter().zip(marks) {
        // A job with no history is new: nothing of it was missed.
        let Some(mark) = mark else { continue };
        // Nor was anything before the job was first registered, whatever rows a backfill of its
        // history left: catch-up starts at the later of the two.
        let first_seen = records
            .iter()
            .find(|r| r.definition.name == *job.name)
            .map(|r| r.registered_at);
        let mark = first_seen.map_or(mark, |first| {
            mark.max(first - chrono::Duration::milliseconds(1))
        });
        // Slots that fell due just now are the ticks' (see `Runtime::settle`).
        let settled = now - rt.settle();
        let found = missed_slots(rt, i, mark, settled);
        let Some(partitions) = partitions_of(job).await else {
            continue;
        };
        for slot in found {
            let calendar = rt.calendar_stamp(i, &slot);
            for partition in &partitions {
                missed.push((
                    Arc::clone(job),
                    slot,
                    Arc::clone(partition),
                    calendar.clone(),
                ));
            }
        }
    }
    if missed.is_empty() {
        return Ok(Vec::new());
    }
    missed.sort_by_key(|(_, s, _, _)| s.scheduled_at);
    let runs = paced(&missed, now, per_second);
    let audit = AuditEntry {
        action: "catch_up".into(),
        actor: rt.owner.to_string(),
        reason: "slot missed while no replica ran".into(),
    };
    let created = slots.store.admin()?.enqueue(&runs, &audit).await?;
    let count = created.iter().filter(|c| c.is_some()).count();
    tracing::info!(
        event = "job_catch_up_planned",
        runs = runs.len(),
        created = count,
        per_second,
        "missed slots will run as catch-up"
    );
    Ok(runs.iter().map(|r| r.not_before).collect())
}

/// A missed slot: its job, the slot, the partition and the calendar it is planned on.
type Missed = (Arc<JobEntry>, Slot, Arc<str>, Option<Arc<CalendarStamp>>);

/// The job's slots after `mark` up to `now` that its policy catches up, on its calendar with the
/// operators' overrides in force at each.
fn missed_slots(rt: &Runtime, i: usize, mark: DateTime<Utc>, now: DateTime<Utc>) -> Vec<Slot> {
    let job = &rt.jobs[i];
    let floor = match job.catch_up {
        CatchUp::All { within, .. } => {
            mark.max(now - chrono::Duration::from_std(within).unwrap_or(chrono::Duration::MAX))
        }
        _ => mark,
    };
    let mut found: Vec<Slot> =
        std::iter::successors(rt.next_slot(i, floor), |s| rt.next_slot(i, s.scheduled_at))
            .take_while(|s| s.scheduled_at <= now)
            .take(MAX_SCAN)
            .collect();
    let keep = match job.catch_up {
        CatchUp::Skip => 0,
        CatchUp::Latest => 1,
        CatchUp::All { max_slots, .. } => max_slots,
    };
    if found.len() > keep {
        tracing::info!(
            event = "job_catch_up_limited",
            job = %job.name,
            missed = found.len(),
            kept = keep,
            policy = job.catch_up.as_str(),
            "catching up only the most recent missed slots"
        );
        found.drain(..found.len() - keep);
    }
    found
}

/// The partitions to catch up (one empty key when the job is not partitioned); `None` when the
/// provider failed.
async fn partitions_of(job: &JobEntry) -> Option<Vec<Arc<str>>> {
    let Some(provider) = &job.partitions else {
        return Some(vec![Arc::from("")]);
    };
    match provider().await {
        Ok(keys) => Some(
            keys.into_iter()
                .filter(|k| slotguard_cron::check_partition(k).is_ok())
                .map(Arc::from)
                .collect(),
        ),
        Err(e) => {
            tracing::error!(job = %job.name, error = %e, "partition provider failed; nothing caught up");
            None
        }
    }
}

/// The catch-up runs, `1 / per_second` apart, each offset by a jitter the same on every replica.
fn paced(missed: &[Missed], now: DateTime<Utc>, per_second: f64) -> Vec<Enqueue> {
    let spacing = Duration::from_secs_f64(1.0 / per_second);
    missed
        .iter()
        .enumerate()
        .map(|(i, (job, slot, partition, calendar))| {
            let offset = spacing.mul_f64(i as f64)
                + slot_jitter(&job.name, slot.scheduled_at.timestamp_millis(), spacing);
            Enqueue {
                request: ClaimRequest {
                    key: SlotKey {
                        job: job.name.to_string(),
                        scheduled_at: slot.scheduled_at,
                        partition: partition.to_string(),
                    },
                    trigger: Trigger::CatchUp,
                    zone: slot.zone.name().to_owned(),
                    wall: slot.wall,
                    business_date: slot.business_date(),
                    fingerprint: job.schedule.fingerprint(),
                    stale_after: job.stale_after,
                    overlap: job.overlap,
                    calendar: calendar.as_deref().cloned(),
                    ahead: false,
                    defer_if_contended: false,
                },
                not_before: now
                    + chrono::Duration::from_std(offset).unwrap_or(chrono::Duration::MAX / 2),
            }
        })
        .collect()
}

/// Claims due catch-up runs at the planned instants, one per instant, so that the cluster starts them
/// at the planned rate instead of in bursts at each recovery poll.
pub(crate) async fn pump(rt: Arc<Runtime>, due: Vec<DateTime<Utc>>) {
    for at in due {
        let wait = (at - rt.clock.now()).to_std().unwrap_or(Duration::ZERO);
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        due_round(&rt, 1, |j| j.catch_up != CatchUp::Skip).await;
    }
}
