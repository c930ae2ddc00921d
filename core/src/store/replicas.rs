//! The replica registry: each scheduler process records itself in the store, refreshes its row on the
//! runtime's recovery cadence and removes it on a graceful shutdown, so operators can see which
//! processes run which jobs, and a job no live process runs is not shown as active.
//!
//! Liveness is judged by the store's clock, like heartbeats of runs: a replica is *gone* once its
//! last heartbeat is older than the threshold it recorded itself ([`ReplicaInfo::gone_after`]).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreError;

/// What a scheduler process records about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaInfo {
    /// The instance id: the owner recorded on its locks and attempts.
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The slotguard version it runs.
    pub version: String,
    /// What the process does: its [`Role`](crate::Role)'s name (`all`, `scheduler`, `worker`,
    /// `admin`), in order.
    pub roles: Vec<String>,
    /// The jobs it runs, by name.
    pub jobs: Vec<String>,
    /// Job bodies it runs now.
    pub runs_held: u32,
    /// Gone once its heartbeat is older than this (by the store's clock).
    pub gone_after: Duration,
}

/// A replica as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRecord {
    /// What it recorded last.
    pub info: ReplicaInfo,
    /// When it first recorded itself (store clock).
    pub started_at: DateTime<Utc>,
    /// When it last refreshed its row (store clock).
    pub heartbeat_at: DateTime<Utc>,
    /// Whether its heartbeat is within its `gone_after`, by the store's clock at the read.
    pub alive: bool,
}

/// Where replicas record themselves.
#[async_trait]
pub trait ReplicaStore: Send + Sync + 'static {
    /// Inserts or replaces the row of `replica.id`, with a heartbeat of now (store clock); a new row
    /// also starts now, an existing one keeps its start.
    ///
    /// # Cancel safety
    /// Cancel safe: the next refresh writes the row again.
    async fn record_replica(&self, replica: &ReplicaInfo) -> Result<(), StoreError>;

    /// Removes the row of replica `id` (a graceful shutdown). `false` when there was none.
    async fn remove_replica(&self, id: &str) -> Result<bool, StoreError>;

    /// Every recorded replica, by id (byte order), each judged alive or gone by the store's clock.
    async fn replicas(&self) -> Result<Vec<ReplicaRecord>, StoreError>;

    /// Removes the rows of replicas gone for longer than `gone_for` past their own threshold
    /// (processes that died without a shutdown); the number removed.
    async fn forget_replicas(&self, gone_for: Duration) -> Result<u64, StoreError>;
}

/// Roles as one text column: comma-separated (role names never hold a comma).
pub fn roles_to_text(roles: &[String]) -> String {
    roles.join(",")
}

/// The roles of a text column written by [`roles_to_text`].
pub fn roles_from_text(text: &str) -> Vec<String> {
    text.split(',')
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Job names as one text column: newline-separated (a job name never holds a control character).
pub fn jobs_to_text(jobs: &[String]) -> String {
    jobs.join("\n")
}

/// The job names of a text column written by [`jobs_to_text`].
pub fn jobs_from_text(text: &str) -> Vec<String> {
    text.split('\n')
        .filter(|j| !j.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip_through_text() {
        let roles = vec!["scheduler".to_owned(), "worker".to_owned()];
        assert_eq!(roles_to_text(&roles), "scheduler,worker");
        assert_eq!(roles_from_text(&roles_to_text(&roles)), roles);
        let jobs = vec!["a,b".to_owned(), "c d".to_owned()];
        assert_eq!(jobs_from_text(&jobs_to_text(&jobs)), jobs);
        assert!(jobs_from_text("").is_empty());
        assert!(roles_from_text("").is_empty());
    }
}
