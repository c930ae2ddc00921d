//! Overdue detection: at `slot + deadline`, a slot that has not succeeded is reported.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::entry::JobEntry;
use crate::store::{AdminStore, RunFilter, RunStatus};

use super::Runtime;

/// Starts the deadline watch of `slot` when its job has a deadline and the scheduler a store.
pub(crate) fn watch(rt: &Arc<Runtime>, job: &Arc<JobEntry>, slot: DateTime<Utc>) {
    let store = rt.slots.as_ref().and_then(|s| s.store.admin.clone());
    if let (Some(deadline), Some(store)) = (job.deadline, store) {
        rt.tracker.spawn(watch_deadline(
            Arc::clone(rt),
            store,
            Arc::clone(job),
            slot,
            deadline,
        ));
    }
}

async fn watch_deadline(
    rt: Arc<Runtime>,
    store: Arc<dyn AdminStore>,
    job: Arc<JobEntry>,
    slot: DateTime<Utc>,
    deadline: Duration,
) {
    let due = slot + chrono::Duration::from_std(deadline).unwrap_or(chrono::Duration::MAX / 2);
    let wait = (due - rt.clock.now()).to_std().unwrap_or_default();
    tokio::select! {
        () = rt.stop.cancelled() => return,
        () = tokio::time::sleep(wait) => {}
    }
    let filter = RunFilter {
        job: Some(job.name.to_string()),
        partition: Some(String::new()),
        from: Some(slot),
        to: Some(slot + chrono::Duration::milliseconds(1)),
        limit: 1,
        ..RunFilter::default()
    };
    let status = match store.runs(&filter).await {
        Ok(runs) => runs.first().map(|r| r.status),
        Err(e) => {
            tracing::warn!(job = %job.name, %slot, error = %e, "could not check the deadline");
            return;
        }
    };
    if status != Some(RunStatus::Succeeded) {
        crate::metrics::overdue(&job.name);
        tracing::error!(
            event = "job_overdue",
            job = %job.name,
            %slot,
            deadline_secs = deadline.as_secs(),
            status = status.map_or("missing", |s| s.as_str()),
            "slot has not succeeded by its deadline"
        );
    }
}
