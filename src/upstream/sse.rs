//! The legacy HTTP+SSE transport (`"type": "sse"`, protocol 2024-11-05): a GET opens an event
//! stream whose first `endpoint` event names the URL to POST messages to, and every answer
//! arrives on that stream. rmcp 3 has no client for it. One event is read up to the server's
//! `maxMessageMb` and no further; neither request follows a redirect to another origin.

use std::sync::Arc;

use futures::StreamExt;
use http::{HeaderMap, StatusCode, header};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
use rmcp::transport::{AuthClient, AuthError, Transport, WWWAuthenticateParams};
use sse_stream::SseStream;
use tokio::sync::mpsc;

use super::wire::{self, BoundedEvents, Faults};

/// Server messages waiting for the client; the event stream pauses while this is full.
const BACKLOG: usize = 64;

/// What can go wrong on an SSE connection. The 401 and 403 variants carry rmcp's own error
/// types as their source, so `auth_challenge()` finds the challenge as for streamable HTTP.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("HTTP request failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("the server answered HTTP {status} to the {what}")]
    Status { status: u16, what: &'static str },
    #[error("the server requires authorization")]
    AuthRequired(#[source] AuthRequiredError),
    #[error("the server requires more authorization scope")]
    InsufficientScope(#[source] InsufficientScopeError),
    #[error("the event stream ended before naming the endpoint to post messages to")]
    NoEndpoint,
    #[error("the event stream request was answered with {0:?}, not text/event-stream")]
    NotEventStream(String),
    #[error("the endpoint \"{}\" is not a URL on the server's origin", wire::shorten(.0, 200))]
    BadEndpoint(String),
    #[error("cannot get an access token: {0}")]
    Token(#[from] AuthError),
    #[error("cannot encode the message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A connected SSE session: messages go out as POSTs, answers come from the event stream.
pub struct SseTransport {
    http: reqwest::Client,
    endpoint: Arc<str>,
    headers: HeaderMap,
    auth: Option<AuthClient<reqwest::Client>>,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for the server to name its message endpoint.
    /// An event over `limit` bytes ends the stream; why is noted in `faults`.
    pub async fn connect(
        server: &str,
        url: &str,
        headers: HeaderMap,
        auth: Option<AuthClient<reqwest::Client>>,
        limit: usize,
        faults: Faults,
    ) -> Result<Self, SseError> {
        let http = wire::http_client(server, &faults, false);
        let mut request = wire::http_client(server, &faults, true)
            .get(url)
            .headers(headers.clone())
            .header(header::ACCEPT, "text/event-stream");
        if let Some(token) = token(&auth).await? {
            request = request.bearer_auth(token);
        }
        let response = checked(request.send().await?, "event stream request")?;
        let kind = response.headers().get(header::CONTENT_TYPE);
        let kind = kind.and_then(|v| v.to_str().ok()).unwrap_or_default();
        if !kind.starts_with("text/event-stream") {
            return Err(SseError::NotEventStream(kind.to_owned()));
        }
        let bytes = Box::pin(response.bytes_stream());
        let mut events = SseStream::from_bytes_stream(BoundedEvents::new(bytes, limit, faults));
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    break event.data.unwrap_or_default();
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    tracing::debug!("event stream broke before the endpoint: {e}");
                    return Err(SseError::NoEndpoint);
                }
                None => return Err(SseError::NoEndpoint),
            }
        };
        let endpoint = same_origin(url, endpoint.trim())?;
        let (to_client, incoming) = mpsc::channel(BACKLOG);
        let reader = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(e) => {
                        tracing::debug!("event stream ended: {e}");
                        break;
                    }
                };
                if !matches!(event.event.as_deref(), None | Some("message")) {
                    continue;
                }
                let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
                    continue;
                };
                let Some(message) = wire::decode(&mut data.into_bytes()) else {
                    continue;
                };
                if to_client.send(message).await.is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            http,
            endpoint: endpoint.into(),
            headers,
            auth,
            incoming,
            reader,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let http = self.http.clone();
        let endpoint = self.endpoint.clone();
        let headers = self.headers.clone();
        let auth = self.auth.clone();
        async move { post(&http, &endpoint, headers, auth, &item).await }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}

async fn post(
    http: &reqwest::Client,
    endpoint: &str,
    headers: HeaderMap,
    auth: Option<AuthClient<reqwest::Client>>,
    message: &ClientJsonRpcMessage,
) -> Result<(), SseError> {
    let mut request = http
        .post(endpoint)
        .headers(headers)
        .header(header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(message)?);
    if let Some(token) = token(&auth).await? {
        request = request.bearer_auth(token);
    }
    checked(request.send().await?, "message POST")?;
    Ok(())
}

/// The access token to send, if the server is logged in to.
async fn token(auth: &Option<AuthClient<reqwest::Client>>) -> Result<Option<String>, SseError> {
    let Some(auth) = auth else { return Ok(None) };
    match auth.get_access_token().await {
        Ok(token) => Ok(Some(token)),
        Err(AuthError::AuthorizationRequired) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The response if it is a success; 401 and 403 become authorization errors with the
/// server's `WWW-Authenticate` challenge.
fn checked(response: reqwest::Response, what: &'static str) -> Result<reqwest::Response, SseError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let params = challenge
        .as_deref()
        .map(|c| WWWAuthenticateParams::parse(c, response.url()));
    Err(match (status, challenge, params) {
        (StatusCode::UNAUTHORIZED, challenge, _) => {
            SseError::AuthRequired(AuthRequiredError::new(challenge.unwrap_or_default()))
        }
        (StatusCode::FORBIDDEN, Some(challenge), Some(params))
            if params.is_insufficient_scope() =>
        {
            SseError::InsufficientScope(InsufficientScopeError::new(challenge, params.scope))
        }
        _ => SseError::Status {
            status: status.as_u16(),
            what,
        },
    })
}

/// The endpoint resolved against the stream's URL; it must stay on the same origin, so a
/// server cannot send our headers and token elsewhere.
fn same_origin(base: &str, endpoint: &str) -> Result<String, SseError> {
    let bad = || SseError::BadEndpoint(endpoint.to_owned());
    let base = reqwest::Url::parse(base).map_err(|_| bad())?;
    let joined = base.join(endpoint).map_err(|_| bad())?;
    if joined.origin() != base.origin() {
        return Err(bad());
    }
    Ok(joined.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_on_the_stream_origin_only() {
        let base = "http://127.0.0.1:3001/sse";
        assert_eq!(
            same_origin(base, "/message?sessionId=abc").unwrap(),
            "http://127.0.0.1:3001/message?sessionId=abc"
        );
        assert_eq!(
            same_origin(base, "http://127.0.0.1:3001/m").unwrap(),
            "http://127.0.0.1:3001/m"
        );
        assert!(same_origin(base, "http://evil.example/m").is_err());
        assert!(same_origin(base, "https://127.0.0.1:3001/m").is_err());
    }
}
