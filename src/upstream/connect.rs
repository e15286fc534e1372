//! Opening one connection: spawn a stdio child (see `child.rs`) or reach a
//! streamable-HTTP endpoint, then run the handshake of the revision chosen in `revision.rs`.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex as StdMutex;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::ClientHandler;
use rmcp::ErrorData as McpError;
// Sampling and roots are deprecated from 2026-07-28 on, and what 2025-11-25 servers ask for.
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationCapability, FormElicitationCapability, Implementation, InputRequest,
    ProtocolVersion, ResourceUpdatedNotificationParam, UrlElicitationCapability,
};
#[expect(deprecated, reason = "relayed for 2025-11-25 servers")]
use rmcp::model::{
    CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult, ListRootsRequest,
    ListRootsResult,
};
use rmcp::service::{
    ClientInitializeError, NotificationContext, RequestContext, RoleClient,
    serve_client_with_lifecycle,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::Mutex;

use super::ask::Ask;
use super::attribution;
use super::child::ChildTransport;
use super::diagnose;
use super::http::{Ordered, Upstream};
use super::inbox::Handover;
use super::progress::ProgressRoutes;
use super::relay::{self, Origin, Relays, Target};
use super::revision::Start;
use super::roots::Roots;
use super::sse::{SseError, SseTransport};
use super::wire::{self, Faults};
use super::{Connection, Event, Events, UpstreamError};
use crate::config::{Launch, ServerConfig};
use crate::redact::Redactor;

const STDERR_LINES: usize = 5;

/// meta-server's side of an upstream connection.
#[derive(Clone)]
pub struct UpstreamClient {
    server: String,
    events: Option<Events>,
    relays: Relays,
}

impl UpstreamClient {
    pub(super) fn new(server: String, events: Option<Events>, relays: Relays) -> Self {
        Self {
            server,
            events,
            relays,
        }
    }

    /// Asks the client `relay` picks for `ask` (a 2025-11-25 session by `request`, a
    /// 2026-07-28 call by `input` in its `InputRequiredResult`), until the upstream cancels
    /// its request.
    async fn relay<T: serde::de::DeserializeOwned>(
        &self,
        ask: Ask,
        cx: &RequestContext<RoleClient>,
        input: InputRequest,
        request: impl AsyncFnOnce(
            rmcp::service::Peer<rmcp::service::RoleServer>,
        ) -> Result<T, rmcp::service::ServiceError>,
    ) -> Result<T, McpError> {
        let asked = async {
            let target = self.relays.target_for(&self.server, ask);
            let (target, _waiting) =
                target.inspect_err(|refused| relay::tell(ask, &refused.message))?;
            match target {
                Target::Peer(peer, _open) => relay::answer(&self.server, ask, request(peer).await),
                Target::Input(inputs) => {
                    relay::input_answer(&self.server, ask, inputs.ask(input).await)
                }
            }
        };
        tokio::select! {
            answer = asked => answer,
            () = cx.ct.cancelled() => Err(McpError::internal_error("cancelled by the server", None)),
        }
    }
}

#[expect(deprecated, reason = "relayed for 2025-11-25 servers")]
impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        // The version `initialize` asks for; a `server/discover` probe asks for 2026-07-28
        // (see `revision.rs`).
        // What the clients can give is relayed to them (see `relay.rs`); declaring it makes
        // servers list the tools that need it.
        #[expect(deprecated, reason = "relayed for 2025-11-25 servers")]
        let capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_roots_list_changed()
            .enable_sampling()
            .enable_elicitation_with(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::default())
                    .with_url(UrlElicitationCapability::new()),
            )
            .build();
        ClientConfig::new(
            capabilities,
            Implementation::new("meta-server", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        cx: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let params = attribution::sampling(&self.server, params);
        let input = InputRequest::CreateMessage(CreateMessageRequest::new(params.clone()));
        self.relay(Ask::Sampling, &cx, input, async |peer| {
            peer.create_message(params).await
        })
        .await
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let ask = Ask::elicitation(&params);
        let params = attribution::elicitation(&self.server, params);
        let input = InputRequest::Elicitation(ElicitRequest::new(params.clone()));
        self.relay(ask, &cx, input, async |peer| {
            peer.create_elicitation(params).await
        })
        .await
    }

    /// The roots `roots.rs` gives the server: its configured ones, or the calling client's
    /// within them (its configured ones when the client cannot be asked).
    async fn list_roots(
        &self,
        cx: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        let _answering = self.relays.answering_roots();
        let roots = self.relays.roots().clone();
        if !roots.asks_client() {
            return Ok(roots.configured());
        }
        let input = InputRequest::ListRoots(ListRootsRequest::default());
        let asked = self.relay(Ask::Roots, &cx, input, async |peer| peer.list_roots().await);
        match asked.await {
            Ok(client) => Ok(roots.within(client)),
            Err(e) => {
                tracing::debug!(server = %self.server, "its configured roots given: {}", e.message);
                Ok(roots.configured())
            }
        }
    }

    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "upstream sent tools/list_changed");
        if let Some(events) = &self.events {
            let _ = events.send(Event::ToolListChanged(self.server.clone()));
        }
    }

    /// The catalog records prompts too: re-listed as for a changed tool list.
    async fn on_prompt_list_changed(&self, cx: NotificationContext<RoleClient>) {
        self.on_tool_list_changed(cx).await;
    }

    /// The catalog records resources too: re-listed as for a changed tool list.
    async fn on_resource_list_changed(&self, cx: NotificationContext<RoleClient>) {
        self.on_tool_list_changed(cx).await;
    }

    /// Goes to the subscribers of the URI (see `subscriptions.rs`).
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _cx: NotificationContext<RoleClient>,
    ) {
        self.relays.resource_updated(params.uri);
    }

    // Progress and log messages are taken off the wire in order (see `inbox.rs`).
}

/// The last few lines a child wrote to stderr, for error messages.
#[derive(Clone)]
pub(super) struct StderrTail {
    lines: Arc<StdMutex<VecDeque<String>>>,
    /// Becomes true once the child's stderr reached end of file (or was never followed).
    finished: tokio::sync::watch::Sender<bool>,
}

impl Default for StderrTail {
    fn default() -> Self {
        Self {
            lines: Arc::default(),
            finished: tokio::sync::watch::Sender::new(true),
        }
    }
}

impl StderrTail {
    pub(super) fn tail(&self) -> String {
        let lines = self.lines.lock();
        lines.iter().cloned().collect::<Vec<_>>().join(" | ")
    }

    /// The tail once the child's stderr is fully read, waiting at most `within`: a crashed
    /// child's last words are often still in the pipe when its stdout closes.
    pub(super) async fn final_tail(&self, within: Duration) -> String {
        let mut finished = self.finished.subscribe();
        let _ = tokio::time::timeout(within, finished.wait_for(|done| *done)).await;
        self.tail()
    }

    fn follow(&self, server: String, stderr: ChildStderr, redactor: Redactor) {
        let lines = self.lines.clone();
        let finished = self.finished.clone();
        finished.send_replace(false);
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let line = redactor.apply(&line);
                tracing::debug!(server = %server, "stderr: {line}");
                let mut lines = lines.lock();
                if lines.len() == STDERR_LINES {
                    lines.pop_front();
                }
                lines.push_back(line.chars().take(300).collect());
            }
            finished.send_replace(true);
        });
    }
}

/// Starts (or reaches) `config`'s server and completes the handshake `start` chooses within
/// its timeout. A probe that failed for any reason but a login or a refusal is followed by a
/// plain `initialize` on a new connection: a pre-2026 server may answer `server/discover` with
/// something that ends the connection (an HTTP 400 without a session). With `login`, a remote
/// server gets the stored login's token.
pub(super) async fn open(
    config: &ServerConfig,
    events: Option<Events>,
    login: bool,
    (opener, roots): (Origin, Roots),
    start: Start,
) -> Result<Connection, UpstreamError> {
    let first = (opener.clone(), roots.clone());
    let opened = open_once(config, events.clone(), login, first, &start).await;
    match opened {
        Err(UpstreamError::Initialize { message, .. }) if start == Start::Probe => {
            tracing::debug!(server = %config.name, "server/discover probe failed ({message}); connecting again with initialize");
            open_once(config, events, login, (opener, roots), &Start::Initialize).await
        }
        other => other,
    }
}

async fn open_once(
    config: &ServerConfig,
    events: Option<Events>,
    login: bool,
    (opener, roots): (Origin, Roots),
    start: &Start,
) -> Result<Connection, UpstreamError> {
    let server = config.name.clone();
    tracing::debug!(server = %server, ?start, "connecting upstream");
    let lifecycle = start.lifecycle();
    let progress = ProgressRoutes::default();
    let relays = Relays::new(opener, roots);
    let client = UpstreamClient::new(server.clone(), events, relays.clone());
    let handover = Handover {
        server: server.clone(),
        progress: progress.clone(),
        relays: relays.clone(),
    };
    let stderr = StderrTail::default();
    let after = config.call_timeout;
    // What the transport refused (a message over the limit, a redirect to another origin).
    let faults = Faults::default();
    let limit = config.max_message_bytes;
    let launch = config.launch()?;
    let over_http = matches!(launch, Launch::Http { .. });
    let http_url = match &launch {
        Launch::Http { url, .. } => Some(url.clone()),
        _ => None,
    };
    let (handshake, pid) = match launch {
        Launch::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(&command);
            cmd.args(&args).envs(&env);
            if let Some(cwd) = &cwd {
                cmd.current_dir(cwd);
            }
            let (transport, child_stderr, pid) = ChildTransport::spawn(cmd, limit, faults.clone())
                .map_err(|e| UpstreamError::Spawn {
                    server: server.clone(),
                    message: spawn_message(&command, &e),
                })?;
            if let Some(child_stderr) = child_stderr {
                stderr.follow(
                    server.clone(),
                    child_stderr,
                    Redactor::new(config.secrets()),
                );
            }
            (
                tokio::time::timeout(
                    after,
                    serve_client_with_lifecycle(
                        client,
                        handover.wrap(wire::Outgoing(transport)),
                        lifecycle,
                    ),
                )
                .await,
                pid,
            )
        }
        Launch::Http { url, headers } => {
            crate::auth::ensure_tls();
            let custom = header_map(&server, headers)?;
            // Credentials are bound to the URL contacted.
            let contacted = url.clone();
            let mut http = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(
                custom
                    .into_iter()
                    .filter_map(|(k, v)| Some((k?, v)))
                    .collect(),
            );
            // At most maxMessageMb, as a stdio line; results are cut by result handling.
            http.max_json_response_size = limit;
            http.max_sse_event_size = limit;
            // Our own client: it never follows a redirect to another origin.
            let upstream = Upstream {
                http: wire::http_client(&server, &faults, false),
                faults: faults.clone(),
            };
            let handshake = match authorized(config, &contacted, login).await? {
                // A login's manager is its client's alone: it moves under ours.
                Some(auth) if Arc::strong_count(&auth.auth_manager) == 1 => {
                    let manager = Arc::into_inner(auth.auth_manager)
                        .expect("the only reference")
                        .into_inner();
                    let auth = rmcp::transport::AuthClient::new(upstream, manager);
                    let ordered = Ordered::new(auth, limit, faults.clone());
                    let transport = StreamableHttpClientTransport::with_client(ordered, http);
                    let serve = serve_client_with_lifecycle(
                        client,
                        handover.wrap(wire::Outgoing(transport)),
                        lifecycle,
                    );
                    tokio::time::timeout(after, serve).await
                }
                Some(mut auth) => {
                    auth.http_client = upstream.http;
                    let ordered = Ordered::new(auth, limit, faults.clone());
                    let transport = StreamableHttpClientTransport::with_client(ordered, http);
                    let serve = serve_client_with_lifecycle(
                        client,
                        handover.wrap(wire::Outgoing(transport)),
                        lifecycle,
                    );
                    tokio::time::timeout(after, serve).await
                }
                None => {
                    let plain = Ordered::new(upstream, limit, faults.clone());
                    let transport = StreamableHttpClientTransport::with_client(plain, http);
                    let serve = serve_client_with_lifecycle(
                        client,
                        handover.wrap(wire::Outgoing(transport)),
                        lifecycle,
                    );
                    tokio::time::timeout(after, serve).await
                }
            };
            (handshake, None)
        }
        Launch::Sse { url, headers } => {
            crate::auth::ensure_tls();
            let custom = header_map(&server, headers)?;
            let auth = authorized(config, &url, login).await?;
            let opened = tokio::time::timeout(
                after,
                SseTransport::connect(&server, &url, custom, auth, limit, faults.clone()),
            )
            .await;
            let transport = match opened {
                Err(_) => {
                    return Err(UpstreamError::ConnectTimeout {
                        server,
                        after,
                        stderr: String::new(),
                    });
                }
                Ok(Err(e)) => {
                    return Err(faulted(&server, &faults).unwrap_or(sse_error(&server, &url, e)));
                }
                Ok(Ok(transport)) => transport,
            };
            // The legacy HTTP+SSE transport predates 2026-07-28: never probed.
            let serve = serve_client_with_lifecycle(
                client,
                handover.wrap(wire::Outgoing(transport)),
                Start::Initialize.lifecycle(),
            );
            (tokio::time::timeout(after, serve).await, None)
        }
    };
    let service = match handshake {
        Err(_) => {
            return Err(UpstreamError::ConnectTimeout {
                server,
                after,
                stderr: stderr.tail(),
            });
        }
        Ok(Err(e)) => {
            if let Some(challenge) = e.auth_challenge() {
                return Err(UpstreamError::needs_login(&server, challenge));
            }
            if let Some(fault) = faulted(&server, &faults) {
                return Err(fault);
            }
            let message = http_url
                .as_deref()
                .and_then(|url| diagnose::initialize(&server, url, &e))
                .unwrap_or_else(|| init_message(&e));
            return Err(UpstreamError::Initialize {
                server,
                message,
                // A child that died before answering often said why on stderr just before.
                stderr: stderr.final_tail(super::STDERR_SETTLE).await,
            });
        }
        Ok(Ok(service)) => service,
    };
    // Our own catalog is the cache; rmcp's would serve stale lists on errors.
    service
        .peer()
        .set_response_cache_config(rmcp::service::ClientCacheConfig::disabled())
        .await;
    let revision = service
        .peer()
        .peer_info()
        .map(|i| i.protocol_version.clone());
    tracing::info!(server = %server, pid, revision = %revision.as_ref().map_or("", |v| v.as_str()), "upstream connected");
    // rmcp mirrors `x-mcp-header` arguments into `Mcp-Param-*` headers from the schemas of a
    // `tools/list` seen on the same connection; a call from the catalog has none to go by.
    let lists_before_calls = over_http && revision.as_ref().is_some_and(|v| !v.has_initialize());
    let settle = after.min(relay::SETTLE_LIMIT);
    let _ = tokio::time::timeout(settle, relays.settle_roots(service.peer())).await;
    Ok(Connection {
        peer: service.peer().clone(),
        service: Mutex::new(Some(service)),
        pid,
        lists_before_calls,
        listed: Default::default(),
        stderr,
        progress,
        relays,
        faults,
        last_used: StdMutex::new(tokio::time::Instant::now()),
        in_flight: Default::default(),
        subscribed: Default::default(),
    })
}

/// Custom headers as HTTP headers; a bad name or value is the config's fault.
fn header_map(
    server: &str,
    headers: std::collections::BTreeMap<String, String>,
) -> Result<http::HeaderMap, UpstreamError> {
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        let bad = |what: &str| UpstreamError::Spawn {
            server: server.to_owned(),
            message: format!("header \"{name}\" has an invalid {what}; fix headers in the config"),
        };
        let name_ok = HeaderName::try_from(name.as_str()).map_err(|_| bad("name"))?;
        let value_ok = HeaderValue::try_from(value.as_str()).map_err(|_| bad("value"))?;
        map.insert(name_ok, value_ok);
    }
    Ok(map)
}

/// The stored login of a remote server (with `login`) for `url`, the URL contacted, as an HTTP
/// client that sends its token.
async fn authorized(
    config: &ServerConfig,
    url: &str,
    login: bool,
) -> Result<Option<rmcp::transport::AuthClient<reqwest::Client>>, UpstreamError> {
    if !login {
        return Ok(None);
    }
    crate::auth::client(config, url)
        .await
        .map_err(|e| UpstreamError::Auth {
            server: config.name.clone(),
            message: e.to_string(),
        })
}

/// The error of what the transport refused, if it refused something.
fn faulted(server: &str, faults: &Faults) -> Option<UpstreamError> {
    faults.get().map(|message| UpstreamError::Refused {
        server: server.to_owned(),
        message,
    })
}

fn sse_error(server: &str, url: &str, e: SseError) -> UpstreamError {
    let message = match &e {
        SseError::AuthRequired(c) => {
            return UpstreamError::needs_login(server, &c.www_authenticate_header);
        }
        SseError::InsufficientScope(c) => {
            return UpstreamError::needs_login(server, &c.www_authenticate_header);
        }
        SseError::Http(e) => diagnose::request(url, e),
        SseError::Status { status, .. } => diagnose::status(server, url, *status),
        SseError::NotEventStream(kind) => diagnose::not_mcp(
            url,
            Some(kind).filter(|k| !k.is_empty()).map(String::as_str),
        ),
        _ => e.to_string(),
    };
    UpstreamError::Initialize {
        server: server.to_owned(),
        message,
        stderr: String::new(),
    }
}

/// Commands looked up on a PATH from a working dir, and whether they were found: a thousand
/// servers started by `npx` need one walk of PATH, not a thousand.
#[derive(Default)]
pub struct CommandLookups(HashMap<(String, String, PathBuf), bool>);

/// Why a configured server cannot be started as it is written.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A variable it uses is not set, or its entry cannot be launched.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Its stdio command is on no PATH (the name shown with the config's secrets redacted).
    #[error("command \"{0}\" was not found; install it or give its full path in \"command\"")]
    NotFound(String),
}

/// Whether `config`'s server can be started as configured: its variables are set and a
/// stdio command exists (looked up once per `lookups`). Says what to fix when not.
pub fn check_launch(
    config: &ServerConfig,
    lookups: &mut CommandLookups,
) -> Result<(), LaunchError> {
    let Launch::Stdio {
        command, env, cwd, ..
    } = config.launch()?
    else {
        return Ok(());
    };
    let path = env
        .get("PATH")
        .cloned()
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_default();
    let cwd = cwd.unwrap_or_else(|| std::env::current_dir().unwrap_or_default());
    let found = *lookups
        .0
        .entry((command.clone(), path, cwd))
        .or_insert_with_key(|(command, path, cwd)| {
            which::which_in(command, Some(path), cwd).is_ok()
        });
    if found {
        return Ok(());
    }
    Err(LaunchError::NotFound(
        Redactor::new(config.secrets()).apply(&command),
    ))
}

fn spawn_message(command: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "command \"{command}\" was not found; install it or give its full path in \"command\""
        ),
        std::io::ErrorKind::PermissionDenied => {
            format!("command \"{command}\" is not executable; check its permissions")
        }
        _ => format!("command \"{command}\" failed to start: {e}"),
    }
}

fn init_message(e: &ClientInitializeError) -> String {
    let text = e.to_string();
    if text.to_lowercase().contains("closed") {
        format!(
            "{text} (the process exited or closed stdout before answering initialize; check command and args)"
        )
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    #[test]
    fn a_command_is_looked_up_once_for_all_the_servers_started_by_it() {
        let settings = Settings::parse(
            std::path::Path::new("config.json"),
            r#"{"mcpServers": {
                "a": {"command": "meta-server-test-found-nowhere"},
                "b": {"command": "meta-server-test-found-nowhere", "args": ["x"]},
                "c": {"command": "sh"}
            }}"#,
        )
        .expect("config");
        let mut lookups = CommandLookups::default();
        let checked: Vec<Result<(), LaunchError>> = settings
            .servers
            .iter()
            .map(|server| check_launch(server, &mut lookups))
            .collect();
        for missing in &checked[..2] {
            let message = missing.as_ref().expect_err("not on PATH").to_string();
            assert!(
                message.contains("\"meta-server-test-found-nowhere\" was not found"),
                "{message}"
            );
        }
        assert!(checked[2].is_ok());
        assert_eq!(lookups.0.len(), 2, "one lookup per command");
    }
}
