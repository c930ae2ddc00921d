//! A real OTLP/HTTP receiver for tests: an axum server on its own thread that decodes the
//! protobuf exports of `opentelemetry-otlp` (`POST /v1/traces`), as a collector would.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
pub use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// Every span the receiver decoded.
type Received = Arc<Mutex<Vec<Span>>>;

/// A running receiver; it serves until the process ends.
#[derive(Debug)]
pub struct Receiver {
    /// Where it listens: the exporter's endpoint is `http://{addr}` (or `.../v1/traces`).
    pub addr: SocketAddr,
    received: Received,
}

impl Receiver {
    /// Starts a receiver on a free port of 127.0.0.1, on its own thread and runtime (a test's
    /// thread may block while its exporter flushes).
    ///
    /// # Panics
    /// When no port can be bound.
    pub fn start() -> Self {
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
        Receiver { addr, received }
    }

    /// The spans received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.received.lock().expect("lock").clone()
    }
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

/// The value of attribute `key` of a received span, as text.
pub fn attr(span: &Span, key: &str) -> Option<String> {
    let kv = span.attributes.iter().find(|kv| kv.key == key)?;
    Some(match kv.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        other => format!("{other:?}"),
    })
}
