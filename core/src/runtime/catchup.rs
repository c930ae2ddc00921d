//! Catch-up: at start-up, the slots each job missed while no replica ran become `catch_up` runs,
//! created once for the cluster and paced at a fixed rate.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::recover::{due_specs, start_claims};
use super::{JobEntry, Runtime};
use crate::guard::GuardLevel;
use crate::guard::slot::SlotGuard;
use crate::policy::{CatchUp, slot_jitter};
use crate::store::{AuditEntry, ClaimRequest, Enqueue, SlotKey, StoreError, Trigger};

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
    let jobs: Vec<&Arc<JobEntry>> = rt
        .jobs
        .iter()
        .filter(|j| j.level == GuardLevel::Slot && j.catch_up != CatchUp::Skip)
        .filter(|j| !j.paused.load(Ordering::Acquire))
        .collect();
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<String> = jobs.iter().map(|j| j.name.to_string()).collect();
    let marks = slots.store.latest_slots(&names).await?;
    let now = rt.clock.now();
    let mut missed = Vec::new();
    for (job, mark) in jobs.iter().zip(marks) {
        // A job with no history is new: nothing of it was missed.
        let Some(mark) = mark else { continue };
        let floor = match job.catch_up {
            CatchUp::All { within, .. } => {
                mark.max(now - chrono::Duration::from_std(within).unwrap_or(chrono::Duration::MAX))
            }
            _ => mark,
        };
        let mut found: Vec<_> = job
            .schedule
            .slots_after(floor)
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
        let partitions: Vec<Arc<str>> = match &job.partitions {
            None => vec![Arc::from("")],
            Some(provider) => match provider().await {
                Ok(keys) => keys
                    .into_iter()
                    .filter(|k| crate::scheduler::check_partition(k).is_ok())
                    .map(Arc::from)
                    .collect(),
                Err(e) => {
                    tracing::error!(job = %job.name, error = %e, "partition provider failed; nothing caught up");
                    continue;
                }
            },
        };
        for slot in found {
            for partition in &partitions {
                missed.push((Arc::clone(job), slot, Arc::clone(partition)));
            }
        }
    }
    if missed.is_empty() {
        return Ok(Vec::new());
    }
    missed.sort_by_key(|(_, s, _)| s.scheduled_at);
    let spacing = Duration::from_secs_f64(1.0 / per_second);
    let runs: Vec<Enqueue> = missed
        .iter()
        .enumerate()
        .map(|(i, (job, slot, partition))| {
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
                },
                not_before: now
                    + chrono::Duration::from_std(offset).unwrap_or(chrono::Duration::MAX / 2),
            }
        })
        .collect();
    let audit = AuditEntry {
        action: "catch_up".into(),
        actor: rt.owner.to_string(),
        reason: "slot missed while no replica ran".into(),
    };
    let created = slots.store.enqueue(&runs, &audit).await?;
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

/// Claims due catch-up runs at the planned instants, one per instant, so that the cluster starts them
/// at the planned rate instead of in bursts at each recovery poll.
pub(crate) async fn pump(rt: Arc<Runtime>, slots: Arc<SlotGuard>, due: Vec<DateTime<Utc>>) {
    let by_name: HashMap<&str, &Arc<JobEntry>> = rt
        .jobs
        .iter()
        .filter(|j| j.level == GuardLevel::Slot && j.catch_up != CatchUp::Skip)
        .map(|j| (&*j.name, j))
        .collect();
    for at in due {
        let wait = (at - rt.clock.now()).to_std().unwrap_or(Duration::ZERO);
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let specs = due_specs(by_name.values().copied());
        if specs.is_empty() {
            continue;
        }
        match slots.store.claim_due(&slots.owner, &specs, 1).await {
            Ok(claims) => start_claims(&rt, &slots, &by_name, claims).await,
            Err(e) => {
                tracing::warn!(error = %e, "catch-up claim failed; the recovery loop will retry")
            }
        }
    }
}
