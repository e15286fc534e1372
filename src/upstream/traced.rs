//! The spans of connecting to an upstream and of each request sent to it, and the trace
//! context those requests carry in their `_meta` (see [`crate::telemetry`]).

use rmcp::model::RequestMetaObject;
use tracing::Span;
use tracing::field::Empty;

use super::UpstreamError;
use crate::telemetry::{self, TARGET};

/// The span of connecting to `server` (a new connection only).
pub(super) fn connect(server: &str) -> Span {
    tracing::info_span!(target: TARGET, "upstream.connect", "meta_server.server" = server)
}

/// The span of a request of `method` about `target` (a tool, prompt or resource URI) sent to
/// `server`: the client side of the upstream's own span.
pub(super) fn request(server: &str, method: &'static str, target: &str) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "upstream.request",
        "otel.name" = Empty,
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "mcp.method.name" = method,
        "gen_ai.tool.name" = Empty,
        "gen_ai.prompt.name" = Empty,
        "mcp.resource.uri" = Empty,
        "meta_server.server" = server,
        "error.type" = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if target.is_empty() {
        span.record("otel.name", method);
        return span;
    }
    let (field, named) = match method {
        "tools/call" => ("gen_ai.tool.name", true),
        "prompts/get" => ("gen_ai.prompt.name", true),
        _ => ("mcp.resource.uri", false),
    };
    span.record(field, target);
    let name = if named {
        format!("{method} {target}")
    } else {
        method.to_owned()
    };
    span.record("otel.name", name);
    span
}

/// `meta` with the trace context of `span` added (the `_meta` of the request it stands for).
pub(super) fn carry(span: &Span, meta: &mut Option<RequestMetaObject>) {
    if span.is_disabled() || !telemetry::enabled() {
        return;
    }
    telemetry::inject(span, meta.get_or_insert_with(RequestMetaObject::new));
}

/// Records that the request of `span` failed.
pub(super) fn failed(span: &Span, error: &UpstreamError) {
    if span.is_disabled() {
        return;
    }
    let kind = match error {
        UpstreamError::Timeout { .. } | UpstreamError::ConnectTimeout { .. } => "timeout",
        UpstreamError::NeedsLogin { .. } => "needs_login",
        _ => "upstream_error",
    };
    span.record("error.type", kind);
    span.record("otel.status_code", "ERROR");
}
