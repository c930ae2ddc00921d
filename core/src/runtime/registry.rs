//! This process in the replica registry: recorded when it starts, refreshed every recovery
//! interval while it may hold runs (through the grace period of a shutdown too), removed when a
//! graceful shutdown is over.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Runtime;
use crate::store::{ReplicaInfo, ReplicaStore};

/// The roles this process records: its [`Role`](crate::Role) (one today; a list, so that a process
/// may take several).
pub(crate) fn roles(rt: &Runtime) -> Vec<String> {
    vec![rt.role.as_str().to_owned()]
}

/// How long a removal on shutdown may take before the process goes without it (its row is then
/// judged gone after its threshold).
const REMOVE_WITHIN: Duration = Duration::from_secs(2);

/// The host name: the kernel's, else `$HOSTNAME`, else `host`.
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned())
}

/// When a replica that refreshes every `every` counts as gone: after three missed refreshes, and
/// never sooner than a run's heartbeat goes stale (`stale_after`).
pub(crate) fn gone_after(every: Duration, stale_after: Duration) -> Duration {
    every.saturating_mul(3).max(stale_after)
}

/// What this process records now.
fn info(rt: &Runtime, gone_after: Duration) -> ReplicaInfo {
    ReplicaInfo {
        id: rt.owner.to_string(),
        host: host(),
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        roles: roles(rt),
        // An `admin` process links jobs in but neither schedules nor runs them.
        jobs: if rt.role == crate::Role::Admin {
            Vec::new()
        } else {
            rt.jobs.iter().map(|j| j.name.to_string()).collect()
        },
        runs_held: u32::try_from(rt.running.load(Ordering::Acquire)).unwrap_or(u32::MAX),
        gone_after,
    }
}

/// Records this process, refreshes it every `every` until `done` is cancelled (after a shutdown's
/// runs have ended), then removes it. Failures are logged; the next refresh writes the row again.
pub(crate) async fn keep(
    rt: Arc<Runtime>,
    store: Arc<dyn ReplicaStore>,
    every: Duration,
    gone_after: Duration,
    done: CancellationToken,
) {
    loop {
        // Cancel safe: a write cut short is written again by the next refresh, or removed below.
        let now = info(&rt, gone_after);
        tokio::select! {
            () = done.cancelled() => break,
            recorded = store.record_replica(&now) => {
                if let Err(e) = recorded {
                    tracing::warn!(error = %e, "could not record this replica; will try again next interval");
                }
            }
        }
        tokio::select! {
            () = done.cancelled() => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    match tokio::time::timeout(REMOVE_WITHIN, store.remove_replica(&rt.owner)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "could not remove this replica from the registry"),
        Err(_) => tracing::warn!("removing this replica from the registry took too long"),
    }
}
