//! The streamable-HTTP client under rmcp's transport, with one ordering rule: after an
//! `initialize` answered with a session id, requests wait (briefly, once) until the session's
//! notification stream (the GET that rmcp opens in the background) is answered, so the
//! server's notifications and stream resumptions are not raced by the first request. Its
//! event streams are read as [`wire::decode`] says (a JSON body of several lines, as some
//! servers stream one, as such a stream), and what rmcp refuses (a message over the size
//! limit, a reply it cannot read) is noted as the connection's fault.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue, StatusCode, header};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage};
use rmcp::transport::WWWAuthenticateParams;
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpClient,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};
use tokio::sync::watch;

use super::wire::{self, BoundedEvents, Faults};

/// Longest wait of the first request for the notification stream; servers with a session but
/// no GET support cost this once.
const STREAM_WAIT: Duration = Duration::from_millis(1000);

/// `C` with requests held back until the first GET stream is answered.
#[derive(Clone)]
pub struct Ordered<C> {
    inner: C,
    /// False from an `initialize` answered with a session id until its GET stream is answered
    /// (or the wait gave up): a sessionless server (a 2026-07-28 one, probed with
    /// `server/discover`) opens no such stream, so nothing waits for it.
    settled: Arc<watch::Sender<bool>>,
    /// The largest message read, in bytes (rmcp enforces it; this names it in the fault).
    limit: usize,
    faults: Faults,
}

impl<C> Ordered<C> {
    pub fn new(inner: C, limit: usize, faults: Faults) -> Self {
        Self {
            inner,
            settled: Arc::new(watch::Sender::new(true)),
            limit,
            faults,
        }
    }

    /// `events` with lone surrogate escapes read as U+FFFD and unreadable replies turned into
    /// errors of their requests; an event over the limit is noted as the fault.
    fn events(
        &self,
        events: BoxStream<'static, Result<Sse, SseError>>,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let limit = self.limit;
        let faults = self.faults.clone();
        events
            .map(move |event| match event {
                Ok(mut event) => {
                    if let Some(data) = event.data.take() {
                        event.data = Some(readable(data));
                    }
                    Ok(event)
                }
                Err(e) => {
                    if e.to_string().contains("exceeded the maximum size") {
                        faults.note(wire::too_large(limit));
                    }
                    Err(e)
                }
            })
            .boxed()
    }

    /// Notes what rmcp refused of a POST's answer.
    fn note<E: std::error::Error + Send + Sync + 'static>(
        &self,
        response: Result<StreamableHttpPostResponse, StreamableHttpError<E>>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<E>> {
        match response {
            Ok(StreamableHttpPostResponse::Sse(events, session)) => Ok(
                StreamableHttpPostResponse::Sse(self.events(events), session),
            ),
            Err(e) => {
                match &e {
                    StreamableHttpError::ResponseBodyTooLarge { .. } => {
                        self.faults.note(wire::too_large(self.limit));
                    }
                    StreamableHttpError::UnexpectedServerResponse(why)
                        if why.starts_with("could not parse JSON response") =>
                    {
                        self.faults.note(format!(
                            "sent a reply meta-server cannot read: {}",
                            wire::shorten(why, 300)
                        ));
                    }
                    _ => {}
                }
                Err(e)
            }
            other => other,
        }
    }

    /// Holds a request back until the notification stream is answered (once, at most
    /// [`STREAM_WAIT`]). Returns whether `message` is the `initialize` request.
    async fn before_post(&self, message: &ClientJsonRpcMessage) -> bool {
        let ClientJsonRpcMessage::Request(request) = message else {
            return false;
        };
        if matches!(request.request, ClientRequest::InitializeRequest(_)) {
            return true;
        }
        let mut settled = self.settled.subscribe();
        let _ = tokio::time::timeout(STREAM_WAIT, settled.wait_for(|done| *done)).await;
        self.settled.send_replace(true);
        false
    }

    /// `headers` with the trace context of `message`'s `_meta` (see [`crate::telemetry`]).
    fn traced(
        message: &ClientJsonRpcMessage,
        mut headers: HashMap<HeaderName, HeaderValue>,
    ) -> HashMap<HeaderName, HeaderValue> {
        let ClientJsonRpcMessage::Request(request) = message else {
            return headers;
        };
        // Where `super::traced::carry` put it: the params' own `_meta`.
        let meta = match &request.request {
            ClientRequest::CallToolRequest(r) => r.params.meta.as_ref(),
            ClientRequest::GetPromptRequest(r) => r.params.meta.as_ref(),
            ClientRequest::ReadResourceRequest(r) => r.params.meta.as_ref(),
            _ => None,
        };
        if let Some(meta) = meta {
            crate::telemetry::mirror_headers(meta, &mut headers);
        }
        headers
    }

    /// An `initialize` answered with a session id gets a notification stream: requests wait
    /// for it from now on.
    fn after_post<E: std::error::Error + Send + Sync + 'static>(
        &self,
        initialize: bool,
        response: &Result<StreamableHttpPostResponse, StreamableHttpError<E>>,
    ) {
        let session = matches!(
            response,
            Ok(StreamableHttpPostResponse::Json(_, Some(_))
                | StreamableHttpPostResponse::Sse(_, Some(_)))
        );
        if initialize && session {
            self.settled.send_replace(false);
        }
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Ordered<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let initialize = self.before_post(&message).await;
        let custom_headers = Self::traced(&message, custom_headers);
        let response = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.after_post(initialize, &response);
        self.note(response)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let initialize = self.before_post(&message).await;
        let custom_headers = Self::traced(&message, custom_headers);
        let response = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.after_post(initialize, &response);
        self.note(response)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let initialize = self.before_post(&message).await;
        let custom_headers = Self::traced(&message, custom_headers);
        let response = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.after_post(initialize, &response);
        self.note(response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.settled.send_replace(true);
        stream.map(|events| self.events(events))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.settled.send_replace(true);
        stream.map(|events| self.events(events))
    }
}

/// An event's data as rmcp will read it: lone surrogate escapes as U+FFFD, a list reply's
/// items carrying themselves, and a reply that still is not JSON-RPC as an error reply to its
/// request (see [`wire::decode`]).
fn readable(data: String) -> String {
    let mut bytes = data.into_bytes();
    if crate::surrogates::replace_lone(&mut bytes) {
        tracing::debug!("an upstream event held lone surrogate escapes; read as U+FFFD");
    }
    let read = serde_json::from_slice::<ServerJsonRpcMessage>(&bytes);
    if !read.is_ok_and(|message| !wire::is_list_reply(&message))
        && let Some(message) = wire::decode(&mut bytes)
        && let Ok(text) = serde_json::to_string(&message)
    {
        return text;
    }
    // Only ASCII hex digits were rewritten: still UTF-8.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// reqwest under rmcp's streamable-HTTP transport. A request's answer is read here, so a JSON
/// body gets what stdio lines and SSE events get ([`wire::decode`]: U+FFFD for lone surrogate
/// escapes, an error reply for what still cannot be read); notifications and responses go
/// through rmcp's own reqwest client as they are. `http` is built by [`wire::http_client`].
#[derive(Clone)]
pub struct Upstream {
    pub http: reqwest::Client,
    pub faults: Faults,
}

/// Headers rmcp sets itself (`MCP-Protocol-Version` it passes as a custom header).
const RESERVED_HEADERS: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];
const SESSION_HEADER: &str = "Mcp-Session-Id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

impl StreamableHttpClient for Upstream {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        if !matches!(message, ClientJsonRpcMessage::Request(_)) {
            return self
                .http
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await;
        }
        let mut request = self
            .http
            .post(uri.as_ref())
            .header(header::ACCEPT, format!("{EVENT_STREAM}, {JSON}"))
            .header(header::CONTENT_TYPE, JSON);
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            if RESERVED_HEADERS.contains(&name.as_str()) {
                return Err(StreamableHttpError::ReservedHeaderConflict(
                    name.to_string(),
                ));
            }
            request = request.header(name, value);
        }
        let session_attached = session_id.is_some();
        if let Some(session_id) = session_id {
            request = request.header(SESSION_HEADER, session_id.as_ref());
        }
        let response = request.body(serde_json::to_vec(&message)?).send().await?;
        read_answer(response, session_attached, limits, &self.faults).await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// The answer to a request POST, as rmcp's reqwest client reads it, except that a JSON body
/// goes through [`wire::decode`] and an event stream is bounded by [`BoundedEvents`].
async fn read_answer(
    response: reqwest::Response,
    session_attached: bool,
    limits: StreamableHttpResponseLimits,
    faults: &Faults,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>> {
    let status = response.status();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    match (status, header(header::WWW_AUTHENTICATE.as_str())) {
        (StatusCode::UNAUTHORIZED, Some(challenge)) => {
            return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                challenge,
            )));
        }
        (StatusCode::FORBIDDEN, Some(challenge)) => {
            let scope = WWWAuthenticateParams::parse(&challenge, response.url()).scope;
            return Err(StreamableHttpError::InsufficientScope(
                InsufficientScopeError::new(challenge, scope),
            ));
        }
        _ => {}
    }
    if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if status == StatusCode::NOT_FOUND && session_attached {
        return Err(StreamableHttpError::SessionExpired);
    }
    let session = header(SESSION_HEADER);
    let content_type = header(header::CONTENT_TYPE.as_str());
    let is = |mime: &str| {
        content_type.as_deref().is_some_and(|ct| {
            ct.split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(mime))
        })
    };
    let (is_json, is_events) = (is(JSON), is(EVENT_STREAM));
    if !status.is_success() {
        let retry_after = header(header::RETRY_AFTER.as_str());
        let body = read_body(response, limits.max_error_response_size, false).await?;
        // A JSON-RPC error in the body answers the request; else the status says what failed.
        if is_json
            && let Ok(error @ ServerJsonRpcMessage::Error(_)) =
                serde_json::from_slice::<ServerJsonRpcMessage>(&body)
        {
            return Ok(StreamableHttpPostResponse::Json(error, session));
        }
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            return Err(HttpStatusError::new(status.as_u16(), retry_after).into());
        }
        let body = String::from_utf8_lossy(&body);
        return Err(StreamableHttpError::UnexpectedServerResponse(
            format!("HTTP {status}: {body}").into(),
        ));
    }
    if is_events {
        let bytes = Box::pin(response.bytes_stream());
        let events = BoundedEvents::new(bytes, limits.max_sse_event_size, faults.clone());
        return Ok(StreamableHttpPostResponse::Sse(
            sse_stream::SseStream::from_bytes_stream(events).boxed(),
            session,
        ));
    }
    if is_json {
        let max = limits.max_json_response_size;
        if response.content_length().is_some_and(|n| n > max as u64) {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        let mut body = read_body(response, max, true).await?;
        if let Some(message) = wire::decode(&mut body) {
            return Ok(StreamableHttpPostResponse::Json(message, session));
        }
        return match json_lines(&body) {
            Some(events) => Ok(StreamableHttpPostResponse::Sse(events, session)),
            None => Err(StreamableHttpError::UnexpectedServerResponse(
                format!(
                    "could not parse JSON response: {}",
                    wire::shorten(&String::from_utf8_lossy(&body), 200)
                )
                .into(),
            )),
        };
    }
    Err(StreamableHttpError::UnexpectedContentType(content_type))
}

/// A JSON body of two or more lines that are each a JSON object, as events: the conformance
/// suite's reference server streams a call's notifications before its reply this way, in
/// one `application/json` body. Tried when the body is not one message; `None` when it is
/// not JSON lines either.
fn json_lines(body: &[u8]) -> Option<BoxStream<'static, Result<Sse, SseError>>> {
    let lines: Vec<&[u8]> = body
        .split(|&b| b == b'\n')
        .map(|line| line.trim_ascii())
        .filter(|line| !line.is_empty())
        .collect();
    let objects = lines.len() > 1
        && lines.iter().all(|line| {
            line.starts_with(b"{") && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
        });
    if !objects {
        return None;
    }
    let events: Vec<Result<Sse, SseError>> = lines
        .into_iter()
        .map(|line| {
            Ok(Sse {
                event: None,
                data: Some(String::from_utf8_lossy(line).into_owned()),
                id: None,
                retry: None,
            })
        })
        .collect();
    Some(futures::stream::iter(events).boxed())
}

/// The body up to `max` bytes: then cut there, or with `whole` an error.
async fn read_body(
    response: reqwest::Response,
    max: usize,
    whole: bool,
) -> Result<Vec<u8>, StreamableHttpError<reqwest::Error>> {
    let mut chunks = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if chunk.len() > max - body.len() {
            if whole {
                return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
            }
            body.extend_from_slice(&chunk[..max - body.len()]);
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
