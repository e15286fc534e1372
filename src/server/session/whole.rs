//! What goes out to clients goes out whole: the objects the handler lists from the catalogs
//! (the tools of alwaysLoad servers, the upstreams' prompts, resources and templates) carry
//! every field their server sent, which rmcp's types would drop (see [`crate::verbatim`]), and
//! they are completed on the way out. rmcp serializes what a handler returns itself, so this
//! happens after it: on the stdio transport ([`Whole`]) and on HTTP response bodies
//! ([`whole_bodies`]).

use std::future::Future;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use http::header;
use rmcp::model::{ClientJsonRpcMessage, CustomResult, ServerJsonRpcMessage, ServerResult};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use tokio_util::bytes::Bytes;

use crate::verbatim;

/// A server transport that sends list results with their objects completed.
pub struct Whole<T>(pub T);

impl<T: Transport<RoleServer>> Transport<RoleServer> for Whole<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.0.send(whole(item))
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}

/// `message` with the objects of a list result completed; as it is when it is no list result
/// or none of its objects carries anything.
fn whole(message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
    let ServerJsonRpcMessage::Response(mut reply) = message else {
        return message;
    };
    let carries = match &reply.result {
        ServerResult::ListToolsResult(list) => list.tools.iter().any(|t| t.meta.is_some()),
        ServerResult::ListPromptsResult(list) => list.prompts.iter().any(|p| p.meta.is_some()),
        ServerResult::ListResourcesResult(list) => list.resources.iter().any(|r| r.meta.is_some()),
        ServerResult::ListResourceTemplatesResult(list) => {
            list.resource_templates.iter().any(|t| t.meta.is_some())
        }
        _ => false,
    };
    if carries {
        let mut result = serde_json::to_value(&reply.result).expect("a result serializes");
        verbatim::complete_all(&mut result);
        reply.result = ServerResult::CustomResult(CustomResult(result));
    }
    ServerJsonRpcMessage::Response(reply)
}

/// Axum middleware for `/mcp`: the messages of a response body (a JSON body, or each event
/// of an event stream, which rmcp writes one to a frame) with their objects completed.
/// Messages with nothing carried pass as they are, byte for byte.
pub async fn whole_bodies(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    let (mut parts, body) = response.into_parts();
    match kind.as_deref() {
        Some("application/json") => {
            let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
                return Response::from_parts(parts, Body::empty());
            };
            let completed = std::str::from_utf8(&bytes)
                .ok()
                .and_then(verbatim::complete_text);
            let Some(text) = completed else {
                return Response::from_parts(parts, Body::from(bytes));
            };
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(text))
        }
        Some("text/event-stream") => {
            let events = body.into_data_stream().map(|frame| frame.map(event));
            Response::from_parts(parts, Body::from_stream(events))
        }
        _ => Response::from_parts(parts, body),
    }
}

/// One event of an event stream with the message on its `data:` line completed.
fn event(frame: Bytes) -> Bytes {
    let Ok(text) = std::str::from_utf8(&frame) else {
        return frame;
    };
    let mut changed = false;
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| match line.strip_prefix("data:") {
            Some(data) => match verbatim::complete_text(data.trim_start()) {
                Some(message) => {
                    changed = true;
                    format!("data: {message}")
                }
                None => line.to_owned(),
            },
            None => line.to_owned(),
        })
        .collect();
    if changed {
        Bytes::from(lines.join("\n"))
    } else {
        frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ListPromptsResult, ListToolsResult, Prompt, RequestId, Tool};
    use serde_json::json;

    fn reply(result: ServerResult) -> ServerJsonRpcMessage {
        ServerJsonRpcMessage::response(result, RequestId::Number(1))
    }

    #[test]
    fn listed_objects_go_out_with_every_field_they_carry() {
        let mut sent = json!({"name": "k8s-diagnose", "arguments": [
            {"name": "namespace", "required": false, "default": "all"}]});
        verbatim::carry(&mut sent);
        let mut prompt: Prompt = serde_json::from_value(sent).unwrap();
        prompt.name = "kubernetes__k8s-diagnose".into();
        let list = ListPromptsResult::with_all_items(vec![prompt]);
        let message = reply(ServerResult::ListPromptsResult(list));
        let expected = json!([{"name": "kubernetes__k8s-diagnose", "arguments": [
            {"name": "namespace", "required": false, "default": "all"}]}]);

        // On stdio, as a message; over HTTP, as an event of a stream.
        let out = serde_json::to_value(whole(message.clone())).unwrap();
        assert_eq!(out["result"]["prompts"], expected);
        let frame = format!(
            "data: {}\nid: 3\n\n",
            serde_json::to_string(&message).unwrap()
        );
        let sent = event(Bytes::from(frame));
        let text = std::str::from_utf8(&sent).unwrap();
        assert!(text.ends_with("\nid: 3\n\n"), "{text}");
        let data: serde_json::Value =
            serde_json::from_str(text.lines().next().unwrap().strip_prefix("data: ").unwrap())
                .unwrap();
        assert_eq!(data["result"]["prompts"], expected);

        let plain: Tool =
            serde_json::from_value(json!({"name": "t", "inputSchema": {"type": "object"}}))
                .unwrap();
        let list = reply(ServerResult::ListToolsResult(
            ListToolsResult::with_all_items(vec![plain]),
        ));
        let ServerJsonRpcMessage::Response(out) = whole(list) else {
            panic!("a reply")
        };
        assert!(
            matches!(out.result, ServerResult::ListToolsResult(_)),
            "nothing carried: the result as it was"
        );
        let frame = Bytes::from_static(b"data: {\"jsonrpc\":\"2.0\"}\n\n");
        assert_eq!(event(frame.clone()), frame);
    }
}
