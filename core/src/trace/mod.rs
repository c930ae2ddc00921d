//! The spans of a run, as `tracing` spans that carry the OpenTelemetry `workflow.*` attributes, so
//! that a `tracing-opentelemetry` layer exports them as they are. One trace per run:
//!
//! ```text
//!   job_run     job, slot, partition, trigger, attempt, run_id, token, owner,
//!   │           workflow.trigger.type = cron, workflow.task.run.result
//!   ├─ job_claim    the walk through the job's guard chain (flag → lock → slot row)
//!   └─ job_body     the job's body: its own spans nest here
//!
//!   job_enqueue (scheduler role) ┄┄ link ┄┄ the worker's job_run (feature `otel`)
//! ```
//!
//! A run's span is made before its chain is walked, so that its claim is a child of it although
//! claims are batched across runs (see docs/DECISIONS.md). A slot that is not run ends its span
//! with result `skip` and the reason.

mod propagate;

use tracing::Span;
use tracing::field::Empty;

pub(crate) use propagate::{link, traceparent};

use chrono::{DateTime, Utc};

use crate::context::RunInfo;
use crate::store::{Claim, ClaimRequest, Trigger};

/// How a run ended, as `workflow.task.run.result` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunResult {
    Success,
    /// The body returned an error.
    Failure,
    /// The body panicked.
    Error,
    /// The attempt's timeout cut the body short.
    Timeout,
    /// Shutdown or lost ownership stopped the body.
    Cancellation,
}

impl RunResult {
    const fn as_str(self) -> &'static str {
        match self {
            RunResult::Success => "success",
            RunResult::Failure => "failure",
            RunResult::Error => "error",
            RunResult::Timeout => "timeout",
            RunResult::Cancellation => "cancellation",
        }
    }
}

/// The span of one run of `job` in this process (`owner`), before its chain is walked.
pub(crate) fn run_span(job: &str, owner: &str) -> Span {
    tracing::info_span!(
        "job_run",
        job = %job,
        slot = Empty,
        trigger = Empty,
        partition = Empty,
        attempt = Empty,
        run_id = Empty,
        token = Empty,
        owner = %owner,
        outcome = Empty,
        skip_reason = Empty,
        workflow.trigger.type = "cron",
        workflow.task.run.result = Empty,
        otel.status_code = Empty,
    )
}

/// Records the slot a run is for, once per span (an OpenTelemetry span keeps every value recorded).
pub(crate) fn describe_slot(span: &Span, at: DateTime<Utc>, trigger: Trigger, partition: &str) {
    span.record(
        "slot",
        tracing::field::display(at.format("%Y-%m-%dT%H:%M:%SZ")),
    );
    span.record("trigger", trigger.as_str());
    span.record("partition", partition);
}

/// Records the attempt the slot layer claimed (attempt 1 without a slot row).
pub(crate) fn describe_attempt(span: &Span, info: &RunInfo) {
    span.record("attempt", info.attempt.unwrap_or(1));
    if let (Some(run_id), Some(token)) = (info.run_id, info.fencing_token) {
        span.record("run_id", run_id);
        span.record("token", token);
    }
}

/// The span of one walk of a run's chain: a child of the run's span.
pub(crate) fn claim_span(run: &Span) -> Span {
    tracing::info_span!(parent: run, "job_claim")
}

/// The span of a run's body: a child of the run's span, the parent of the body's own spans.
pub(crate) fn body_span(run: &Span) -> Span {
    tracing::info_span!(parent: run, "job_body")
}

/// Ends a run's span as not run, with `reason`.
pub(crate) fn skipped(span: &Span, reason: &str) {
    span.record("workflow.task.run.result", "skip");
    span.record("skip_reason", reason);
}

/// Records how a body ended: its outcome's label and its result.
pub(crate) fn ended(span: &Span, outcome: &str, result: RunResult) {
    span.record("outcome", outcome);
    span.record("workflow.task.run.result", result.as_str());
    if matches!(
        result,
        RunResult::Failure | RunResult::Error | RunResult::Timeout
    ) {
        span.record("otel.status_code", "ERROR");
    }
}

/// The span of the `scheduler` role queueing one slot for workers: what the worker's run links to.
pub(crate) fn enqueue_span(request: &ClaimRequest, owner: &str) -> Span {
    tracing::info_span!(
        "job_enqueue",
        job = %request.key.job,
        slot = %request.key.scheduled_at.format("%Y-%m-%dT%H:%M:%SZ"),
        partition = %request.key.partition,
        owner = %owner,
        answer = Empty,
        workflow.trigger.type = "cron",
    )
}

/// Records the store's answer to an enqueue.
pub(crate) fn enqueued(span: &Span, answer: &Claim) {
    let answer = match answer {
        Claim::Queued => "queued",
        Claim::Taken { .. } => "taken",
        Claim::NotDue => "not_due",
        Claim::Busy => "busy",
        Claim::Contended => "contended",
        Claim::Won(_) => "won",
    };
    span.record("answer", answer);
}
