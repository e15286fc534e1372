//! W3C trace context (`traceparent`, `tracestate`) in and out: taken from a client request's
//! `_meta` (SEP-414) or, failing that, its HTTP headers, and put into the `_meta` of the
//! requests sent upstream, whose HTTP transport repeats it as headers.

use std::collections::HashMap;

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rmcp::model::MetaObject;
use serde_json::Value;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C trace context keys, in `_meta` and as HTTP headers.
const KEYS: [&str; 2] = ["traceparent", "tracestate"];

/// A `_meta` object read as a carrier.
struct Meta<'a>(&'a MetaObject);

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// A `_meta` object written as a carrier.
struct MetaOut<'a>(&'a mut MetaObject);

impl Injector for MetaOut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if !value.is_empty() {
            self.0.insert(key.to_owned(), Value::String(value));
        }
    }
}

/// HTTP headers read as a carrier.
struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// Makes the trace context of a client request the parent of `span`: its `_meta`'s if that
/// holds a valid `traceparent`, else its HTTP headers'. Nothing when telemetry is off.
pub fn adopt_parent(span: &tracing::Span, meta: &MetaObject, headers: Option<&HeaderMap>) {
    if !super::enabled() {
        return;
    }
    let propagator = TraceContextPropagator::new();
    let mut parent = propagator.extract(&Meta(meta));
    if !parent.span().span_context().is_valid()
        && let Some(headers) = headers
    {
        parent = propagator.extract(&Headers(headers));
    }
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// Puts the trace context of `span` into `meta`, the `_meta` of a request sent upstream.
/// Nothing when telemetry is off.
pub fn inject(span: &tracing::Span, meta: &mut MetaObject) {
    if !super::enabled() {
        return;
    }
    let context = span.context();
    if context.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&context, &mut MetaOut(meta));
    }
}

/// Repeats the trace context in an outgoing request's `_meta` as HTTP headers of the POST
/// that carries it, so that an HTTP upstream's own tracing (or a proxy's) sees it too.
pub fn mirror_headers(meta: &MetaObject, headers: &mut HashMap<HeaderName, HeaderValue>) {
    for key in KEYS {
        let value = meta
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty());
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(HeaderName::from_static(key), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_context_in_meta_becomes_headers() {
        let mut meta = MetaObject::new();
        meta.set_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        meta.set_tracestate("rojo=00f067aa0ba902b7");
        meta.insert("other".into(), Value::from(1));
        let mut headers = HashMap::new();
        mirror_headers(&meta, &mut headers);
        assert_eq!(headers.len(), 2);
        assert_eq!(
            headers[&HeaderName::from_static("traceparent")],
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        let mut none = HashMap::new();
        mirror_headers(&MetaObject::new(), &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn a_bad_traceparent_is_no_parent() {
        let mut meta = MetaObject::new();
        meta.set_traceparent("00-zz-00f067aa0ba902b7-01");
        let parent = TraceContextPropagator::new().extract(&Meta(&meta));
        assert!(!parent.span().span_context().is_valid());
    }
}
