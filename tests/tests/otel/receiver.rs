//! A real OTLP/HTTP receiver: an axum server in the test that decodes the protobuf exports of
//! `opentelemetry-otlp`, as a collector would.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_sdk::trace::SdkTracerProvider;
use prost::Message;
use slotguard::Role;
use tracing_subscriber::layer::SubscriberExt;

use crate::stores::Store;
use crate::{start, traced};

/// Every span the receiver decoded.
type Received = Arc<Mutex<Vec<Span>>>;

/// Starts the receiver on its own thread and runtime (the test's thread blocks while it flushes).
fn serve() -> (SocketAddr, Received) {
    let received = Received::default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let addr = listener.local_addr().expect("address");
    let app = Router::new()
        .route("/v1/traces", post(receive))
        .with_state(Arc::clone(&received));
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            axum::serve(listener, app).await.expect("serve");
        });
    });
    (addr, received)
}

/// `POST /v1/traces`: one protobuf `ExportTraceServiceRequest`.
async fn receive(State(received): State<Received>, body: Bytes) -> impl IntoResponse {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf export");
    let mut spans = received.lock().expect("lock");
    for resource in request.resource_spans {
        for scope in resource.scope_spans {
            spans.extend(scope.spans);
        }
    }
    let response = ExportTraceServiceResponse::default().encode_to_vec();
    ([(header::CONTENT_TYPE, "application/x-protobuf")], response)
}

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

fn attr(span: &Span, key: &str) -> Option<String> {
    let kv = span.attributes.iter().find(|kv| kv.key == key)?;
    Some(match kv.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        other => format!("{other:?}"),
    })
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
    let (addr, received) = serve();
    let (provider, guard) = export_to(addr);
    let scheduler = start(&store, "scheduler", Role::Scheduler, vec![traced()]).await;
    let worker = start(&store, "worker", Role::Worker, vec![traced()]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        flush(&provider).await;
        if linked_run(&received.lock().expect("lock")).is_some() {
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

    let spans = received.lock().expect("lock").clone();
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
