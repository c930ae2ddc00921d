//! A scheduler and a worker in one process, on one memory store: the worker shape in paused time.

use std::time::Duration;

use slotguard::{
    Job, JobContext, JobError, MemoryBackend, RetryPolicy, Role, Scheduler, SchedulerHandle,
    TokioClock,
};

/// A scheduler and a worker on `store`: `queued` succeeds every second, `flaky` (every 2 s) fails
/// its first attempt and succeeds its retry.
pub(crate) async fn scheduler_and_worker(
    store: &MemoryBackend,
    clock: TokioClock,
) -> Vec<SchedulerHandle> {
    let mut handles = Vec::new();
    for (id, role) in [("sched", Role::Scheduler), ("worker", Role::Worker)] {
        let queued = Job::new("queued", "* * * * * *", |_| async {});
        let flaky = Job::new("flaky", "*/2 * * * * *", |ctx: JobContext| async move {
            match ctx.attempt() {
                1 => Err(JobError::transient("upstream said 503")),
                _ => Ok(()),
            }
        })
        .retry(RetryPolicy::exponential(
            3,
            Duration::from_millis(200),
            Duration::from_millis(200),
        ));
        let scheduler = Scheduler::builder()
            .backend(store.clone())
            .clock(clock)
            .instance_id(id)
            .role(role)
            .jobs([queued, flaky])
            .build()
            .unwrap();
        handles.push(scheduler.try_start().await.unwrap());
    }
    handles
}
