//! Serving MCP over streamable HTTP: one shared `State` for every client, one rmcp session per
//! client, an optional bearer token, Host/Origin checks against DNS rebinding, and limits on
//! sessions (`sessions.rs`) and connections (`conn.rs`), and request bodies refused as soon
//! as they pass the limit. With a shared store, sessions are kept there too, so a session
//! started on one replica goes on at any other. `GET /healthz` (no token) and `GET /metrics`
//! (with the token) are for operators.

mod conn;
mod listen;
mod metrics_page;
mod rebinding;
mod resume;
mod sessions;

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State as Extract};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{Settings, TokenConfig};
use crate::server::access::Access;
use crate::store::SharedSessions;

use super::principal::Principal;
use crate::server::State;
use crate::server::metrics::Scope;

/// The one URL path that speaks MCP.
pub const PATH: &str = "/mcp";
/// Liveness and store health, without a token: 200 `ok`, or 503 and why.
pub const HEALTH_PATH: &str = "/healthz";
/// Prometheus metrics, with the token when one is set.
pub const METRICS_PATH: &str = "/metrics";

/// Host header values always accepted: the loopback names.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Browser origins accepted (any port); requests without an `Origin` header always pass.
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// Connections open at once, by default; one more gets a 503 and is closed.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

pub use sessions::{DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE};

/// How long open streams may take to close after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "{addr} is not a loopback address; serving beyond this machine needs --allow-remote and a token (META_SERVER_TOKEN or --token-file)"
    )]
    RemoteNotAllowed { addr: SocketAddr },
    #[error(
        "--allow-remote needs a token so strangers cannot call your tools: set META_SERVER_TOKEN or pass --token-file"
    )]
    RemoteWithoutToken { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Start(#[from] crate::server::session::start::StartError),
}

/// A bearer token; never printed.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    pub fn new(token: String) -> Self {
        Self(token)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}

/// A named token of `metaServer.http.tokens`, its value expanded.
#[derive(Debug)]
pub struct NamedToken {
    pub token: Token,
    pub config: TokenConfig,
}

/// Why a named token cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "metaServer.http.tokens \"{name}\": the token uses ${{{var}}}, which is not set; export {var} (a long random string)"
    )]
    Unset { name: String, var: String },
    #[error("metaServer.http.tokens \"{name}\": the token is empty; export a long random string")]
    Empty { name: String },
    #[error(
        "metaServer.http.tokens \"{name}\": its token is the same as {other}'s; give each holder its own"
    )]
    Shared { name: String, other: String },
}

impl NamedToken {
    /// The configured tokens with their values read from `lookup`; `unnamed` is
    /// `META_SERVER_TOKEN`'s, which no named token may repeat.
    pub fn expand(
        tokens: &[TokenConfig],
        unnamed: Option<&Token>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<Self>, TokenError> {
        let mut out: Vec<Self> = Vec::new();
        for config in tokens {
            let name = config.name.clone();
            let value = crate::config::expand(&config.token, lookup).map_err(
                |crate::config::Unset(var)| TokenError::Unset {
                    name: name.clone(),
                    var,
                },
            )?;
            let value = value.trim();
            if value.is_empty() {
                return Err(TokenError::Empty { name });
            }
            if unnamed.is_some_and(|t| t.0 == value) {
                let other = "META_SERVER_TOKEN".to_owned();
                return Err(TokenError::Shared { name, other });
            }
            if let Some(twin) = out.iter().find(|t| t.token.0 == value) {
                let other = format!("\"{}\"", twin.config.name);
                return Err(TokenError::Shared { name, other });
            }
            out.push(Self {
                token: Token::new(value.to_owned()),
                config: config.clone(),
            });
        }
        Ok(out)
    }
}

/// Where and how `serve --http` listens.
#[derive(Debug)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    /// Allows a non-loopback `addr` (a token is still required).
    pub allow_remote: bool,
    /// When set, every request must carry `Authorization: Bearer <token>`.
    pub token: Option<Token>,
    /// Named tokens (`metaServer.http.tokens`), expanded: each request must carry one of them
    /// or `token`.
    pub named_tokens: Vec<NamedToken>,
    /// Host header values accepted besides the loopback names and the bound address.
    pub extra_hosts: Vec<String>,
    /// Every session may read every stored result (otherwise only the session that made it).
    pub share_results: bool,
    /// Sessions open at once; a request starting one more gets 503.
    pub max_sessions: usize,
    /// A session without requests for this long ends.
    pub session_idle: Duration,
    /// Connections open at once; one more gets 503 and is closed.
    pub max_connections: usize,
}

impl HttpOptions {
    /// Refuses a non-loopback address unless it is explicitly allowed and protected by a token.
    pub fn check(&self) -> Result<(), HttpError> {
        let addr = self.addr;
        if addr.ip().is_loopback() {
            return Ok(());
        }
        if !self.allow_remote {
            return Err(HttpError::RemoteNotAllowed { addr });
        }
        if self.token.is_none() && self.named_tokens.is_empty() {
            return Err(HttpError::RemoteWithoutToken { addr });
        }
        Ok(())
    }

    /// Host header values to accept: loopback names, the bound IP (unless unspecified; any
    /// loopback address such as 127.0.0.2 too), extras.
    fn allowed_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
        let ip = self.addr.ip();
        if !ip.is_unspecified() {
            hosts.push(ip.to_string());
        }
        hosts.extend(self.extra_hosts.iter().cloned());
        let mut seen = std::collections::HashSet::new();
        hosts.retain(|h| seen.insert(h.clone()));
        hosts
    }

    /// Browser origins to accept: the loopback ones, and those of a bound loopback address.
    fn allowed_origins(&self) -> Vec<String> {
        let mut origins: Vec<String> = LOOPBACK_ORIGINS.iter().map(|o| o.to_string()).collect();
        let ip = self.addr.ip();
        if ip.is_loopback() {
            let host = match ip {
                IpAddr::V4(v4) => v4.to_string(),
                IpAddr::V6(v6) => format!("[{v6}]"),
            };
            for scheme in ["http", "https"] {
                let origin = format!("{scheme}://{host}:*");
                if !origins.contains(&origin) {
                    origins.push(origin);
                }
            }
        }
        origins
    }
}

/// A bound listener, ready to serve.
pub struct HttpServer {
    listener: TcpListener,
    options: HttpOptions,
}

impl HttpServer {
    /// Checks the options and binds the address (port 0 picks a free port).
    pub async fn bind(options: HttpOptions) -> Result<Self, HttpError> {
        options.check()?;
        let addr = options.addr;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind { addr, source })?;
        Ok(Self { listener, options })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until SIGINT/SIGTERM, then closes every session and stops every upstream.
    pub async fn run(self, settings: Settings) -> Result<(), HttpError> {
        let mut server = crate::server::session::start::start(settings, true).await?;
        if self.options.share_results {
            server = server.sharing_results();
        }
        let state = server.state.clone();
        let ct = CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.options.allowed_hosts())
            .with_allowed_origins(self.options.allowed_origins())
            .with_cancellation_token(ct.child_token());
        let rebinding = Arc::new(rebinding::Allowed::new(
            &config.allowed_hosts,
            &config.allowed_origins,
        ));
        let body_limit = BodyLimit(config.max_request_body_bytes);
        // A session another replica started is restored by replaying its initialize.
        let shared_sessions = state.shared.as_ref().map(|store| {
            Arc::new(SharedSessions::new(
                store.clone(),
                self.options.session_idle,
            ))
        });
        if let Some(shared) = &shared_sessions {
            config.session_store = Some(shared.clone());
        }
        // Each session gets a clone: its own connection state over the one shared `State`.
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = Some(self.options.session_idle);
        let sessions = Arc::new(sessions);
        let cap =
            sessions::SessionCap::new(sessions.clone(), self.options.max_sessions, shared_sessions);
        let listens = listen::Listens {
            state: state.clone(),
            passthrough: server.passthrough.clone(),
        };
        let service =
            StreamableHttpService::new(move || Ok(server.for_session()), sessions.clone(), config);
        let metrics = {
            let (state, sessions) = (state.clone(), sessions.clone());
            move |principal: Option<axum::Extension<Principal>>| async move {
                let live = sessions.sessions.read().await.len();
                let scope = match &principal {
                    Some(axum::Extension(p)) if p.access().is_limited() => Scope::Of {
                        access: p.access(),
                        principal: p.name(),
                    },
                    _ => Scope::All,
                };
                let text = metrics_page::render(&state, live, scope).await;
                ([(header::CONTENT_TYPE, metrics_page::CONTENT_TYPE)], text)
            }
        };
        let health = {
            let state = state.clone();
            move || async move { health(&state).await }
        };
        // Outermost last: request counting, the request deadline, Host and Origin, then the
        // token (not for /healthz), then the session cap, then the body, then a named token's
        // listen stream narrowed to what it sees, then a resumed stream's Last-Event-ID. So
        // nothing of a body is read for a foreign page, a request without the token or one over
        // the session cap. Innermost, the response's listed objects are completed (see
        // `whole.rs`).
        let mut router = axum::Router::new()
            .route_service(PATH, service)
            .layer(middleware::from_fn(super::whole::whole_bodies))
            .layer(middleware::from_fn(resume::after_last_event))
            .layer(middleware::from_fn_with_state(
                listens,
                listen::within_access,
            ))
            .layer(middleware::from_fn_with_state(body_limit, bounded_body))
            .layer(middleware::from_fn_with_state(
                cap,
                sessions::limit_sessions,
            ))
            .route(METRICS_PATH, get(metrics));
        let mut expected: Vec<TokenCheck> =
            self.options.token.iter().map(TokenCheck::unnamed).collect();
        expected.extend(self.options.named_tokens.iter().map(TokenCheck::named));
        if expected.is_empty() {
            tracing::info!("no token set: any local process can use this server");
        } else {
            let expected = Arc::new(expected);
            router = router.layer(middleware::from_fn_with_state(expected, require_token));
        }
        let router = router
            .route(HEALTH_PATH, get(health))
            .layer(middleware::from_fn_with_state(
                rebinding,
                rebinding::same_origin,
            ))
            .layer(middleware::from_fn(conn::within_request_timeout))
            .layer(middleware::from_fn_with_state(
                state.clone(),
                count_requests,
            ));
        let served = conn::serve(
            self.listener,
            router,
            self.options.max_connections,
            ct.clone(),
        );
        let stopping = async {
            crate::server::session::start::shutdown_signal().await;
            tracing::info!("signal received");
            ct.cancel();
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            () = served => {}
            () = stopping => tracing::warn!("connections still open after {SHUTDOWN_GRACE:?}; closing them"),
        }
        tracing::info!("stopping upstreams");
        state.stop().await;
        Ok(())
    }
}

/// 200 `ok` while serving (and the shared store, if any, answers); 503 and why otherwise.
async fn health(state: &State) -> Response {
    match &state.shared {
        None => (StatusCode::OK, "ok\n").into_response(),
        Some(store) => match store.ping().await {
            Ok(()) => (StatusCode::OK, "ok\n").into_response(),
            Err(e) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("store down: {e}\n"),
            )
                .into_response(),
        },
    }
}

/// The largest request body read, in bytes (rmcp's own limit, which it checks only after
/// this one has read the body).
#[derive(Debug, Clone, Copy)]
struct BodyLimit(usize);

/// Reads a request's body, refusing it with 413 as soon as it passes the limit: a declared
/// `Content-Length` over it before any of the body is read, a chunked one at the first frame
/// past it; the connection is closed then, so the rest of the body is never read. Lone
/// surrogate escapes (a JavaScript client's string cut mid-emoji) are read as U+FFFD, as on
/// stdio, instead of getting a 415 for the whole request.
async fn bounded_body(
    Extract(BodyLimit(limit)): Extract<BodyLimit>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    let mut bytes = Vec::new();
    let mut frames = body.into_data_stream();
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(data) if data.len() > limit - bytes.len() => return too_large(limit),
            Ok(data) => bytes.extend_from_slice(&data),
            Err(e) => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!("cannot read the body: {e}\n"),
                )
                    .into_response();
            }
        }
    }
    let bytes = match crate::surrogates::well_formed(&bytes) {
        Some(fixed) => fixed,
        None => bytes,
    };
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// 413 for a body over `limit` bytes, closing the connection so the rest is not read.
fn too_large(limit: usize) -> Response {
    let mut response = (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is larger than {limit} bytes\n"),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Counts every request by method and status for `/metrics`.
async fn count_requests(
    Extract(state): Extract<Arc<State>>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    let response = next.run(request).await;
    state
        .metrics
        .http_request(method.as_str(), response.status().as_u16());
    response
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// An expected token's digest and the principal it stands for.
struct TokenCheck {
    digest: [u8; 32],
    principal: Principal,
}

impl TokenCheck {
    /// `META_SERVER_TOKEN`'s: unrestricted, named by a digest of its digest (never revealed).
    fn unnamed(token: &Token) -> Self {
        let digest = digest(token.0.as_bytes());
        let name = Sha256::digest(digest);
        let hex = crate::checksum::hex(&name[..8]);
        Self {
            digest,
            principal: Principal::new(format!("token-{hex}")),
        }
    }

    /// A named token's: its name, its servers and tools.
    fn named(token: &NamedToken) -> Self {
        Self {
            digest: digest(token.token.0.as_bytes()),
            principal: Principal::limited(token.config.name.clone(), Access::of(&token.config)),
        }
    }
}

/// Lets a request through only with one of the expected bearer tokens (compared by digest, in
/// constant time), marked with that token's principal.
async fn require_token(
    Extract(expected): Extract<Arc<Vec<TokenCheck>>>,
    mut request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let got = presented.map(|token| digest(token.as_bytes()));
    let matched = got.and_then(|got| {
        expected.iter().find(|check| {
            got.iter()
                .zip(check.digest.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
        })
    });
    if let Some(check) = matched {
        request.extensions_mut().insert(check.principal.clone());
        return next.run(request).await;
    }
    let challenge = if presented.is_some() {
        r#"Bearer realm="meta-server", error="invalid_token""#
    } else {
        r#"Bearer realm="meta-server""#
    };
    let mut response = (
        StatusCode::UNAUTHORIZED,
        "Unauthorized: send Authorization: Bearer <token>\n",
    )
        .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(addr: &str, allow_remote: bool, token: bool) -> HttpOptions {
        HttpOptions {
            addr: addr.parse().unwrap(),
            allow_remote,
            token: token.then(|| Token::new("t".into())),
            named_tokens: Vec::new(),
            extra_hosts: vec![],
            share_results: false,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: DEFAULT_SESSION_IDLE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    #[test]
    fn loopback_needs_nothing_else() {
        assert!(options("127.0.0.1:1", false, false).check().is_ok());
        assert!(options("[::1]:1", false, false).check().is_ok());
    }

    #[test]
    fn remote_needs_the_flag_and_a_token() {
        assert!(matches!(
            options("0.0.0.0:1", false, true).check(),
            Err(HttpError::RemoteNotAllowed { .. })
        ));
        assert!(matches!(
            options("0.0.0.0:1", true, false).check(),
            Err(HttpError::RemoteWithoutToken { .. })
        ));
        assert!(options("0.0.0.0:1", true, true).check().is_ok());
    }

    #[test]
    fn bound_ip_and_extra_hosts_are_allowed_hosts() {
        let mut o = options("192.168.1.5:1", true, true);
        o.extra_hosts.push("box.lan".into());
        assert_eq!(
            o.allowed_hosts(),
            ["localhost", "127.0.0.1", "::1", "192.168.1.5", "box.lan"]
        );
        assert_eq!(options("0.0.0.0:1", true, true).allowed_hosts().len(), 3);
    }

    #[test]
    fn every_bound_loopback_address_is_an_allowed_host_and_origin() {
        let o = options("127.0.0.2:1", false, false);
        assert_eq!(
            o.allowed_hosts(),
            ["localhost", "127.0.0.1", "::1", "127.0.0.2"]
        );
        assert!(
            o.allowed_origins()
                .contains(&"http://127.0.0.2:*".to_owned())
        );
        let v6 = options("[::1]:1", false, false);
        assert_eq!(v6.allowed_hosts(), ["localhost", "127.0.0.1", "::1"]);
        assert_eq!(v6.allowed_origins().len(), LOOPBACK_ORIGINS.len());
    }

    #[test]
    fn named_tokens_are_expanded_and_never_shared() {
        let settings = Settings::parse(
            std::path::Path::new("/cfg/c.json"),
            r#"{"metaServer": {"http": {"tokens": [{"name": "a", "token": "${A}"}, {"name": "b", "token": "${B}"}]}}, "mcpServers": {}}"#,
        )
        .unwrap();
        let env = |a: &'static str, b: &'static str| {
            move |var: &str| match var {
                "A" => Some(a.to_owned()),
                "B" => Some(b.to_owned()),
                _ => None,
            }
        };
        let tokens = NamedToken::expand(&settings.http_tokens, None, &env("x1", " x2 ")).unwrap();
        assert_eq!(
            (tokens[0].token.0.as_str(), tokens[1].token.0.as_str()),
            ("x1", "x2")
        );
        let e = NamedToken::expand(&settings.http_tokens, None, &env("x1", "x1")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "metaServer.http.tokens \"b\": its token is the same as \"a\"'s; give each holder its own"
        );
        let unnamed = Token::new("x1".into());
        let e = NamedToken::expand(&settings.http_tokens, Some(&unnamed), &env("x1", "x2"))
            .unwrap_err();
        assert!(e.to_string().contains("META_SERVER_TOKEN"), "{e}");
        let e = NamedToken::expand(&settings.http_tokens, None, &|_| None).unwrap_err();
        assert!(e.to_string().contains("${A}, which is not set"), "{e}");
        let e = NamedToken::expand(&settings.http_tokens, None, &env("", "x")).unwrap_err();
        assert!(matches!(e, TokenError::Empty { .. }), "{e}");
        let mut only_named = options("0.0.0.0:1", true, false);
        only_named.named_tokens = tokens;
        assert!(only_named.check().is_ok(), "a named token is a token");
    }

    #[test]
    fn token_is_not_printed() {
        assert_eq!(format!("{:?}", Token::new("secret".into())), "Token(..)");
    }
}
