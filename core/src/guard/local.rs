//! `local`: a per-process running flag, the seed's in-memory flag.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;

use super::{Decision, Guard, GuardLevel, Permit, RunOutcome, SkipReason};
use crate::entry::{Candidate, JobEntry};

/// Lets a job in only while no run of it is going in this process.
pub(crate) struct LocalGuard;

#[async_trait]
impl Guard for LocalGuard {
    fn level(&self) -> GuardLevel {
        GuardLevel::Local
    }

    async fn acquire(&self, batch: &[&Candidate]) -> Vec<Decision> {
        batch
            .iter()
            .map(|c| match RunningFlag::raise(&c.job) {
                Some(flag) => Decision::Admit(Box::new(flag)),
                None => Decision::Skip(SkipReason::RunningHere),
            })
            .collect()
    }
}

/// The raised flag. Lowered by `release` on the normal path and by `Drop` on every other one (a panic
/// that escapes, a cancelled task), so a job can never stay stuck as "running".
pub(crate) struct RunningFlag(Arc<JobEntry>);

impl RunningFlag {
    pub(crate) fn raise(job: &Arc<JobEntry>) -> Option<Self> {
        job.running
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| RunningFlag(Arc::clone(job)))
    }
}

impl Drop for RunningFlag {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
    }
}

#[async_trait]
impl Permit for RunningFlag {
    async fn release(self: Box<Self>, _outcome: &RunOutcome) -> Option<bool> {
        drop(self);
        None
    }
}
