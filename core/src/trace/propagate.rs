//! The trace context a queued row carries from the scheduler's span to the worker's run: a W3C
//! `traceparent` (`00-{trace id}-{span id}-{flags}`), opaque to core and to the stores. With the
//! `otel` feature it is read from and linked through `tracing-opentelemetry`; without it there is
//! none, and no OpenTelemetry crate is built.

use tracing::Span;

/// The `traceparent` of `span`, if an OpenTelemetry layer records it.
#[cfg(feature = "otel")]
pub(crate) fn traceparent(span: &Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        )
    })
}

/// Links `span` to the span `traceparent` names; a malformed one is ignored.
#[cfg(feature = "otel")]
pub(crate) fn link(span: &Span, traceparent: &str) {
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    if let Some(remote) = parse(traceparent) {
        span.add_link(remote);
    }
}

/// The span context of a version-00 `traceparent`.
#[cfg(feature = "otel")]
fn parse(traceparent: &str) -> Option<opentelemetry::trace::SpanContext> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

    let mut parts = traceparent.split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || parts.next().is_some() || trace.len() != 32 || span.len() != 16 {
        return None;
    }
    let context = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

/// Without the `otel` feature no span has a trace context.
#[cfg(not(feature = "otel"))]
pub(crate) fn traceparent(_span: &Span) -> Option<String> {
    None
}

/// Without the `otel` feature there is nothing to link.
#[cfg(not(feature = "otel"))]
pub(crate) fn link(_span: &Span, _traceparent: &str) {}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use super::parse;

    #[test]
    fn a_traceparent_is_parsed_and_a_malformed_one_is_not() {
        let good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let context = parse(good).expect("valid");
        assert_eq!(
            context.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(context.span_id().to_string(), "b7ad6b7169203331");
        assert!(context.is_sampled() && context.is_remote());
        for bad in [
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }
}
