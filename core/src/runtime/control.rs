//! What the scheduler keeps in step with the store: the job definitions it registers, and the pause
//! state operators set.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Runtime;
use crate::store::{AdminStore, JobDefinition, StoreError};

/// Registers this scheduler's jobs in the store (so operators and the CLI see them) and reads their
/// pause state.
pub(crate) async fn register(rt: &Runtime, store: &dyn AdminStore) -> Result<(), StoreError> {
    let definitions: Vec<JobDefinition> = rt
        .jobs
        .iter()
        .map(|j| JobDefinition {
            name: j.name.to_string(),
            cron: j.schedule.expr().source().to_owned(),
            zone: j.schedule.zone().name().to_owned(),
            dst: j.schedule.dst().as_str().to_owned(),
            guard: j.level.to_string(),
            fingerprint: j.schedule.fingerprint(),
            calendar: j.schedule.business().map(crate::CalendarDefinition::of),
        })
        .collect();
    store.register_jobs(&definitions).await?;
    refresh_pauses(rt, store).await
}

/// Reads the stored pause state of every job into its flag.
pub(crate) async fn refresh_pauses(rt: &Runtime, store: &dyn AdminStore) -> Result<(), StoreError> {
    let records = store.jobs().await?;
    // By name: a scan per job was quadratic, seconds of CPU without a yield for 10,000 jobs.
    let by_name: HashMap<&str, &crate::store::JobRecord> = records
        .iter()
        .map(|r| (r.definition.name.as_str(), r))
        .collect();
    for job in &rt.jobs {
        let record = by_name.get(&*job.name).copied();
        let paused = record.is_some_and(|r| r.paused);
        crate::metrics::paused(&job.name, paused);
        if job.paused.swap(paused, Ordering::AcqRel) != paused {
            let record = record.expect("paused implies a record");
            tracing::info!(
                event = if paused { "job_paused" } else { "job_resumed" },
                job = %job.name,
                by = ?record.paused_by.as_deref().unwrap_or(""),
                reason = ?record.paused_reason.as_deref().unwrap_or(""),
                "{}",
                if paused { "job paused by an operator" } else { "job resumed by an operator" }
            );
        }
    }
    Ok(())
}

/// Refreshes the pause state every `every` until shutdown.
pub(crate) async fn watch(rt: Arc<Runtime>, store: Arc<dyn AdminStore>, every: Duration) {
    loop {
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = refresh_pauses(&rt, &*store).await {
            tracing::warn!(error = %e, "could not read pause state; keeping the last one");
        }
    }
}
