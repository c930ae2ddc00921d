//! A tick: the slots that fell due together, through the chain; then the second look at slots whose
//! lock was held elsewhere, and the retries of slots whose claim met an unavailable store.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::entry::{Candidate, Work};

use super::chain::{self, Admission};
use super::window::{OUTAGE_RETRY, record_expired, window_closed};
use super::{Runtime, run};

/// How long after its tick a slot whose job's lock was held elsewhere is looked at again.
const LOCK_RECHECK: Duration = Duration::from_millis(250);

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Walks the slots of one tick through the chain, after `delay` (this replica's share of the
/// load spread), and starts what it admitted.
pub(crate) async fn tick(rt: Arc<Runtime>, delay: Duration, batch: Vec<Candidate>) {
    if !delay.is_zero() {
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
    let batch = expand_partitions(batch).await;
    let mut batch = super::nominal::without_repeated(&rt, batch).await;
    if !rt.role.executes() {
        return super::enqueue::enqueue(rt, batch).await;
    }
    let now = rt.clock.now();
    for candidate in &mut batch {
        let early = candidate.slot_at().is_some_and(|at| now < at);
        candidate.set_ahead(early);
    }
    let admission = chain::admit(&rt, batch).await;
    follow(&rt, admission);
}

/// Starts the admitted runs and schedules the second looks and the outage retries.
fn follow(rt: &Arc<Runtime>, admission: Admission) {
    for admitted in admission.runs {
        rt.tracker.spawn(run::execute(Arc::clone(rt), admitted));
    }
    if !admission.deferred.is_empty() {
        let task: Task = Box::pin(recheck(Arc::clone(rt), admission.deferred));
        rt.tracker.spawn(task);
    }
    if !admission.unavailable.is_empty() {
        let task: Task = Box::pin(outage(Arc::clone(rt), admission.unavailable));
        rt.tracker.spawn(task);
    }
    let mut by_instant: BTreeMap<_, Vec<Candidate>> = BTreeMap::new();
    for candidate in admission.at_instant {
        by_instant
            .entry(candidate.slot_at())
            .or_default()
            .push(candidate);
    }
    for group in by_instant.into_values() {
        let task: Task = Box::pin(at_instant(Arc::clone(rt), group));
        rt.tracker.spawn(task);
    }
}

/// Offers again, at their instant, slots that a layer sent back ahead of it because a run of
/// their job was going: the layers then decide as if the slots had not been offered early.
async fn at_instant(rt: Arc<Runtime>, mut batch: Vec<Candidate>) {
    if !until_instant(&rt, &mut batch).await {
        return;
    }
    let admission = chain::admit(&rt, batch).await;
    follow(&rt, admission);
}

/// Waits until the latest instant of the slots in `batch` offered ahead of it, and marks them as
/// no longer ahead; `false` when shutdown began meanwhile.
async fn until_instant(rt: &Runtime, batch: &mut [Candidate]) -> bool {
    let now = rt.clock.now();
    let latest = batch
        .iter()
        .filter(|c| c.is_ahead())
        .filter_map(Candidate::slot_at)
        .max();
    let wait = latest
        .and_then(|at| (at - now).to_std().ok())
        .unwrap_or_default();
    if !wait.is_zero() {
        tokio::select! {
            () = rt.stop.cancelled() => return false,
            () = tokio::time::sleep(wait) => {}
        }
    }
    for candidate in batch {
        candidate.set_ahead(false);
    }
    true
}

/// The second look at slots of `slot`-level jobs whose lock another process held at their tick.
/// Usually that process was working on the same slot and its row exists by now: the claim answers
/// `Taken` and nothing happens. But the holder may have died between taking the lock and claiming
/// (then nobody would run the slot), be frozen with its runs stale (its lock is broken, see
/// `LockStore::break_stale_locks`), or be working on another slot of the job (a replica with another
/// version of the schedule, or a wrong clock; then nobody would record this one). So the slot goes
/// through the chain again, and where the lock is still held elsewhere the store decides instead:
/// it never lets two runs of the job be `running` at once.
async fn recheck(rt: Arc<Runtime>, mut batch: Vec<Candidate>) {
    tokio::select! {
        () = rt.stop.cancelled() => return,
        () = tokio::time::sleep(LOCK_RECHECK) => {}
    }
    // A lead longer than the recheck: the second look still comes after the instant.
    if !until_instant(&rt, &mut batch).await {
        return;
    }
    for candidate in &mut batch {
        if let Work::Slot { looks, .. } = &mut candidate.work {
            *looks = looks.saturating_add(1);
        }
    }
    let batch = without_rows(&rt, batch).await;
    let admission = chain::admit(&rt, batch).await;
    follow(&rt, admission);
}

/// The candidates whose slot has no row yet, in one read: a slot whose row exists was claimed (or
/// recorded) by another replica, which is what a second look finds nearly always.
async fn without_rows(rt: &Runtime, batch: Vec<Candidate>) -> Vec<Candidate> {
    let Some(slots) = &rt.slots else { return batch };
    let keys: Vec<_> = batch
        .iter()
        .filter_map(|c| c.claim_request().map(|r| r.key))
        .collect();
    if keys.len() != batch.len() {
        return batch;
    }
    match slots.store.slots.existing_slots(&keys).await {
        Ok(found) if found.len() == batch.len() => batch
            .into_iter()
            .zip(found)
            .filter_map(|(c, exists)| {
                if exists {
                    // Another replica claimed (or recorded) it: this replica's span ends there.
                    crate::trace::skipped(
                        &c.span,
                        crate::guard::SkipReason::AlreadyClaimed.label(),
                    );
                }
                (!exists).then_some(c)
            })
            .collect(),
        // Could not look: the chain decides for all of them.
        _ => batch,
    }
}

/// Claims again, with a growing wait, slots whose claim met an unavailable store (a restart, a
/// network cut), until the store answers. A slot whose window closes first (its job's next slot is
/// due, or its catch-up window ended) is recorded `skipped` with [`STORE_UNAVAILABLE`] once the
/// store is back, so that it is never silently dropped.
async fn outage(rt: Arc<Runtime>, mut batch: Vec<Candidate>) {
    let mut wait = OUTAGE_RETRY.0;
    let mut expired: Vec<Candidate> = Vec::new();
    while !batch.is_empty() || !expired.is_empty() {
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(OUTAGE_RETRY.1);
        let now = rt.clock.now();
        expired.extend(batch.extract_if(.., |c| window_closed(c, now)));
        if !expired.is_empty() && record_expired(&rt, &expired).await {
            expired.clear();
        }
        if batch.is_empty() || !until_instant(&rt, &mut batch).await {
            continue;
        }
        let mut admission = chain::admit(&rt, std::mem::take(&mut batch)).await;
        batch = std::mem::take(&mut admission.unavailable);
        if !admission.runs.is_empty() {
            tracing::info!(
                event = "job_claimed_after_outage",
                runs = admission.runs.len(),
                "the store is back; slots claimed"
            );
        }
        follow(&rt, admission);
    }
}

/// Replaces each candidate of a partitioned job by one per partition key its provider lists.
async fn expand_partitions(batch: Vec<Candidate>) -> Vec<Candidate> {
    if batch.iter().all(|c| c.job.partitions.is_none()) {
        return batch;
    }
    let mut out = Vec::with_capacity(batch.len());
    for candidate in batch {
        let (Some(provider), Some(slot)) = (&candidate.job.partitions, candidate.slot_at()) else {
            out.push(candidate);
            continue;
        };
        let keys = match provider().await {
            Ok(keys) => keys,
            Err(e) => {
                tracing::error!(event = "job_partitions_failed", job = %candidate.job.name, %slot, error = %e, "partition provider failed; the slot is not run");
                crate::metrics::skipped(&candidate.job.name, "partitions_failed");
                continue;
            }
        };
        out.extend(partition_candidates(&candidate, keys));
    }
    out
}

/// One candidate per valid, distinct key.
fn partition_candidates(candidate: &Candidate, keys: Vec<String>) -> Vec<Candidate> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for key in keys {
        if let Err(problem) = slotguard_cron::check_partition(&key) {
            tracing::warn!(job = %candidate.job.name, partition = %slotguard_cron::shown_within(&key, 64), %problem, "partition key left out");
            continue;
        }
        if !seen.insert(key.clone()) {
            continue;
        }
        let mut each = candidate.clone();
        if let Work::Slot { partition, .. } = &mut each.work {
            *partition = Arc::from(key);
        }
        out.push(each);
    }
    out
}
