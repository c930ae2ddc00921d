//! Run-once for external triggers (a Kubernetes CronJob, a systemd timer): one slot of one job,
//! through the same guard chain as a tick, then exit. The slot row makes duplicates harmless: of
//! several processes started for one slot, one runs the body and the others report who did.

mod outcome;
mod source;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use outcome::{RunOnce, RunOnceError};
pub use source::{ANNOTATION, SlotSource};

use crate::entry::{Candidate, JobEntry, Work};
use crate::guard::RunOutcome;
use crate::runtime::Runtime;
use crate::runtime::chain::{self, Admission};
use crate::runtime::run;
use crate::store::{AdminStore, RunFilter, RunStatus, SlotKey, StoreError};

/// How often a process that found its slot running elsewhere looks at the row again.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// The longest a process waits for the next attempt of its slot's run; a later retry is left to a
/// later start (or a worker).
const MAX_RETRY_WAIT: Duration = Duration::from_secs(15 * 60);

/// Runs `job`'s slot `slot` once (see [`Scheduler::run_once`](crate::Scheduler::run_once)).
pub(crate) async fn run(
    rt: &Arc<Runtime>,
    backend: Option<&Arc<dyn AdminStore>>,
    job: &str,
    slot: DateTime<Utc>,
) -> Result<RunOnce, RunOnceError> {
    let i = rt
        .jobs
        .iter()
        .position(|j| *j.name == *job)
        .ok_or_else(|| RunOnceError::UnknownJob(slotguard_cron::shown_within(job, 64)))?;
    let entry = &rt.jobs[i];
    if entry.partitions.is_some() {
        return Err(RunOnceError::Partitioned);
    }
    // On the job's calendar with the operators' overrides in force at the slot, as a tick plans it.
    let at = rt
        .next_slot(i, slot - chrono::Duration::seconds(1))
        .filter(|s| s.scheduled_at == slot)
        .ok_or(RunOnceError::NotASlot { slot })?;
    let now = rt.clock.now();
    if slot - now > chrono::Duration::from_std(crate::store::MAX_EARLY).unwrap_or_default() {
        return Err(RunOnceError::NotDue { slot, now });
    }
    let mut candidate = Candidate::planned(entry, at, Arc::from(""), rt.calendar_stamp(i, &at));
    // This process follows the row itself: its claim waits for another claim of the job in flight.
    candidate.never_defer();
    if crate::runtime::window::window_closed(&candidate, now) {
        chain::record_too_late(rt, &candidate).await;
        return Ok(RunOnce::TooLate { slot });
    }
    if crate::runtime::nominal::without_repeated(rt, vec![candidate.clone()])
        .await
        .is_empty()
    {
        // Its nominal date already ran: recorded `skipped`, as a tick records it.
        return Ok(suppressed(entry, row(backend, entry, slot).await?));
    }
    // Until the run ends here, or a row tells what happened to the slot elsewhere.
    let follow_until = tokio::time::Instant::now() + entry.stale_after * 2 + FOLLOW_EVERY;
    loop {
        let admission = chain::admit(rt, vec![candidate.clone()]).await;
        if let Some((_, done)) = ran(rt, admission).await? {
            return Ok(done);
        }
        if entry.layers.slot
            && let Work::Slot { looks, .. } = &mut candidate.work
        {
            // Looked at again, the slot's lock no longer stops it: the row decides (a holder that
            // died leaves its lock until the lease lapses, but its run goes stale sooner).
            *looks = 1;
        }
        let row = row(backend, entry, slot).await?;
        match row.as_ref().map(|r| (r.status, r.next_attempt_at)) {
            Some((RunStatus::Running, _)) | None if tokio::time::Instant::now() < follow_until => {
                tokio::time::sleep(FOLLOW_EVERY).await;
            }
            Some((RunStatus::Pending | RunStatus::Abandoned, Some(at))) if !entry.is_paused() => {
                return retry(rt, backend, entry, (slot, at)).await;
            }
            _ => return Ok(suppressed(entry, row)),
        }
    }
}

/// The slot's run waits for its next attempt at `at` (an earlier process's attempt failed, was
/// handed over, or was fenced by a newer slot): this process waits for it, up to
/// [`MAX_RETRY_WAIT`], and claims due work of the job through the chain until its own slot has
/// run or runs under a live owner. Due work of an older slot of the job may come first (its own
/// process finds it done). When the job stays busy past [`retry_for`], the slot is
/// [`RunOnce::Unfinished`]: exit 1, so that the trigger starts the slot again, never 0 with the
/// slot left undone.
async fn retry(
    rt: &Arc<Runtime>,
    backend: Option<&Arc<dyn AdminStore>>,
    job: &Arc<JobEntry>,
    (slot, at): (DateTime<Utc>, DateTime<Utc>),
) -> Result<RunOnce, RunOnceError> {
    let wait = (at - rt.clock.now()).to_std().unwrap_or_default();
    if wait > MAX_RETRY_WAIT {
        return Ok(unfinished(row(backend, job, slot).await?));
    }
    tokio::time::sleep(wait).await;
    let deadline = tokio::time::Instant::now() + retry_for(job);
    loop {
        let admission =
            chain::admit(rt, vec![Candidate::due(job, 1, std::time::Duration::ZERO)]).await;
        if let Some((ran_slot, done)) = ran(rt, admission).await?
            && ran_slot == slot
        {
            return Ok(done);
        }
        let row = row(backend, job, slot).await?;
        match row.as_ref().map(|r| r.status) {
            Some(RunStatus::Pending | RunStatus::Abandoned) => {}
            _ => return Ok(suppressed(job, row)),
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(unfinished(row));
        }
        tokio::time::sleep(FOLLOW_EVERY / 5).await;
    }
}

/// How long a process keeps trying its slot's next attempt while the job is busy: twice the
/// job's staleness threshold, and at least 10 s.
fn retry_for(job: &JobEntry) -> Duration {
    (job.stale_after * 2).max(Duration::from_secs(10))
}

/// The slot's run still waits for an attempt this process could not start.
fn unfinished(row: Option<crate::store::RunRecord>) -> RunOnce {
    RunOnce::Unfinished {
        status: row.as_ref().map(|r| r.status),
        reason: row.and_then(|r| r.error_message).unwrap_or_default(),
    }
}

/// The run this process was admitted to (its slot, and how it ended); `None` when the chain
/// admitted nothing.
async fn ran(
    rt: &Arc<Runtime>,
    admission: Admission,
) -> Result<Option<(DateTime<Utc>, RunOnce)>, RunOnceError> {
    if let Some(reason) = admission.unavailable.first().map(|_| "store unavailable") {
        return Err(RunOnceError::Store(StoreError::unavailable(reason)));
    }
    let Some(admitted) = admission.runs.into_iter().next() else {
        return Ok(None);
    };
    let slot = admitted.run.slot.scheduled_at;
    let task = rt.tracker.spawn(run::execute(Arc::clone(rt), admitted));
    let ended = task.await.map_err(|e| {
        RunOnceError::Store(StoreError::rejected("the run's task failed").with_source(e))
    })?;
    if !ended.accepted {
        return Ok(Some((
            slot,
            RunOnce::Abandoned {
                attempt: ended.attempt,
                reason: "the store refused the outcome: this attempt no longer held the slot"
                    .into(),
            },
        )));
    }
    let outcome = match ended.outcome {
        RunOutcome::Succeeded => RunOnce::Succeeded {
            attempt: ended.attempt,
        },
        RunOutcome::Failed { message, .. } => RunOnce::Failed {
            attempt: ended.attempt,
            message,
        },
        RunOutcome::Abandoned { reason } => RunOnce::Abandoned {
            attempt: ended.attempt,
            reason,
        },
    };
    Ok(Some((slot, outcome)))
}

/// The slot's row, if the job has them.
async fn row(
    backend: Option<&Arc<dyn AdminStore>>,
    job: &JobEntry,
    slot: DateTime<Utc>,
) -> Result<Option<crate::store::RunRecord>, RunOnceError> {
    let Some(backend) = backend.filter(|_| job.layers.slot) else {
        return Ok(None);
    };
    let filter = RunFilter {
        job: Some(job.name.to_string()),
        partition: Some(String::new()),
        from: Some(slot),
        to: Some(slot + chrono::Duration::milliseconds(1)),
        limit: 1,
        ..RunFilter::default()
    };
    let key = SlotKey {
        job: job.name.to_string(),
        scheduled_at: slot,
        partition: String::new(),
    };
    let runs = backend.runs(&filter).await.map_err(RunOnceError::Store)?;
    Ok(runs.into_iter().find(|r| r.key == key))
}

/// Another process had the slot: who, and how it stands.
fn suppressed(job: &JobEntry, row: Option<crate::store::RunRecord>) -> RunOnce {
    if job.is_paused() {
        return RunOnce::Suppressed {
            owner: None,
            status: None,
            reason: "the job is paused".to_owned(),
        };
    }
    match row {
        Some(row) => RunOnce::Suppressed {
            owner: row.owner,
            status: Some(row.status),
            reason: row.error_message.unwrap_or_default(),
        },
        None => RunOnce::Suppressed {
            owner: None,
            status: None,
            reason: "the job ran elsewhere at the same time (no slot row at this guard level)"
                .to_owned(),
        },
    }
}
