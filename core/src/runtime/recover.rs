//! The recovery loop: claims retries that fell due, stale attempts of dead processes, shutdown
//! hand-overs and buffered slots, one store call per interval for all jobs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use slotguard_cron::{Slot, parse_zone};

use super::{Candidate, JobEntry, Runtime, spawn_run};
use crate::guard::local::RunningFlag;
use crate::guard::slot::SlotGuard;
use crate::guard::{GuardLevel, Permit};
use crate::store::{DueSpec, Finish};

/// How many overdue runs one call may claim: recovery after an outage is paced, never a storm.
const BATCH: usize = 32;

pub(crate) async fn recover(rt: Arc<Runtime>, slots: Arc<SlotGuard>, every: Duration) {
    let by_name: HashMap<&str, &Arc<JobEntry>> = rt
        .jobs
        .iter()
        .filter(|j| j.level == GuardLevel::Slot)
        .map(|j| (&*j.name, j))
        .collect();
    if by_name.is_empty() {
        return;
    }
    loop {
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let specs = due_specs(by_name.values().copied());
        if specs.is_empty() {
            continue;
        }
        let claims = match slots.store.claim_due(&slots.owner, &specs, BATCH).await {
            Ok(claims) => claims,
            Err(e) => {
                tracing::warn!(error = %e, "recovery poll failed; will retry next interval");
                continue;
            }
        };
        start_claims(&rt, &slots, &by_name, claims).await;
    }
}

/// What this replica may claim due work for now: jobs not paused, and not running here with the flag
/// raised (a job at overlap `skip` running here leaves its next attempt to another replica, or to a
/// later round).
pub(crate) fn due_specs<'a>(jobs: impl Iterator<Item = &'a Arc<JobEntry>>) -> Vec<DueSpec> {
    jobs.filter(|j| j.overlap_by_store() || !j.running.load(Ordering::Acquire))
        .filter(|j| !j.paused.load(Ordering::Acquire))
        .map(|j| DueSpec {
            job: j.name.to_string(),
            max_attempts: j.retry.max_attempts,
        })
        .collect()
}

/// Starts the runs of attempts claimed by [`SlotStore::claim_due`](crate::store::SlotStore::claim_due).
pub(crate) async fn start_claims(
    rt: &Arc<Runtime>,
    slots: &SlotGuard,
    by_name: &HashMap<&str, &Arc<JobEntry>>,
    claims: Vec<crate::store::DueClaim>,
) {
    for claim in claims {
        let Some(job) = by_name.get(claim.key.job.as_str()).copied() else {
            continue;
        };
        let mut permits: Vec<Box<dyn Permit>> = Vec::with_capacity(2);
        if !job.overlap_by_store() {
            match RunningFlag::raise(job) {
                Some(flag) => permits.push(Box::new(flag)),
                None => {
                    tracing::debug!(job = %job.name, "recovered attempt runs beside a tick that started meanwhile")
                }
            }
        }
        let permit = slots.hold(claim.key.clone(), claim.lease, job.retry);
        if rt.stop.is_cancelled() {
            // Claimed while shutdown began: hand it straight back.
            let back = Finish::abandoned("shutdown", Some(Duration::ZERO));
            let _ = slots.store.finish(&slots.owner, &claim.lease, &back).await;
            continue;
        }
        crate::metrics::recovered(&job.name);
        tracing::info!(
            event = "job_recovered",
            job = %job.name,
            slot = %claim.key.scheduled_at,
            run_id = claim.lease.run_id,
            attempt = claim.lease.attempt,
            token = claim.lease.token,
            "claimed an attempt that fell due"
        );
        permits.push(Box::new(permit));
        let zone = parse_zone(&claim.zone).unwrap_or(job.schedule.zone());
        let candidate = Candidate {
            job: Arc::clone(job),
            slot: Slot {
                scheduled_at: claim.key.scheduled_at,
                wall: claim.wall,
                zone,
            },
            trigger: claim.trigger,
            partition: Arc::from(claim.key.partition.as_str()),
            recheck: false,
        };
        spawn_run(rt, candidate, permits);
    }
}
