//! [`RetentionStore`] for the memory backend.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{MemoryBackend, Run};
use crate::store::{PruneSpec, Pruned, RetentionStore, RunStatus, SlotKey, StoreError, Trigger};

/// Whether a run can no longer run again by itself.
fn finished(run: &Run) -> bool {
    match run.status {
        RunStatus::Succeeded | RunStatus::Failed | RunStatus::Dead | RunStatus::Skipped => true,
        RunStatus::Abandoned => run.next_attempt_at.is_none(),
        _ => false,
    }
}

/// The newest watermark slot (schedule, catch-up or backfill) of each job.
fn watermarks(runs: &HashMap<SlotKey, Run>) -> HashMap<&str, DateTime<Utc>> {
    let mut marks: HashMap<&str, DateTime<Utc>> = HashMap::new();
    for (key, run) in runs {
        if run.trigger == Trigger::Manual {
            continue;
        }
        let mark = marks.entry(key.job.as_str()).or_insert(key.scheduled_at);
        *mark = (*mark).max(key.scheduled_at);
    }
    marks
}

#[async_trait]
impl RetentionStore for MemoryBackend {
    async fn prune_runs(
        &self,
        specs: &[PruneSpec],
        limit: usize,
    ) -> Result<Vec<Pruned>, StoreError> {
        let now = self.clock.now();
        let mut inner = self.lock();
        self.check(&inner)?;
        let marks = watermarks(&inner.runs);
        let mut doomed: Vec<(DateTime<Utc>, SlotKey, i64)> = Vec::new();
        for (key, run) in &inner.runs {
            let Some(spec) = specs.iter().find(|s| s.job == key.job) else {
                continue;
            };
            let Some(cutoff) = chrono::Duration::from_std(spec.keep)
                .ok()
                .and_then(|keep| now.checked_sub_signed(keep))
            else {
                continue;
            };
            let is_mark = marks.get(key.job.as_str()) == Some(&key.scheduled_at)
                && run.trigger != Trigger::Manual;
            match run.finished_at {
                Some(at) if at < cutoff && finished(run) && !is_mark => {
                    doomed.push((at, key.clone(), run.id));
                }
                _ => {}
            }
        }
        doomed.sort();
        doomed.truncate(limit);
        let ids: HashSet<i64> = doomed.iter().map(|(_, _, id)| *id).collect();
        inner
            .audit
            .retain(|a| a.run_id.is_none_or(|id| !ids.contains(&id)));
        let mut counts: Vec<Pruned> = Vec::new();
        for (_, key, _) in doomed {
            inner.runs.remove(&key);
            match counts.iter_mut().find(|p| p.job == key.job) {
                Some(p) => p.runs += 1,
                None => counts.push(Pruned {
                    job: key.job,
                    runs: 1,
                }),
            }
        }
        Ok(counts)
    }
}
