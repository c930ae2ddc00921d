//! Due work: retries that fell due, stale attempts of dead or frozen processes, shutdown
//! hand-overs, buffered slots, catch-up, manual and backfill runs. Each round asks the store which
//! jobs have some (one read), then offers each such job's due work to its guard chain, like a tick.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::entry::{Candidate, JobEntry};

use super::{Runtime, chain, run};

/// How many overdue runs one round may claim: recovery after an outage is paced, never a storm.
pub(crate) const BATCH: usize = 32;

/// The recovery loop: one round every `every` until shutdown.
pub(crate) async fn recover(rt: Arc<Runtime>, every: Duration) {
    if !rt.jobs.iter().any(|j| j.layers.slot) {
        return;
    }
    let mut next = tokio::time::Instant::now() + every;
    loop {
        tokio::select! {
            () = rt.stop.cancelled() => return,
            () = tokio::time::sleep_until(next) => {
                next = tokio::time::Instant::now() + every;
                due_round(&rt, BATCH, |_| true).await;
            }
            () = rt.due_wake.notified() => {
                // A run of a job with more work waiting ended: that job, now.
                due_round(&rt, BATCH, |j| j.look_again.swap(false, Ordering::AcqRel)).await;
            }
        }
    }
}

/// One round of due work for the `slot`-level jobs `include` accepts, at most `limit` runs; the
/// runs started.
pub(crate) async fn due_round(
    rt: &Arc<Runtime>,
    limit: usize,
    include: impl Fn(&JobEntry) -> bool,
) -> usize {
    let Some(slots) = &rt.slots else { return 0 };
    // Jobs running here are looked at too, though not claimed: their backlog flag tells the end of
    // their run to look again at once.
    let jobs: Vec<&Arc<JobEntry>> = rt
        .jobs
        .iter()
        .filter(|j| j.layers.slot && include(j) && !j.is_paused())
        .collect();
    if jobs.is_empty() {
        return 0;
    }
    let ahead = lead(rt);
    let Some(due) = which_due(rt, slots, &jobs, ahead).await else {
        return 0;
    };
    let mut batch = Vec::new();
    for job in jobs {
        let has_due = due.iter().any(|d| *d == *job.name);
        job.backlog.store(has_due, Ordering::Release);
        if has_due && may_claim(job) {
            batch.push(Candidate::due(job, limit, ahead));
        }
    }
    if batch.is_empty() {
        return 0;
    }
    let direct: Vec<Arc<JobEntry>> = batch
        .iter()
        .filter(|c| asks_directly(rt, &c.job))
        .map(|c| Arc::clone(&c.job))
        .collect();
    let admission = chain::admit(rt, batch).await;
    let started = admission.runs.len();
    for job in &direct {
        // A run of the job going on here may have work waiting behind it (a buffered slot): its
        // end looks again.
        let got = admission.runs.iter().any(|a| Arc::ptr_eq(&a.job, job));
        let busy = job.bodies.load(Ordering::Acquire) > 0;
        job.backlog.store(got || busy, Ordering::Release);
    }
    for admitted in admission.runs {
        // A worker's first attempt of a queued slot is its normal start (`job_started`, debug).
        if admitted.recovered {
            tracing::info!(
                event = "job_recovered",
                job = %admitted.job.name,
                slot = %admitted.run.slot.scheduled_at,
                trigger = admitted.run.trigger.as_str(),
                "claimed a run that fell due"
            );
        }
        // Room under the process's limit was counted before the claim; a run claimed anyway runs.
        let room = rt
            .run_limit
            .as_ref()
            .and_then(|l| Arc::clone(l).try_acquire_owned().ok());
        let rt = Arc::clone(rt);
        let job = Arc::clone(&admitted.job);
        job.bodies.fetch_add(1, Ordering::AcqRel);
        rt.tracker.clone().spawn(async move {
            run::execute(rt, admitted).await;
            job.bodies.fetch_sub(1, Ordering::AcqRel);
            drop(room);
        });
    }
    started
}

/// The names of `jobs` that may have due work; `None` when the store could not be asked. Jobs
/// whose chain takes nothing before the claim are claimed directly; the others are asked about
/// first (one read), so that their flag and lock are taken only when work waits.
async fn which_due(
    rt: &Runtime,
    slots: &crate::guard::slot::SlotGuard,
    jobs: &[&Arc<JobEntry>],
    ahead: Duration,
) -> Option<Vec<String>> {
    let (direct, asked): (Vec<&Arc<JobEntry>>, Vec<&Arc<JobEntry>>) =
        jobs.iter().partition(|j| asks_directly(rt, j));
    let mut due: Vec<String> = direct.iter().map(|j| j.name.to_string()).collect();
    if !asked.is_empty() {
        let asked: Vec<_> = asked
            .iter()
            .map(|j| j.due_spec().with_ahead(ahead))
            .collect();
        match slots.store.slots.due_jobs(&asked).await {
            Ok(found) => due.extend(found),
            Err(e) => {
                tracing::warn!(error = %e, "could not look for due work; will look again next round");
                return None;
            }
        }
    }
    Some(due)
}

/// How long before their instants a round takes queued slots: a worker's
/// [`claim_ahead`](crate::SchedulerBuilder::claim_ahead), so that it claims them before they fall
/// due and starts each body at its instant; nothing for other roles (no slot of theirs is queued).
pub(crate) fn lead(rt: &Runtime) -> Duration {
    if rt.role == crate::Role::Worker {
        rt.lead.base()
    } else {
        Duration::ZERO
    }
}

/// Whether a worker claims `job`'s due work without first asking whether there is any: its chain
/// takes no flag and no lock (the store's overlap policy decides), so claiming is as cheap as
/// asking. The job then counts as having a backlog while a claim finds some or a run of it goes on
/// here, so the end of a run looks again.
fn asks_directly(rt: &Runtime, job: &JobEntry) -> bool {
    rt.role == crate::Role::Worker && job.overlap_by_store()
}

/// Whether this replica may claim the job's due work now: not paused, and not running here with
/// the flag raised (a job at overlap `skip` running here leaves its next attempt to another
/// replica, or to a later round).
fn may_claim(job: &JobEntry) -> bool {
    (job.overlap_by_store() || !job.running.load(Ordering::Acquire))
        && !job.is_paused()
        && job.has_room()
}
