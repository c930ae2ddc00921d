//! Traces for tests and benches: a `tracing-opentelemetry` layer at `info` that exports every span
//! to the OpenTelemetry SDK's in-memory exporter, as an application's OTLP set-up would export it.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use tracing_subscriber::layer::SubscriberExt;

/// The exporter, its provider (spans are exported while it lives) and a subscriber to install.
pub fn in_memory() -> (
    InMemorySpanExporter,
    SdkTracerProvider,
    impl tracing::Subscriber + Send + Sync,
) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("slotguard-test"));
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::INFO)
        .with(layer);
    (exporter, provider, subscriber)
}
