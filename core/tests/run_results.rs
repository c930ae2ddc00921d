//! Each run's `job_run` span says how it ended in `workflow.task.run.result` (the value traces
//! export, docs/observability.md): success, failure, a panic as `error`, the attempt's timeout as
//! `timeout`, shutdown as `cancellation`, and a slot not run as `skip` with its reason.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use slotguard::{Job, JobContext, JobError, MemoryBackend, Scheduler, TokioClock};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// `(job, result, skip reason)` of every `job_run` span, once closed.
#[derive(Clone, Default)]
struct Results {
    open: Arc<Mutex<HashMap<Id, Fields>>>,
    closed: Arc<Mutex<Vec<Fields>>>,
}

impl Results {
    /// This thread's subscriber while the guard lives.
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Fields {
    job: String,
    result: Option<String>,
    reason: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}").trim_matches('"').to_owned();
        match field.name() {
            "job" => self.job = text,
            "workflow.task.run.result" => self.result = Some(text),
            "skip_reason" => self.reason = Some(text),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Results {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        if attrs.metadata().name() == "job_run" {
            let mut fields = Fields::default();
            attrs.record(&mut fields);
            self.open.lock().unwrap().insert(id.clone(), fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(fields) = self.open.lock().unwrap().get_mut(id) {
            values.record(fields);
        }
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        if let Some(fields) = self.open.lock().unwrap().remove(&id) {
            self.closed.lock().unwrap().push(fields);
        }
    }
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

/// Jobs that end each way, every second.
fn jobs() -> Vec<Job> {
    let sleep = |secs| tokio::time::sleep(Duration::from_secs(secs));
    vec![
        Job::new("fine", "* * * * * *", |_: JobContext| async {}),
        Job::new("broken", "* * * * * *", |_: JobContext| async {
            Err::<(), _>(JobError::transient("no"))
        }),
        Job::new("panics", "* * * * * *", |_: JobContext| async {
            let panics = true;
            assert!(!panics, "the body panicked");
        }),
        Job::new("slow", "* * * * * *", move |_: JobContext| sleep(10))
            .timeout(Duration::from_millis(300)),
        Job::new("endless", "* * * * * *", move |_: JobContext| sleep(3600)),
    ]
}

#[tokio::test(start_paused = true)]
async fn each_way_a_run_ends_is_its_result() {
    let results = Results::default();
    let _traces = results.install();
    let clock = TokioClock::starting_at(at("2026-03-02T01:00:00.500Z"));
    let handle = Scheduler::builder()
        .backend(MemoryBackend::with_clock(Arc::new(clock)))
        .clock(clock)
        .jobs(jobs())
        .grace_period(Duration::from_secs(1))
        .kill_after(Duration::from_secs(1))
        .build()
        .unwrap()
        .start();
    tokio::time::sleep(Duration::from_secs(3)).await;
    handle.shutdown().await;

    let closed = results.closed.lock().unwrap().clone();
    let ended = |job: &str, result: &str| {
        closed
            .iter()
            .any(|f| f.job == job && f.result.as_deref() == Some(result))
    };
    for (job, result) in [
        ("fine", "success"),
        ("broken", "failure"),
        ("panics", "error"),
        ("slow", "timeout"),
        ("endless", "cancellation"),
    ] {
        assert!(ended(job, result), "{job}: no {result} in {closed:#?}");
    }
    // The next slots of the endless job found its run still going.
    let skipped = closed
        .iter()
        .find(|f| f.job == "endless" && f.result.as_deref() == Some("skip"))
        .expect("a skipped slot");
    assert_eq!(skipped.reason.as_deref(), Some("running_here"));
    assert!(
        closed.iter().all(|f| f.result.is_some()),
        "every run span says how it ended: {closed:#?}"
    );
}
