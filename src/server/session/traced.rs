//! The span of each MCP request a client sends, as OpenTelemetry names it (`mcp.method.name`,
//! `gen_ai.tool.name`, ...) plus meta-server's own (`meta_server.server`, `.tool`, `.token`,
//! `.outcome`); its parent is the client's trace context (`_meta`, else the HTTP headers).
//! Exported by [`crate::telemetry`]; with telemetry off the span is disabled and costs nothing.

use rmcp::ErrorData as McpError;
use rmcp::service::{RequestContext, RoleServer};
use tracing::field::Empty;
use tracing::{Instrument, Span};

use super::principal::principal;
use crate::library::SEPARATOR;
use crate::telemetry::{self, TARGET};

/// A span for a request of `method` about `target` (a tool, prompt or resource), the client's
/// trace context its parent.
pub(super) fn request(
    cx: &RequestContext<RoleServer>,
    method: &'static str,
    target: Option<&str>,
) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "mcp.request",
        "otel.name" = %name(method, target),
        "otel.kind" = "server",
        "otel.status_code" = Empty,
        "mcp.method.name" = method,
        "mcp.session.id" = Empty,
        "jsonrpc.request.id" = %cx.id,
        "gen_ai.tool.name" = Empty,
        "gen_ai.prompt.name" = Empty,
        "mcp.resource.uri" = Empty,
        "meta_server.token" = Empty,
        "meta_server.server" = Empty,
        "meta_server.tool" = Empty,
        "meta_server.outcome" = Empty,
        "error.type" = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some(target) = target {
        let field = match method {
            "tools/call" => "gen_ai.tool.name",
            "prompts/get" => "gen_ai.prompt.name",
            _ => "mcp.resource.uri",
        };
        span.record(field, target);
    }
    if let Some(token) = principal(&cx.extensions) {
        span.record("meta_server.token", &*token);
    }
    let parts = cx.extensions.get::<http::request::Parts>();
    let session = parts.and_then(|p| p.headers.get("mcp-session-id")?.to_str().ok());
    if let Some(session) = session {
        span.record("mcp.session.id", session);
    }
    telemetry::adopt_parent(&span, &cx.meta, parts.map(|p| &p.headers));
    span
}

/// Runs `request` in `span`, recording how it ended (a JSON-RPC error is a `protocol_error`).
/// The request's future is boxed: inlined into the handler's, the debug build's `prompts/get`
/// (with screening and pinning of pass-through prompts) overflowed a worker's stack.
pub(super) async fn within<T>(
    span: Span,
    request: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let answer = Box::pin(request.instrument(span.clone())).await;
    ended(&span, answer.as_ref().err().map(|_| "protocol_error"));
    answer
}

/// Names a `tools/call` span after the tool it calls through `call_tool` (`arguments.name`),
/// before the span is entered (its name is fixed then).
pub(super) fn name_call(span: &Span, arguments: Option<&rmcp::model::JsonObject>) {
    let called = arguments.and_then(|a| a.get("name")?.as_str());
    if let Some(called) = called.filter(|_| !span.is_disabled()) {
        span.record(
            "otel.name",
            format!("tools/call {}", crate::echo::echo(called)),
        );
    }
}

/// Names the upstream tool a `tools/call` runs (`<server>__<tool>`), and its server.
pub(super) fn tool(span: &Span, qualified: &str) {
    if span.is_disabled() {
        return;
    }
    span.record("meta_server.tool", qualified);
    if let Some((server, _)) = qualified.split_once(SEPARATOR) {
        span.record("meta_server.server", server);
    }
}

/// Records how the request ended: `ok`, or the kind of failure.
pub(super) fn ended(span: &Span, failure: Option<&str>) {
    match failure {
        None => {
            span.record("meta_server.outcome", "ok");
        }
        Some(kind) => {
            span.record("meta_server.outcome", "error");
            span.record("error.type", kind);
            span.record("otel.status_code", "ERROR");
        }
    }
}

/// `<method> <target>`, the span name the OpenTelemetry MCP conventions give.
fn name(method: &str, target: Option<&str>) -> String {
    match target {
        Some(target) if method != "resources/read" => format!("{method} {target}"),
        _ => method.to_owned(),
    }
}
