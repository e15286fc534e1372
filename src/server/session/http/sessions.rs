//! Bounding the MCP sessions of `serve --http`: a request that would start a session beyond
//! the cap gets 503 with `Retry-After`; sessions idle for the session idle time end (in the
//! shared store too: each request renews its session there).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use rmcp::model::ProtocolVersion;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::store::SharedSessions;

/// Sessions open at once, by default: about 70 KB each (see BENCHMARKS.md).
pub const DEFAULT_MAX_SESSIONS: usize = 256;
/// A session without requests for this long ends (its client gets 404 and starts anew).
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(15 * 60);
/// What a refused client is told to wait, in seconds.
const RETRY_AFTER_SECS: u64 = 30;

/// The live sessions and those being started, against the cap.
pub(in crate::server) struct SessionCap {
    sessions: Arc<LocalSessionManager>,
    max: usize,
    /// Requests that may start a session and have not been answered yet.
    starting: AtomicUsize,
    /// Sessions kept in the shared store, renewed as they are used.
    shared: Option<Arc<SharedSessions>>,
}

impl SessionCap {
    pub(in crate::server) fn new(
        sessions: Arc<LocalSessionManager>,
        max: usize,
        shared: Option<Arc<SharedSessions>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            sessions,
            max,
            starting: AtomicUsize::new(0),
            shared,
        })
    }
}

/// Counts a request that may start a session for as long as it is being answered.
struct Starting<'a>(&'a AtomicUsize);

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether a request is one of the 2026-07-28 revision, which has no sessions: its
/// `MCP-Protocol-Version` names it and its `Mcp-Method` is not `initialize`. rmcp refuses a
/// request whose body disagrees with either header, so such a request cannot start a session.
fn is_stateless(request: &Request) -> bool {
    let header = |name| request.headers().get(name).and_then(|v| v.to_str().ok());
    let version = header("mcp-protocol-version");
    version.is_some_and(|v| v >= ProtocolVersion::NO_INITIALIZE.as_str())
        && header("mcp-method").is_some_and(|method| method != "initialize")
}

/// Lets a request that could start a session (a POST without `Mcp-Session-Id`) through only
/// while live and starting sessions stay under the cap. A session being started counts
/// twice for a moment, so the cap is never exceeded, even by simultaneous requests.
pub(in crate::server) async fn limit_sessions(
    State(cap): State<Arc<SessionCap>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(session) = request.headers().get("mcp-session-id") {
        if let (Some(shared), Ok(session)) = (&cap.shared, session.to_str()) {
            shared.renew(session);
        }
        return next.run(request).await;
    }
    if request.method() != Method::POST || is_stateless(&request) {
        return next.run(request).await;
    }
    let starting = Starting(&cap.starting);
    let before = cap.starting.fetch_add(1, Ordering::SeqCst);
    let live = cap.sessions.sessions.read().await.len();
    if live + before >= cap.max {
        drop(starting);
        tracing::warn!(
            live,
            max = cap.max,
            "session limit reached; refusing a new session"
        );
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "this server already has its limit of {} sessions; try again later\n",
                cap.max
            ),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
        return response;
    }
    let response = next.run(request).await;
    drop(starting);
    response
}
