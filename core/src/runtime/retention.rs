//! History retention: every prune interval, the replica that takes the prune lock deletes the
//! finished runs of its jobs that are older than their retention, a batch at a time, and forgets
//! replicas gone for a day. The others skip their turn.

use std::sync::Arc;
use std::time::Duration;

use super::Runtime;
use crate::guard::GuardLevel;
use crate::store::{PRUNE_BATCH, PRUNE_LOCK_KEY, PruneSpec, RetentionStore, Store};

/// The pause between two batches of one pass: a large backlog is deleted at a pace the store's
/// other users do not notice.
const PACE: Duration = Duration::from_millis(100);

/// The most batches in one pass (100,000 runs); the rest waits for the next pass.
const MAX_BATCHES: usize = 200;

/// How long a replica that died without a shutdown stays in the registry, shown as gone.
const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

/// One pass every `every` until shutdown.
pub(crate) async fn prune(rt: Arc<Runtime>, store: Store, every: Duration) {
    loop {
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        pass(&rt, &store).await;
    }
}

/// One pass, if this replica takes the prune lock (the store's own lock); the runs deleted.
/// `build()` made sure the store has locks, replicas and retention.
pub(crate) async fn pass(rt: &Runtime, store: &Store) -> u64 {
    let (Some(locks), Some(retention)) = (&store.locks, &store.retention) else {
        return 0;
    };
    let specs: Vec<PruneSpec> = rt
        .jobs
        .iter()
        .filter(|j| j.level == GuardLevel::Slot)
        .map(|j| PruneSpec {
            job: j.name.to_string(),
            keep: j.retention,
        })
        .collect();
    if specs.is_empty() {
        return 0;
    }
    let held = match locks.try_lock(&rt.owner, &[PRUNE_LOCK_KEY]).await {
        Ok(mut leases) => leases.pop().flatten().is_some(),
        Err(e) => {
            tracing::warn!(error = %e, "could not take the prune lock; pruning next interval");
            false
        }
    };
    if !held {
        return 0;
    }
    let deleted = partitions(&**retention, &specs).await + batches(rt, &**retention, &specs).await;
    let forgotten = match &store.replicas {
        Some(replicas) => replicas.forget_replicas(FORGET_AFTER).await.map(|_| ()),
        None => Ok(()),
    };
    if let Err(e) = forgotten {
        tracing::warn!(error = %e, "could not forget replicas gone for a day");
    }
    if let Err(e) = locks.unlock(&rt.owner, &[PRUNE_LOCK_KEY]).await {
        tracing::warn!(error = %e, "could not release the prune lock; it lapses on its own");
    }
    if deleted > 0 {
        tracing::info!(
            event = "job_runs_pruned",
            runs = deleted,
            "deleted finished runs past their retention"
        );
    }
    deleted
}

/// The store's partitions past retention, dropped whole (nothing on a plain table).
async fn partitions(store: &dyn RetentionStore, specs: &[PruneSpec]) -> u64 {
    match store.prune_partitions(specs).await {
        Ok(pruned) => {
            for p in &pruned {
                crate::metrics::runs_pruned(&p.job, p.runs);
            }
            pruned.iter().map(|p| p.runs).sum()
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not drop old history partitions; trying next interval");
            0
        }
    }
}

/// Batches of [`PRUNE_BATCH`] runs, paced, until one comes back short.
async fn batches(rt: &Runtime, store: &dyn RetentionStore, specs: &[PruneSpec]) -> u64 {
    let mut deleted = 0;
    for _ in 0..MAX_BATCHES {
        let pruned = match store.prune_runs(specs, PRUNE_BATCH).await {
            Ok(pruned) => pruned,
            Err(e) => {
                tracing::warn!(error = %e, "could not prune old runs; trying next interval");
                break;
            }
        };
        let batch: u64 = pruned.iter().map(|p| p.runs).sum();
        for p in &pruned {
            crate::metrics::runs_pruned(&p.job, p.runs);
        }
        deleted += batch;
        if batch < PRUNE_BATCH as u64 {
            break;
        }
        tokio::select! {
            () = rt.stop.cancelled() => break,
            () = tokio::time::sleep(PACE) => {}
        }
    }
    deleted
}
