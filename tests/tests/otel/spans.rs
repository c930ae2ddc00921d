//! Spans exported to the SDK's in-memory exporter, and what the tests ask of them.

use std::time::Duration;

use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing::subscriber::DefaultGuard;

/// How long a test waits for the spans it looks for.
const PATIENCE: Duration = Duration::from_secs(30);

/// A `tracing-opentelemetry` layer exporting to memory, the default subscriber of this thread
/// (the tests run on a current-thread runtime) while it lives.
pub(crate) struct Exported {
    exporter: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    _guard: DefaultGuard,
}

impl Exported {
    pub(crate) fn install() -> Self {
        let (exporter, provider, subscriber) = slotguard_tests::traces::in_memory();
        Exported {
            exporter,
            _provider: provider,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    /// The spans exported once `done` holds for them; panics with what was exported after
    /// [`PATIENCE`].
    pub(crate) async fn wait_for(
        &self,
        what: &str,
        done: impl Fn(&[SpanData]) -> bool,
    ) -> Vec<SpanData> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let spans = self.exporter.get_finished_spans().expect("spans");
            if done(&spans) {
                return spans;
            }
            if tokio::time::Instant::now() > deadline {
                let names: Vec<_> = spans.iter().map(|s| (&s.name, &s.attributes)).collect();
                panic!("no {what} after {PATIENCE:?}; exported: {names:#?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The value of attribute `key`, as text.
pub(crate) fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// The `job_run` spans of `job` that ended with `result`.
pub(crate) fn runs<'a>(
    spans: &'a [SpanData],
    job: &'a str,
    result: &'a str,
) -> impl Iterator<Item = &'a SpanData> {
    spans.iter().filter(move |s| {
        s.name == "job_run"
            && attr(s, "job").as_deref() == Some(job)
            && attr(s, "workflow.task.run.result").as_deref() == Some(result)
    })
}

/// Whether some slot was recorded not run.
pub(crate) fn skipped(spans: &[SpanData]) -> bool {
    spans.iter().any(|s| {
        s.name == "job_run" && attr(s, "workflow.task.run.result").as_deref() == Some("skip")
    })
}

/// The children of `parent` named `name`.
fn children<'a>(spans: &'a [SpanData], parent: &SpanData, name: &str) -> Vec<&'a SpanData> {
    spans
        .iter()
        .filter(|s| s.parent_span_id == parent.span_context.span_id() && s.name == name)
        .collect()
}

/// `run` → its claims, then its body → the body's own span, in one trace; each attribute of the
/// run recorded once.
pub(crate) fn assert_tree(spans: &[SpanData], run: &SpanData) {
    let mut keys: Vec<&str> = run.attributes.iter().map(|kv| kv.key.as_str()).collect();
    keys.sort_unstable();
    let all = keys.len();
    keys.dedup();
    assert_eq!(
        keys.len(),
        all,
        "an attribute recorded twice: {:#?}",
        run.attributes
    );
    let claims = children(spans, run, "job_claim");
    let bodies = children(spans, run, "job_body");
    assert!(!claims.is_empty(), "no claim span under {run:#?}");
    assert_eq!(bodies.len(), 1, "one body span under {run:#?}");
    let body = bodies[0];
    for claim in &claims {
        assert!(
            claim.end_time <= body.start_time,
            "the claim ends before the body starts"
        );
    }
    let own = children(spans, body, "user_work");
    assert_eq!(own.len(), 1, "the body's own span nests in the body span");
    for span in claims.iter().chain([&body, &own[0]]) {
        assert_eq!(span.span_context.trace_id(), run.span_context.trace_id());
    }
    assert!(run.start_time <= claims[0].start_time && body.end_time <= run.end_time);
}
