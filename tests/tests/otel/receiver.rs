//! The export through a real OTLP/HTTP receiver (`slotguard_tests::otlp`): the spans, their parents
//! and the worker's link survive the protobuf encoding.

use std::net::SocketAddr;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use slotguard::Role;
use slotguard_tests::otlp::{Receiver, Span, attr};
use tracing_subscriber::layer::SubscriberExt;

use crate::stores::Store;
use crate::{start, traced};

/// The OTLP/HTTP exporter to `addr`, batched, under a `tracing-opentelemetry` layer that is this
/// thread's default subscriber.
fn export_to(addr: SocketAddr) -> (SdkTracerProvider, tracing::subscriber::DefaultGuard) {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("http://{addr}/v1/traces"))
        .build()
        .expect("exporter");
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("slotguard-test"));
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::INFO)
        .with(layer);
    (provider, tracing::subscriber::set_default(subscriber))
}

/// Sends what the batch holds, from a blocking thread (the exporter's client blocks).
async fn flush(provider: &SdkTracerProvider) {
    let provider = provider.clone();
    let flushed = tokio::task::spawn_blocking(move || provider.force_flush()).await;
    flushed.expect("join").expect("flush");
}

/// A worker's successful run of `traced`, with its link.
fn linked_run(spans: &[Span]) -> Option<&Span> {
    spans.iter().find(|s| {
        s.name == "job_run"
            && attr(s, "workflow.task.run.result").as_deref() == Some("success")
            && s.links.len() == 1
    })
}

fn child<'a>(spans: &'a [Span], parent: &Span, name: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.parent_span_id == parent.span_id && s.name == name)
        .unwrap_or_else(|| panic!("no {name} under {}", parent.name))
}

pub(crate) async fn runs_reach_a_real_otlp_http_receiver(store: Store) {
    let receiver = Receiver::start();
    let (provider, guard) = export_to(receiver.addr);
    let scheduler = start(&store, "scheduler", Role::Scheduler, vec![traced()]).await;
    let worker = start(&store, "worker", Role::Worker, vec![traced()]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        flush(&provider).await;
        if linked_run(&receiver.spans()).is_some() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no linked run received"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    scheduler.shutdown().await;
    worker.shutdown().await;
    flush(&provider).await;
    drop(guard);

    let spans = receiver.spans();
    let run = linked_run(&spans).expect("a linked run");
    assert_eq!(attr(run, "workflow.trigger.type").as_deref(), Some("cron"));
    assert_eq!(attr(run, "owner").as_deref(), Some("worker"));
    assert_eq!(attr(run, "attempt").as_deref(), Some("1"));
    child(&spans, run, "job_claim");
    let body = child(&spans, run, "job_body");
    let own = child(&spans, body, "user_work");
    assert_eq!(own.trace_id, run.trace_id);
    let link = &run.links[0];
    let enqueue = spans
        .iter()
        .find(|s| s.span_id == link.span_id)
        .expect("the scheduler's span was received");
    assert_eq!(enqueue.name, "job_enqueue");
    assert_eq!(enqueue.trace_id, link.trace_id);
    assert_eq!(attr(enqueue, "slot"), attr(run, "slot"));
    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .expect("join")
        .expect("shutdown");
}
