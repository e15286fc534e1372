//! What every upstream transport (stdio, legacy SSE, streamable HTTP) does with what it sends:
//! a progress token only where its caller wants progress ([`Outgoing`]); and with what it reads:
//! one message is at most `maxMessageMb`, read no further past it; lone surrogate escapes
//! read as U+FFFD; a reply that still cannot be read fails its request at once instead of
//! leaving it to the timeout; the items of a list reply carry themselves as sent (see
//! [`crate::verbatim`]). And why a transport gave up, for the error that reports it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex;
use std::task::{Context, Poll, ready};

use futures::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, CustomResult, ErrorData, GetExtensions, MetaObject, RequestId,
    RequestMetaObject, ServerJsonRpcMessage, ServerResult, Tool,
};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use serde_json::Value;
use tokio_util::bytes::Bytes;

use crate::surrogates::replace_lone;
use crate::verbatim;

/// The `_meta` key of a request whose caller wants the upstream's progress: meta-server's own,
/// taken out before the request goes out (see [`Outgoing`]).
const WANTS_PROGRESS: &str = "meta-server/wantsProgress";

/// What marks a request as one whose caller wants progress (rmcp's request options `meta`).
pub fn wants_progress() -> RequestMetaObject {
    let mut meta = MetaObject::new();
    meta.0.insert(WANTS_PROGRESS.to_owned(), Value::Bool(true));
    meta.into()
}

/// A client transport whose requests carry a progress token only where their caller wants
/// progress ([`wants_progress`]): rmcp gives every request one, lists included, which asks
/// servers for progress nobody reads. A request left with an empty `_meta` goes without one: a
/// server of both revisions reads any `_meta` on `initialize` as a 2026-07-28 request.
pub struct Outgoing<T>(pub T);

impl<T: Transport<RoleClient>> Transport<RoleClient> for Outgoing<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        mut item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &mut item {
            let extensions = request.request.extensions_mut();
            if let Some(RequestMetaObject(MetaObject(meta))) = extensions.get_mut() {
                if meta.shift_remove(WANTS_PROGRESS).is_none() {
                    meta.shift_remove("progressToken");
                }
                if meta.is_empty() {
                    extensions.remove::<RequestMetaObject>();
                }
            }
        }
        self.0.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.0.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.0.close()
    }
}

/// Why a connection's transport gave up on it (or refused a request), told to whoever
/// reports the failure; the first reason is kept.
#[derive(Clone, Default)]
pub struct Faults(Arc<Mutex<Option<String>>>);

impl Faults {
    pub fn note(&self, why: String) {
        tracing::warn!("upstream transport: {why}");
        let mut fault = self.0.lock();
        if fault.is_none() {
            *fault = Some(why);
        }
    }

    pub fn get(&self) -> Option<String> {
        self.0.lock().clone()
    }

    pub fn take(&self) -> Option<String> {
        self.0.lock().take()
    }
}

/// The fault of a message over `limit` bytes: the size and the key to raise.
pub fn too_large(limit: usize) -> String {
    format!(
        "sent a message larger than {} MiB, the most meta-server reads of one message; it stopped reading it and dropped the connection. If the server's results are legitimately this big, raise \"maxMessageMb\" in its config entry (or metaServer.maxMessageMb)",
        limit >> 20
    )
}

/// `text` whole up to `max_chars` characters, else its start and how long it was: what an
/// error repeats of what a server sent never crowds out what the error says.
pub fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}… ({} characters)", &text[..end], text.chars().count()),
    }
}

/// One message as read (a stdio line, an SSE event's data), in place: lone surrogate escapes
/// become U+FFFD escapes (same length). The items of a list reply carry themselves as the
/// server sent them ([`carrying_items`]). A reply that is still not a JSON-RPC message becomes
/// an error reply to its request when its id can be read, so the call fails now; anything
/// else unreadable is dropped (`None`).
pub fn decode(message: &mut [u8]) -> Option<ServerJsonRpcMessage> {
    let message = match message.strip_prefix(b"\xEF\xBB\xBF") {
        Some(_) => &mut message[3..],
        None => message,
    };
    replace_lone(message);
    let error = match serde_json::from_slice::<ServerJsonRpcMessage>(message) {
        Ok(parsed) => return Some(without_malformed_tools(carrying_items(parsed, message))),
        Err(e) => e,
    };
    // Bytes that are not UTF-8 inside strings: read as U+FFFD too.
    let lossy = String::from_utf8_lossy(message);
    if let std::borrow::Cow::Owned(text) = &lossy
        && let Ok(parsed) = serde_json::from_str::<ServerJsonRpcMessage>(text)
    {
        return Some(without_malformed_tools(carrying_items(
            parsed,
            text.as_bytes(),
        )));
    }
    let reply = serde_json::from_str::<Value>(&lossy)
        .ok()
        .filter(|v| v.get("method").is_none() && (v.get("result").or(v.get("error")).is_some()));
    let id = reply.and_then(|mut v| serde_json::from_value::<RequestId>(v["id"].take()).ok());
    let Some(id) = id else {
        tracing::debug!("dropping an upstream message that is not JSON-RPC: {error}");
        return None;
    };
    tracing::warn!("an upstream reply could not be read: {error}");
    Some(ServerJsonRpcMessage::error(
        ErrorData::internal_error(
            format!("its reply could not be read as JSON-RPC ({error})"),
            None,
        ),
        Some(id),
    ))
}

/// The key of the items of a list reply (`tools`, `prompts`, `resources`,
/// `resourceTemplates`); `None` for any other message.
fn listed_items(message: &ServerJsonRpcMessage) -> Option<&'static str> {
    let ServerJsonRpcMessage::Response(reply) = message else {
        return None;
    };
    Some(match &reply.result {
        ServerResult::ListToolsResult(_) => "tools",
        ServerResult::ListPromptsResult(_) => "prompts",
        ServerResult::ListResourcesResult(_) => "resources",
        ServerResult::ListResourceTemplatesResult(_) => "resourceTemplates",
        // A tool list with malformed tools (see `without_malformed_tools`).
        ServerResult::CustomResult(CustomResult(result))
            if result.get("tools").is_some_and(Value::is_array) =>
        {
            "tools"
        }
        _ => return None,
    })
}

/// Whether `message` is a list reply, whose items [`decode`] makes carry themselves.
pub fn is_list_reply(message: &ServerJsonRpcMessage) -> bool {
    listed_items(message).is_some()
}

/// `message`, read from `text`: when it is a list reply, each item carries itself as the
/// server sent it, for the catalog (rmcp's types keep only the fields they know); any other
/// message as it is.
fn carrying_items(message: ServerJsonRpcMessage, text: &[u8]) -> ServerJsonRpcMessage {
    let Some(key) = listed_items(&message) else {
        return message;
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(text) else {
        return message;
    };
    if let Some(Value::Array(items)) = value.get_mut("result").and_then(|r| r.get_mut(key)) {
        items.iter_mut().for_each(verbatim::carry);
    }
    serde_json::from_value(value).unwrap_or(message)
}

/// A reply that reads as a custom result only because entries of its `tools` array are not
/// MCP tools: the same reply as a tool list without them (each one logged), so one malformed
/// tool never hides the others. Any other message is returned as it is.
fn without_malformed_tools(message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
    let ServerJsonRpcMessage::Response(mut reply) = message else {
        return message;
    };
    if let ServerResult::CustomResult(CustomResult(result)) = &reply.result
        && let Some(Value::Array(tools)) = result.get("tools")
    {
        let mut result = result.clone();
        let kept: Vec<Value> = tools
            .iter()
            .filter(|tool| match serde_json::from_value::<Tool>((*tool).clone()) {
                Ok(_) => true,
                Err(e) => {
                    let name = tool.get("name").map(Value::to_string).unwrap_or_default();
                    tracing::warn!(tool = %shorten(&name, 100), "skipping a malformed tool in tools/list: {e}");
                    false
                }
            })
            .cloned()
            .collect();
        result["tools"] = Value::Array(kept);
        if let Ok(list @ ServerResult::ListToolsResult(_)) = serde_json::from_value(result) {
            reply.result = list;
        }
    }
    ServerJsonRpcMessage::Response(reply)
}

/// An SSE byte stream that fails once one event (the bytes since the last blank line) passes
/// `limit`, before the SSE parser buffers more of it; the fault is noted.
pub struct BoundedEvents<S> {
    inner: S,
    limit: usize,
    event: usize,
    line: usize,
    after_cr: bool,
    failed: bool,
    faults: Faults,
}

impl<S> BoundedEvents<S> {
    pub fn new(inner: S, limit: usize, faults: Faults) -> Self {
        Self {
            inner,
            limit,
            event: 0,
            line: 0,
            after_cr: false,
            failed: false,
            faults,
        }
    }

    /// Counts `chunk`; false once the current event is over the limit.
    fn observe(&mut self, chunk: &[u8]) -> bool {
        let mut rest = chunk;
        while !rest.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
                None => {
                    self.line += rest.len();
                    self.event += rest.len();
                    break;
                }
                Some(at) => {
                    self.line += at;
                    self.event += at;
                    if self.event > self.limit {
                        break;
                    }
                    if self.line == 0 {
                        self.event = 0;
                    }
                    self.line = 0;
                    self.after_cr = rest[at] == b'\r';
                    rest = &rest[at + 1..];
                }
            }
        }
        self.event <= self.limit
    }
}

impl<S, E> Stream for BoundedEvents<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        match ready!(Pin::new(&mut this.inner).poll_next(cx)) {
            Some(Ok(chunk)) if this.observe(&chunk) => Poll::Ready(Some(Ok(chunk))),
            Some(Ok(_)) => {
                this.failed = true;
                this.faults.note(too_large(this.limit));
                Poll::Ready(Some(Err(std::io::Error::other(format!(
                    "an event passed {} bytes",
                    this.limit
                )))))
            }
            Some(Err(e)) => Poll::Ready(Some(Err(std::io::Error::other(e)))),
            None => Poll::Ready(None),
        }
    }
}

/// A client for one upstream's requests that never follows a redirect to another origin
/// (scheme, host and port), so configured headers, the token and message bodies only ever
/// go to the configured server. Same-origin 307 and 308 are followed (a few hops); with
/// `see_other` (plain GETs) 301, 302 and 303 too. A refused redirect is noted in `faults`.
pub fn http_client(server: &str, faults: &Faults, see_other: bool) -> reqwest::Client {
    const MAX_HOPS: usize = 5;
    let server = server.to_owned();
    let faults = faults.clone();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        let origin = |url: &reqwest::Url| url.origin().ascii_serialization();
        let Some(from) = attempt.previous().first().map(origin) else {
            return attempt.stop();
        };
        let to = origin(attempt.url());
        if to != from {
            let why = format!(
                "redirected a request from {from} to {to}, another origin; meta-server does not follow redirects to another origin, so the headers, token and messages meant for the server go nowhere else. If the server has moved, set its \"url\" in the config to the new address"
            );
            faults.note(why);
            return attempt.error(format!(
                "server \"{server}\" redirected to another origin ({to})"
            ));
        }
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        if !keeps_body && !see_other {
            attempt.stop()
        } else if attempt.previous().len() > MAX_HOPS {
            attempt.error(format!("more than {MAX_HOPS} redirects"))
        } else {
            attempt.follow()
        }
    });
    crate::auth::ensure_tls();
    reqwest::Client::builder()
        .redirect(policy)
        .build()
        .expect("an HTTP client with only a redirect policy set builds")
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn text(message: &ServerJsonRpcMessage) -> String {
        serde_json::to_string(message).unwrap()
    }

    #[test]
    fn lone_surrogates_read_as_replacement_and_unreadable_replies_fail_their_request() {
        let mut line =
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a\ud800b"}]}}"#
                .to_vec();
        let got = text(&decode(&mut line).expect("read"));
        assert!(got.contains("a\u{FFFD}b"), "{got}");

        // Not UTF-8 inside a string: U+FFFD as well.
        let mut line = b"{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"x\xFFy\"}]}}".to_vec();
        assert!(text(&decode(&mut line).expect("read")).contains("x\u{FFFD}y"));

        // A reply of the wrong shape: an error for its id, at once.
        let mut line = br#"{"jsonrpc":"2.0","id":"r1","error":"broken"}"#.to_vec();
        let ServerJsonRpcMessage::Error(error) = decode(&mut line).expect("an error reply") else {
            panic!("expected an error reply");
        };
        assert_eq!(error.id, Some(RequestId::String("r1".into())));
        assert!(error.error.message.contains("could not be read"));

        // Garbage, and notifications of unknown shape, are dropped.
        assert!(decode(&mut b"not json".to_vec()).is_none());
        assert!(decode(&mut br#"{"jsonrpc":"2.0","method":7}"#.to_vec()).is_none());
    }

    #[test]
    fn a_malformed_tool_never_hides_the_others() {
        let mut line = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[
            {"name":"ok","inputSchema":{"type":"object"}},
            {"name":"no_schema"},
            {"name":5,"inputSchema":{"type":"object"}},
            "not a tool",
            {"name":"also_ok","inputSchema":{"type":"object"},"x-extra":1}
        ],"nextCursor":"2"}}"#
            .to_vec();
        let ServerJsonRpcMessage::Response(reply) = decode(&mut line).expect("read") else {
            panic!("expected a reply");
        };
        let rmcp::model::ServerResult::ListToolsResult(list) = reply.result else {
            panic!("expected a tool list: {:?}", reply.result);
        };
        let names: Vec<_> = list.tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, ["ok", "also_ok"]);
        assert_eq!(list.next_cursor.as_deref(), Some("2"));
    }

    #[test]
    fn listed_items_keep_every_field_their_server_sent() {
        let tool = serde_json::json!({"name": "click", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": false, "category": "input"},
            "execution": {"taskSupport": "forbidden"}});
        let prompt = serde_json::json!({"name": "k8s-diagnose", "arguments": [
            {"name": "namespace", "required": false, "default": "all"}]});
        let reply = |key: &str, item: &Value| {
            let text = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {key: [item]}});
            decode(&mut text.to_string().into_bytes()).expect("read")
        };
        let ServerJsonRpcMessage::Response(tools) = reply("tools", &tool) else {
            panic!("a reply")
        };
        let ServerResult::ListToolsResult(list) = tools.result else {
            panic!("a tool list")
        };
        assert_eq!(verbatim::take(&list.tools[0]), tool);
        let ServerJsonRpcMessage::Response(prompts) = reply("prompts", &prompt) else {
            panic!("a reply")
        };
        let ServerResult::ListPromptsResult(list) = prompts.result else {
            panic!("a prompt list")
        };
        assert_eq!(verbatim::take(&list.prompts[0]), prompt);
        // A malformed tool beside it is still skipped, the others still whole.
        let text = serde_json::json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [tool, {"name": 5}]}});
        let ServerJsonRpcMessage::Response(reply) =
            decode(&mut text.to_string().into_bytes()).unwrap()
        else {
            panic!("a reply")
        };
        let ServerResult::ListToolsResult(list) = reply.result else {
            panic!("a tool list")
        };
        assert_eq!(list.tools.len(), 1);
        assert_eq!(verbatim::take(&list.tools[0]), tool);
    }

    #[tokio::test]
    async fn an_event_over_the_limit_fails_the_stream_and_notes_why() {
        let chunks = |parts: &[&str]| {
            futures::stream::iter(
                parts
                    .iter()
                    .map(|p| Ok::<_, std::io::Error>(Bytes::from(p.to_string())))
                    .collect::<Vec<_>>(),
            )
        };
        // Events under the limit pass, however many; blank lines (LF, CRLF, CR) reset.
        let faults = Faults::default();
        let fine = chunks(&[
            "data: 12345\n\n",
            "data: 12345\r\n\r",
            "\ndata: 1234",
            "5\r\r",
        ]);
        let passed: Vec<_> = BoundedEvents::new(fine, 11, faults.clone()).collect().await;
        assert!(passed.iter().all(Result::is_ok));
        assert!(faults.get().is_none());
        // One event over it, split across chunks and lines: an error, then the end.
        let big = chunks(&["data: 12", "34\ndata: 5", "6789\n\n", "data: more\n\n"]);
        let got: Vec<_> = BoundedEvents::new(big, 16, faults.clone()).collect().await;
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].is_ok() && got[1].is_err());
        assert!(faults.get().unwrap().contains("maxMessageMb"));
    }
}
