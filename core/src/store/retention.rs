//! History retention: finished runs older than their job's retention are deleted, with their
//! attempts, checkpoints and audit records, a small batch per statement.
//!
//! Only runs that can no longer run again by themselves are pruned: `succeeded`, `failed`, `dead`,
//! `skipped`, and `abandoned` with no next attempt planned. A `pending` or `running` run, or an
//! `abandoned` one waiting for its next attempt, is kept whatever its age. The newest `schedule`,
//! `catch_up` or `backfill` slot of each job is kept too: it is the watermark catch-up starts from
//! ([`AdminStore::latest_slots`](super::AdminStore::latest_slots)).

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;

/// The runs one prune statement deletes at most.
pub const PRUNE_BATCH: usize = 500;

/// How long one job's finished runs are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneSpec {
    /// The job's name.
    pub job: String,
    /// A run is pruned once it finished longer ago than this (by the store's clock).
    pub keep: Duration,
}

/// How many runs of one job a prune statement deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pruned {
    /// The job's name.
    pub job: String,
    /// Runs deleted (each with its attempts, checkpoint and audit records).
    pub runs: u64,
}

/// Deleting old history.
#[async_trait]
pub trait RetentionStore: Send + Sync + 'static {
    /// Deletes up to `limit` runs of the jobs in `specs` that finished (see the [module](self))
    /// longer ago than their spec's `keep`, oldest finished first within a job, with their attempts,
    /// checkpoints and audit records, in one statement or transaction. One entry per job that lost
    /// runs; fewer than `limit` runs in all means nothing more is due.
    ///
    /// # Cancel safety
    /// Cancel safe: a batch is deleted whole or not at all; the next call deletes what is left.
    async fn prune_runs(
        &self,
        specs: &[PruneSpec],
        limit: usize,
    ) -> Result<Vec<Pruned>, StoreError>;

    /// Once per retention pass, before [`prune_runs`](Self::prune_runs): a store that keeps its
    /// history in time partitions makes the partitions ahead and drops each partition of which
    /// `prune_runs` would delete every row, whatever their number (the same rule: a partition
    /// holding a run that may run again, a job's newest scheduled slot, a run of a job not in
    /// `specs` or one kept longer stays, and its rows go one by one). One entry per job that lost
    /// runs. The default does nothing: a plain table.
    ///
    /// # Cancel safety
    /// Cancel safe: a partition is dropped whole or not at all, and one left half-way (taken out of
    /// the table, not yet dropped) is finished by the next call.
    async fn prune_partitions(&self, specs: &[PruneSpec]) -> Result<Vec<Pruned>, StoreError> {
        let _ = specs;
        Ok(Vec::new())
    }
}

/// The lock key of pruning (ASCII `slotprun`): the replica that holds it prunes, the others skip
/// their turn. Far from any key derived from a job's name in practice (a 64-bit hash).
pub const PRUNE_LOCK_KEY: i64 = 0x736c_6f74_7072_756e;
