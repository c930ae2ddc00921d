//! Traces (slotguard's `otel` feature), exported by the OpenTelemetry SDK: a run is one trace
//! (`job_run` → `job_claim`, `job_body` → the body's own span) with the `workflow.*` attributes and
//! slotguard's own, skipped slots end with result `skip`, and a worker's run links to the span of
//! the scheduler that queued it, on SQLite and PostgreSQL; and all of it reaches a real OTLP/HTTP
//! receiver, decoded from protobuf.
//!
//! Runs are real: jobs fire every second, and each test waits (bounded) until the spans it looks
//! for were exported, never for a fixed time.

mod receiver;
mod spans;
mod stores;

use std::time::Duration;

use slotguard::{Job, JobContext, JobError, Role, Scheduler, SchedulerHandle};

use spans::{Exported, attr};
use stores::Store;

/// A job that succeeds, inside a span of its own.
fn traced() -> Job {
    Job::new("traced", "* * * * * *", |_ctx: JobContext| async {
        let work = tracing::info_span!("user_work", rows = 3);
        let _entered = work.enter();
        tracing::info!("the body's own event");
        Ok::<(), JobError>(())
    })
}

/// A job that fails every time.
fn broken() -> Job {
    Job::new("broken", "* * * * * *", |_ctx: JobContext| async {
        Err::<(), _>(JobError::transient("the ledger is closed"))
    })
}

/// Starts a replica named `id` in `role` with `jobs` on `store`.
async fn start(store: &Store, id: &str, role: Role, jobs: Vec<Job>) -> SchedulerHandle {
    let builder = Scheduler::builder()
        .instance_id(id)
        .role(role)
        .jobs(jobs)
        .grace_period(Duration::from_secs(5));
    store.attach(builder).await.build().expect("build").start()
}

/// Two replicas run both jobs: a success is one span tree with every attribute, a failure is an
/// error span, and the replica that lost a slot records it `skip`.
async fn a_run_is_one_trace(store: Store) {
    let exported = Exported::install();
    let a = start(&store, "replica-a", Role::All, vec![traced(), broken()]).await;
    let b = start(&store, "replica-b", Role::All, vec![traced(), broken()]).await;
    let spans = exported
        .wait_for("a success, a failure and a skip", |spans| {
            let result = |job, result| spans::runs(spans, job, result).next().is_some();
            result("traced", "success") && result("broken", "failure") && spans::skipped(spans)
        })
        .await;
    a.shutdown().await;
    b.shutdown().await;

    let run = spans::runs(&spans, "traced", "success")
        .next()
        .expect("a run");
    spans::assert_tree(&spans, run);
    for (key, want) in [
        ("workflow.trigger.type", "cron"),
        ("job", "traced"),
        ("trigger", "schedule"),
        ("partition", ""),
        ("attempt", "1"),
        ("outcome", "succeeded"),
    ] {
        assert_eq!(attr(run, key).as_deref(), Some(want), "{key}");
    }
    for key in ["slot", "run_id", "token"] {
        assert!(attr(run, key).is_some_and(|v| !v.is_empty()), "{key}");
    }
    let owner = attr(run, "owner").expect("owner");
    assert!(owner == "replica-a" || owner == "replica-b", "{owner}");

    let failed = spans::runs(&spans, "broken", "failure")
        .next()
        .expect("a failure");
    assert!(matches!(
        failed.status,
        opentelemetry::trace::Status::Error { .. }
    ));
    let skip = spans
        .iter()
        .find(|s| attr(s, "workflow.task.run.result").as_deref() == Some("skip"));
    let skip = skip.expect("a skip");
    assert!(attr(skip, "skip_reason").is_some_and(|r| !r.is_empty()));
    assert!(attr(skip, "slot").is_some());
}

/// A scheduler queues, a worker runs: the worker's run links to the scheduler's `job_enqueue`
/// span of the same slot, in another trace.
async fn a_workers_run_links_to_its_scheduler(store: Store) {
    let exported = Exported::install();
    let scheduler = start(&store, "scheduler", Role::Scheduler, vec![traced()]).await;
    let worker = start(&store, "worker", Role::Worker, vec![traced()]).await;
    let spans = exported
        .wait_for("a worker's run", |spans| {
            spans::runs(spans, "traced", "success").any(|r| r.links.links.len() == 1)
        })
        .await;
    scheduler.shutdown().await;
    worker.shutdown().await;

    let run = spans::runs(&spans, "traced", "success")
        .find(|r| r.links.links.len() == 1)
        .expect("a linked run");
    assert_eq!(attr(run, "owner").as_deref(), Some("worker"));
    spans::assert_tree(&spans, run);
    let linked = &run.links.links[0].span_context;
    let enqueue = spans
        .iter()
        .find(|s| s.span_context.span_id() == linked.span_id())
        .expect("the linked span was exported");
    assert_eq!(enqueue.name, "job_enqueue");
    assert_eq!(enqueue.span_context.trace_id(), linked.trace_id());
    assert_ne!(enqueue.span_context.trace_id(), run.span_context.trace_id());
    assert_eq!(attr(enqueue, "owner").as_deref(), Some("scheduler"));
    assert_eq!(attr(enqueue, "answer").as_deref(), Some("queued"));
    assert_eq!(attr(enqueue, "slot"), attr(run, "slot"));
}

#[tokio::test]
async fn a_run_is_one_trace_on_sqlite() {
    a_run_is_one_trace(Store::sqlite()).await;
}

#[tokio::test]
async fn a_run_is_one_trace_on_postgres() {
    a_run_is_one_trace(Store::postgres()).await;
}

#[tokio::test]
async fn a_workers_run_links_to_its_scheduler_on_sqlite() {
    a_workers_run_links_to_its_scheduler(Store::sqlite()).await;
}

#[tokio::test]
async fn a_workers_run_links_to_its_scheduler_on_postgres() {
    a_workers_run_links_to_its_scheduler(Store::postgres()).await;
}

#[tokio::test]
async fn runs_reach_a_real_otlp_http_receiver() {
    receiver::runs_reach_a_real_otlp_http_receiver(Store::sqlite()).await;
}
