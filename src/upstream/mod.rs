//! Live connections to upstream servers: connect once per server on demand, stop when idle,
//! reconnect after a crash. The only module that holds connections.

mod ask;
mod asking;
mod attribution;
mod child;
mod connect;
mod diagnose;
mod envelope;
mod error;
mod features;
pub mod guardian;
mod http;
#[cfg(test)]
pub(crate) mod in_process;
mod inbox;
mod inputs;
mod listen;
mod listing;
mod mrtr;
mod once;
mod progress;
mod relay;
mod revision;
mod roots;
mod sse;
mod subscriptions;
#[cfg(test)]
mod tests;
mod traced;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex as StdMutex;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, JsonObject, ProtocolVersion, RequestId, RequestMetaObject, ServerResult, Tool,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::Instrument;

use crate::config::ServerConfig;
use crate::redact::Redactor;

pub use connect::{CommandLookups, LaunchError, UpstreamClient, check_launch};
pub use features::{Answer, Offers};
pub use listing::{Listed, Overrun};

/// How long a dead server's stderr may take to drain into its error message.
const STDERR_SETTLE: Duration = Duration::from_millis(500);
pub use error::UpstreamError;
pub use inputs::{Inputs, PendingInput};
pub use progress::ProgressSender;
pub use relay::{ClientId, LogLevel, Origin};
pub use subscriptions::Subscription;

/// A live connection to one upstream server.
pub struct Connection {
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, UpstreamClient>>>,
    /// Operating-system process id for stdio servers.
    pub pid: Option<u32>,
    /// A 2026-07-28 HTTP server: its tools are listed on this connection before the first
    /// call, so that rmcp can mirror `x-mcp-header` arguments into headers.
    lists_before_calls: bool,
    listed: tokio::sync::OnceCell<()>,
    stderr: connect::StderrTail,
    progress: progress::ProgressRoutes,
    /// Who opened the connection and whose calls are in flight, for the upstream's requests.
    relays: relay::Relays,
    /// What the transport refused; such a connection is dropped at its next error.
    faults: wire::Faults,
    last_used: StdMutex<Instant>,
    in_flight: AtomicUsize,
    /// Subscriptions to each resource URI held on this connection (see `subscriptions.rs`).
    subscribed: StdMutex<HashMap<String, usize>>,
}

impl Connection {
    /// The server's `initialize` answer.
    pub fn server_info(&self) -> Option<Arc<rmcp::model::ServerPeerInfo>> {
        self.peer.peer_info()
    }

    fn touch(&self) {
        *self.last_used.lock() = Instant::now();
    }

    fn idle_since(&self) -> Instant {
        *self.last_used.lock()
    }

    /// Stops the server: closes stdin, then SIGTERM, then kill (rmcp's stdio shutdown sequence).
    async fn close(&self) {
        if let Some(service) = self.service.lock().await.take() {
            let _ = service.cancel().await;
        }
    }
}

/// Counts a call as in flight for as long as it lives, so idle stop never cuts a running call.
struct InFlight<'a>(&'a Connection);

impl<'a> InFlight<'a> {
    fn new(conn: &'a Connection) -> Self {
        conn.in_flight.fetch_add(1, Ordering::SeqCst);
        conn.touch();
        Self(conn)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Slot {
    config: ServerConfig,
    /// Held while connecting, so concurrent first calls share one connection.
    conn: Mutex<Option<Arc<Connection>>>,
    /// A remote server's second connection, at 2025-11-25, for the calls of 2025-11-25
    /// sessions while `conn` speaks 2026-07-28 (see [`Manager::connect_for`]).
    legacy: Mutex<Option<Arc<Connection>>>,
    /// The server refused `initialize`: it speaks 2026-07-28 only.
    modern_only: std::sync::atomic::AtomicBool,
    /// The `WWW-Authenticate` challenge of the last request the server refused for want of a
    /// login (or of scope); cleared by the next request it accepts.
    challenge: StdMutex<Option<String>>,
    /// Masks this server's secrets in everything its errors say.
    redactor: Redactor,
    /// The revision the server spoke last (this process's last connection, else its
    /// catalog's): what the next connection starts with (see `revision.rs`).
    revision: StdMutex<Option<ProtocolVersion>>,
}

impl Slot {
    fn new(config: &ServerConfig) -> Self {
        Self {
            config: config.clone(),
            conn: Mutex::new(None),
            legacy: Mutex::new(None),
            modern_only: Default::default(),
            challenge: StdMutex::new(None),
            redactor: Redactor::new(config.secrets()),
            revision: StdMutex::new(None),
        }
    }

    fn start(&self) -> revision::Start {
        revision::Start::after(self.revision.lock().as_ref())
    }

    /// Notes what `result` says about the server's login.
    fn note<T>(&self, result: &Result<T, UpstreamError>) {
        let mut challenge = self.challenge.lock();
        match result {
            Ok(_) => *challenge = None,
            Err(UpstreamError::NeedsLogin {
                challenge: c,
                step_up,
                ..
            }) => {
                *challenge = Some(c.clone());
                if *step_up {
                    crate::auth::remember_step_up(&self.config, c);
                }
            }
            Err(_) => {}
        }
    }
}

/// What happens to upstreams, for whoever keeps catalogs fresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new connection to the server is up.
    Connected(String),
    /// The server sent `notifications/tools/list_changed` (or that of its prompts or resources).
    ToolListChanged(String),
}

pub type Events = tokio::sync::mpsc::UnboundedSender<Event>;

/// How the manager opens a connection: by launching (or dialling) the configured server, or,
/// in tests, to an in-process server over a pipe.
enum Opener {
    Launch,
    #[cfg(test)]
    InProcess(in_process::Serve),
}

/// Owns every upstream connection.
pub struct Manager {
    /// One per configured server; [`Manager::reconfigure`] follows a changed config.
    slots: parking_lot::RwLock<HashMap<String, Arc<Slot>>>,
    events: Option<Events>,
    opener: Opener,
    /// Whether several clients share the connections (`serve --http`): then no client's
    /// roots are given to a server (see `roots.rs`).
    many_clients: AtomicBool,
}

impl Manager {
    /// A manager that reports nothing (for one-shot commands such as `index`).
    pub fn new(servers: &[ServerConfig]) -> Arc<Self> {
        Self::build(servers, None)
    }

    /// A manager that reports connections and tool-list changes on `events`.
    pub fn with_events(servers: &[ServerConfig], events: Events) -> Arc<Self> {
        Self::build(servers, Some(events))
    }

    /// A manager whose servers are in-process ones that `serve` starts on a pipe.
    #[cfg(test)]
    pub(crate) fn in_process(
        servers: &[ServerConfig],
        events: Option<Events>,
        serve: in_process::Serve,
    ) -> Arc<Self> {
        let mut manager = Self::build(servers, events);
        if let Some(manager) = Arc::get_mut(&mut manager) {
            manager.opener = Opener::InProcess(serve);
        }
        manager
    }

    fn build(servers: &[ServerConfig], events: Option<Events>) -> Arc<Self> {
        let slots = servers
            .iter()
            .map(|s| (s.name.clone(), Arc::new(Slot::new(s))))
            .collect();
        Arc::new(Self {
            slots: parking_lot::RwLock::new(slots),
            events,
            opener: Opener::Launch,
            many_clients: AtomicBool::new(false),
        })
    }

    /// Notes that several clients share the connections opened from now on (`serve --http`):
    /// their servers are given their configured roots only, never a client's.
    pub fn serve_many_clients(&self) {
        self.many_clients.store(true, Ordering::SeqCst);
    }

    /// What a new connection to the server of `slot` answers when asked for roots.
    fn roots(&self, slot: &Slot) -> roots::Roots {
        let one_client = !self.many_clients.load(Ordering::SeqCst);
        roots::Roots::new(slot.config.roots.as_deref(), one_client)
    }

    fn slot(&self, server: &str) -> Result<Arc<Slot>, UpstreamError> {
        self.slots
            .read()
            .get(server)
            .cloned()
            .ok_or_else(|| UpstreamError::Unknown(server.to_owned()))
    }

    /// Whether `slot` is still the one of its server.
    fn holds(&self, slot: &Arc<Slot>) -> bool {
        (self.slots.read().get(&slot.config.name)).is_some_and(|held| Arc::ptr_eq(held, slot))
    }

    /// Makes the servers those of `servers` (a changed config): a new one gets its slot (it
    /// starts on first use); one gone, or whose config changed, loses its slot, and its
    /// connection is closed (a stdio server's process group stopped) before this returns. A
    /// call in flight on a closed connection fails. Returns the servers whose connection was
    /// closed.
    pub async fn reconfigure(&self, servers: &[ServerConfig]) -> Vec<String> {
        let dropped: Vec<Arc<Slot>> = {
            let mut slots = self.slots.write();
            let configs: HashMap<&str, &ServerConfig> =
                servers.iter().map(|s| (s.name.as_str(), s)).collect();
            let stale: Vec<String> = (slots.iter())
                .filter(|(name, slot)| configs.get(name.as_str()) != Some(&&slot.config))
                .map(|(name, _)| name.clone())
                .collect();
            let dropped = stale.iter().filter_map(|name| slots.remove(name)).collect();
            for server in servers {
                slots
                    .entry(server.name.clone())
                    .or_insert_with(|| Arc::new(Slot::new(server)));
            }
            dropped
        };
        let mut closed = Vec::new();
        for slot in dropped {
            let conns = [
                slot.conn.lock().await.take(),
                slot.legacy.lock().await.take(),
            ];
            let mut any = false;
            for conn in conns.into_iter().flatten() {
                conn.close().await;
                any = true;
            }
            if any {
                closed.push(slot.config.name.clone());
            }
        }
        closed
    }

    /// The live connection to `server`, connecting first if needed (for no client).
    pub async fn connect(&self, server: &str) -> Result<Arc<Connection>, UpstreamError> {
        self.connect_for(server, &Origin::Detached).await
    }

    /// The live connection to `server` for `opener`'s call; a new one is opened for it,
    /// whose client then answers the server's `roots/list` outside calls (see `relay.rs`).
    ///
    /// A 2025-11-25 session's call to a remote server whose connection speaks 2026-07-28 goes
    /// over a second connection at 2025-11-25, if the server takes one: a server of both
    /// revisions may serve each differently (its sampling, elicitation and subscriptions), and
    /// in front of it meta-server is that server to each client. A stdio server keeps one
    /// connection (a second would be a second process); its calls are bridged, as are those of
    /// a server of 2026-07-28 only.
    async fn connect_for(
        &self,
        server: &str,
        opener: &Origin,
    ) -> Result<Arc<Connection>, UpstreamError> {
        let conn = self.connect_main(server, opener).await?;
        let slot = self.slot(server)?;
        let speaks_initialize = conn
            .server_info()
            .is_none_or(|i| i.protocol_version.has_initialize());
        if !matches!(opener, Origin::Client { .. })
            || speaks_initialize
            || !matches!(
                slot.config.transport,
                crate::config::TransportConfig::Http { .. }
            )
            || slot.modern_only.load(Ordering::Relaxed)
        {
            return Ok(conn);
        }
        Ok(self.legacy_for(&slot, opener).await.unwrap_or(conn))
    }

    /// The slot's 2025-11-25 connection, opened for `opener` if need be; `None` when the
    /// server does not take one (or cannot be reached for it now).
    async fn legacy_for(&self, slot: &Arc<Slot>, opener: &Origin) -> Option<Arc<Connection>> {
        let mut guard = slot.legacy.lock().await;
        if let Some(conn) = guard.as_ref() {
            conn.touch();
            return Some(conn.clone());
        }
        let server = &slot.config.name;
        // No events: the main connection reports list changes and keeps the catalog.
        let opened = connect::open(
            &slot.config,
            None,
            true,
            (opener.clone(), self.roots(slot)),
            revision::Start::Initialize,
        )
        .await
        .map_err(|e| e.redacted(&slot.redactor));
        let conn = match opened {
            Ok(conn)
                if conn
                    .server_info()
                    .is_some_and(|i| i.protocol_version.has_initialize()) =>
            {
                Arc::new(conn)
            }
            Ok(conn) => {
                conn.close().await;
                return None;
            }
            Err(e @ UpstreamError::Initialize { .. }) => {
                tracing::debug!(
                    server,
                    "no 2025-11-25 connection, its calls are bridged: {e}"
                );
                slot.modern_only.store(true, Ordering::Relaxed);
                return None;
            }
            Err(e) => {
                tracing::debug!(server, "no 2025-11-25 connection now: {e}");
                return None;
            }
        };
        tracing::debug!(
            server,
            "a second connection, at 2025-11-25, for 2025-11-25 sessions"
        );
        *guard = Some(conn.clone());
        tokio::spawn(reap_when_idle(
            Arc::downgrade(slot),
            Arc::downgrade(&conn),
            slot.config.idle_timeout,
        ));
        Some(conn)
    }

    /// The slot's main connection, opened for `opener` if need be.
    async fn connect_main(
        &self,
        server: &str,
        opener: &Origin,
    ) -> Result<Arc<Connection>, UpstreamError> {
        let slot = self.slot(server)?;
        let mut guard = slot.conn.lock().await;
        if let Some(conn) = guard.as_ref() {
            conn.touch();
            return Ok(conn.clone());
        }
        let start = slot.start();
        let asked = (opener.clone(), self.roots(&slot));
        let opened = match &self.opener {
            Opener::Launch => {
                connect::open(
                    &slot.config,
                    self.events.clone(),
                    true,
                    asked,
                    start.clone(),
                )
                .instrument(traced::connect(server))
                .await
            }
            #[cfg(test)]
            Opener::InProcess(serve) => {
                in_process::open(&slot.config, self.events.clone(), serve, asked).await
            }
        }
        .map_err(|e| e.redacted(&slot.redactor));
        slot.note(&opened);
        if let Err(e) = &opened
            && let Some(next) = start.after_failure(e)
        {
            *slot.revision.lock() = next.assumed();
        }
        let conn = Arc::new(opened?);
        if let Some(info) = conn.server_info() {
            *slot.revision.lock() = Some(info.protocol_version.clone());
        }
        // The config dropped this server while it was connecting: it is not kept.
        if !self.holds(&slot) {
            drop(guard);
            conn.close().await;
            return Err(UpstreamError::Unknown(server.to_owned()));
        }
        *guard = Some(conn.clone());
        drop(guard);
        if let Some(events) = &self.events {
            listen::follow_list_changes(server, &conn.peer, events);
            let _ = events.send(Event::Connected(server.to_owned()));
        }
        tokio::spawn(reap_when_idle(
            Arc::downgrade(&slot),
            Arc::downgrade(&conn),
            slot.config.idle_timeout,
        ));
        Ok(conn)
    }

    /// Notes that `server` spoke `revision` when its catalog was made, so that its first
    /// connection in this process needs no probe. Unknown servers are ignored.
    pub fn remember_revision(&self, server: &str, revision: &str) {
        let parsed = serde_json::from_value(serde_json::Value::from(revision));
        if let (Some(slot), Ok(version)) = (self.slots.read().get(server), parsed) {
            *slot.revision.lock() = Some(version);
        }
    }

    /// The challenge of the last request `server` refused for want of a login, taken: the
    /// caller is expected to log in (`meta-server call --login` does).
    pub fn take_login_challenge(&self, server: &str) -> Option<String> {
        let slot = self.slots.read().get(server)?.clone();
        slot.challenge.lock().take()
    }

    /// Connects to `server` without its stored login and lists its tools: the server's
    /// `WWW-Authenticate` challenge if it wants a login, `None` if it answers without one.
    pub async fn probe_login(&self, server: &str) -> Result<Option<String>, UpstreamError> {
        let slot = self.slot(server)?;
        let asked = (Origin::Detached, self.roots(&slot));
        let opened = connect::open(&slot.config, None, false, asked, slot.start())
            .await
            .map_err(|e| e.redacted(&slot.redactor));
        let conn = match opened {
            Err(UpstreamError::NeedsLogin { challenge, .. }) => return Ok(Some(challenge)),
            other => Arc::new(other?),
        };
        let listed = self
            .list_pages(&slot, &conn, "tools/list", |p| conn.peer.list_tools(p))
            .await;
        conn.close().await;
        match listed {
            Ok(_) => Ok(None),
            Err(UpstreamError::NeedsLogin { challenge, .. }) => Ok(Some(challenge)),
            Err(e) => Err(e),
        }
    }

    /// The protocol revision `server` spoke last (or its catalog says it speaks).
    pub fn revision(&self, server: &str) -> Option<String> {
        let slot = self.slots.read().get(server).cloned()?;
        let revision = slot.revision.lock();
        revision.as_ref().map(|v| v.as_str().to_owned())
    }

    /// Whether `server` is connected now, `None` while a connection is being opened.
    pub fn connection_state(&self, server: &str) -> Option<bool> {
        let slot = self.slots.read().get(server).cloned()?;
        slot.conn.try_lock().ok().map(|conn| conn.is_some())
    }

    /// Whether `server` has a live connection now.
    pub async fn is_connected(&self, server: &str) -> bool {
        let slot = self.slots.read().get(server).cloned();
        match slot {
            Some(slot) => slot.conn.lock().await.is_some(),
            None => false,
        }
    }

    /// Pages through the server's complete `tools/list`, within its listing bounds.
    pub async fn list_tools(
        &self,
        server: &str,
    ) -> Result<(Listed<Tool>, Arc<Connection>), UpstreamError> {
        let slot = self.slot(server)?;
        let conn = self.connect(server).await?;
        let _busy = InFlight::new(&conn);
        let tools = self
            .list_pages(&slot, &conn, "tools/list", |p| conn.peer.list_tools(p))
            .await?;
        let _ = conn.listed.set(());
        Ok((tools, conn.clone()))
    }

    /// Forwards one `tools/call` of `origin`, within the server's call timeout. The
    /// upstream's progress for this call goes to `progress` and its requests for the client
    /// to `origin` (see `relay.rs`) while the call lives; dropping the returned future cancels
    /// the upstream request. The result comes without the upstream's protocol stamps
    /// (`envelope.rs`); the JSON-RPC error the server may answer with instead is its answer
    /// too (message and data redacted and capped, see [`error::rejection`]).
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<JsonObject>,
        progress: Option<ProgressSender>,
        origin: &Origin,
    ) -> Result<Answer<CallToolResult>, UpstreamError> {
        let slot = self.slot(server)?;
        let conn = self.connect_for(server, origin).await?;
        let _busy = InFlight::new(&conn);
        if conn.relays.adopt(origin) {
            // It asked for roots before any client could give them: it asks again now.
            let _ = conn.peer.notify_roots_list_changed().await;
            let settle = slot.config.call_timeout.min(relay::SETTLE_LIMIT);
            let _ = tokio::time::timeout(settle, conn.relays.settle_roots(&conn.peer)).await;
        }
        let caller = conn.relays.enter(origin.clone());
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let span = traced::request(server, "tools/call", tool);
        traced::carry(&span, &mut params.meta);
        let call = async {
            if conn.lists_before_calls {
                conn.listed
                    .get_or_init(|| async {
                        let listed = listing::all(slot.config.lists, |p| conn.peer.list_tools(p));
                        match listed.await {
                            Err(e) => tracing::debug!(
                                server,
                                "tools/list before the first call failed: {e}"
                            ),
                            Ok(Err(overrun)) => {
                                tracing::warn!(server, "tools/list before the first call {overrun}")
                            }
                            Ok(Ok(_)) => {}
                        }
                    })
                    .await;
            }
            let mut rounds_without_input = 0;
            params.input_responses = mrtr::first_answers(origin);
            for _ in 0..mrtr::MAX_ROUNDS {
                let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
                // The upstream is asked for progress only when the caller wants it.
                let mut options = mrtr::options(&conn, origin);
                if progress.is_some() {
                    let meta = options.meta.get_or_insert_with(RequestMetaObject::new);
                    meta.extend(wire::wants_progress());
                }
                let handle = conn.peer.send_request_with_option(request, options).await?;
                // Declared in this order so the route is gone before the cancel goes out:
                // progress the upstream sends after it saw the cancel never reaches the caller.
                let mut abandoned = CancelOnDrop::new(&conn.peer, handle.id.clone());
                let _route = progress
                    .clone()
                    .map(|to| conn.progress.register(handle.progress_token.clone(), to));
                let response = handle.await_response().await;
                abandoned.disarm();
                let asked = match response {
                    Err(ServiceError::McpError(error)) => return Ok(Err(error)),
                    response => response?,
                };
                let asked = match asked {
                    ServerResult::CallToolResult(result) => return Ok(Ok(result)),
                    ServerResult::InputRequiredResult(asked) => asked,
                    _ => return Err(ServiceError::UnexpectedResponse),
                };
                let (answers, state) = mrtr::answer(
                    server,
                    origin,
                    conn.relays.roots(),
                    asked,
                    &mut rounds_without_input,
                )
                .await?;
                params.input_responses = answers;
                params.request_state = state;
            }
            Err(ServiceError::InputRequiredRoundsExceeded {
                max_rounds: mrtr::MAX_ROUNDS,
            })
        };
        let called = self
            .bounded(&slot, &conn, &format!("tools/call {tool}"), call)
            .instrument(span.clone())
            .await;
        if let Err(e) = &called {
            traced::failed(&span, e);
        }
        let mut result = match called? {
            Ok(result) => result,
            Err(error) => return Ok(Err(error::rejection(error, &slot.redactor))),
        };
        envelope::strip(&mut result.meta);
        // A server that swallowed our refusal still lets the caller know why it got nothing.
        if let Some(refused) = caller.refused() {
            let said = result.content.iter().any(|c| {
                c.as_text()
                    .is_some_and(|t| t.text.contains(refused.as_str()))
            });
            if !said {
                result
                    .content
                    .push(rmcp::model::ContentBlock::text(refused));
            }
        }
        Ok(Ok(result))
    }

    /// Runs one request with the server's timeout; drops the connection if it died.
    async fn bounded<T>(
        &self,
        slot: &Slot,
        conn: &Arc<Connection>,
        what: &str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, UpstreamError> {
        let result = self
            .bounded_inner(slot, conn, what, request)
            .await
            .map_err(|e| e.redacted(&slot.redactor));
        slot.note(&result);
        result
    }

    async fn bounded_inner<T>(
        &self,
        slot: &Slot,
        conn: &Arc<Connection>,
        what: &str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, UpstreamError> {
        let server = &slot.config.name;
        let after = slot.config.call_timeout;
        // Dropping the request future on timeout makes rmcp send notifications/cancelled.
        let result = tokio::time::timeout(after, request).await;
        if let Ok(Err(_)) = &result
            && let Some(message) = conn.faults.take()
        {
            forget(slot, conn).await;
            conn.close().await;
            return Err(UpstreamError::Refused {
                server: server.clone(),
                message,
            });
        }
        match result {
            Err(_) => Err(UpstreamError::Timeout {
                server: server.clone(),
                what: what.to_owned(),
                after,
            }),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if e.auth_challenge().is_some() => {
                let challenge = e.auth_challenge().unwrap_or_default();
                Err(UpstreamError::needs_login(server, challenge))
            }
            Ok(Err(ServiceError::McpError(e))) => Err(UpstreamError::Protocol {
                server: server.clone(),
                what: what.to_owned(),
                message: e.message.to_string(),
            }),
            Ok(Err(ServiceError::InputRequiredRoundsExceeded { max_rounds })) => {
                Err(UpstreamError::Protocol {
                    server: server.clone(),
                    what: what.to_owned(),
                    message: format!("it still asked for input after {max_rounds} rounds"),
                })
            }
            // The connection is fine; only this answer was of the wrong kind (e.g. a task).
            Ok(Err(ServiceError::UnexpectedResponse)) => Err(UpstreamError::Protocol {
                server: server.clone(),
                what: what.to_owned(),
                message: "unexpected kind of response".to_owned(),
            }),
            Ok(Err(e)) => {
                let error = slot.redactor.apply(&e.to_string());
                tracing::warn!(server, error, "upstream connection lost");
                forget(slot, conn).await;
                conn.close().await;
                Err(UpstreamError::Closed {
                    server: server.clone(),
                    what: what.to_owned(),
                    stderr: conn.stderr.final_tail(STDERR_SETTLE).await,
                })
            }
        }
    }

    /// Tells the servers `client`'s calls started, and that are given its roots, that its
    /// roots changed (`notifications/roots/list_changed`); they ask it again for its roots.
    pub async fn roots_changed(&self, client: ClientId) {
        let slots: Vec<Arc<Slot>> = self.slots.read().values().cloned().collect();
        for slot in slots {
            let conns = [
                slot.conn.lock().await.clone(),
                slot.legacy.lock().await.clone(),
            ];
            let given = |c: &Arc<Connection>| c.relays.roots().asks_client();
            for conn in conns
                .into_iter()
                .flatten()
                .filter(|c| c.relays.opened_by(client) && given(c))
            {
                let sent = conn.peer.notify_roots_list_changed().await;
                if let Err(e) = sent {
                    tracing::debug!(server = %slot.config.name, error = %e, "roots/list_changed not sent");
                }
            }
        }
    }

    /// Stops one server if it is connected.
    pub async fn disconnect(&self, server: &str) {
        let slot = self.slots.read().get(server).cloned();
        if let Some(slot) = slot {
            let conns = [
                slot.conn.lock().await.take(),
                slot.legacy.lock().await.take(),
            ];
            for conn in conns.into_iter().flatten() {
                conn.close().await;
            }
        }
    }

    /// Stops `server` unless a call is in flight on it (used after background indexing).
    pub async fn disconnect_if_idle(&self, server: &str) {
        let slot = self.slots.read().get(server).cloned();
        if let Some(slot) = slot {
            for held in [&slot.conn, &slot.legacy] {
                let mut guard = held.lock().await;
                if guard
                    .as_ref()
                    .is_some_and(|c| c.in_flight.load(Ordering::SeqCst) == 0)
                    && let Some(conn) = guard.take()
                {
                    drop(guard);
                    conn.close().await;
                }
            }
        }
    }

    /// Stops every connected server and waits for them to exit.
    pub async fn shutdown(&self) {
        let names: Vec<String> = self.slots.read().keys().cloned().collect();
        futures::future::join_all(names.iter().map(|name| self.disconnect(name))).await;
    }
}

/// Sends `notifications/cancelled` for a request whose caller went away before the answer
/// (timeout or client cancellation), so the upstream stops working on it.
struct CancelOnDrop<'a> {
    peer: &'a Peer<RoleClient>,
    id: Option<RequestId>,
}

impl<'a> CancelOnDrop<'a> {
    fn new(peer: &'a Peer<RoleClient>, id: RequestId) -> Self {
        Self { peer, id: Some(id) }
    }

    fn disarm(&mut self) {
        self.id = None;
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        let params = CancelledNotificationParam::new(
            Some(id),
            Some("cancelled by meta-server's caller".to_owned()),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}

/// Removes `conn` from its slot unless a newer connection has replaced it.
async fn forget(slot: &Slot, conn: &Arc<Connection>) {
    for held in [&slot.conn, &slot.legacy] {
        let mut guard = held.lock().await;
        if guard.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            *guard = None;
        }
    }
}

/// Stops a connection once it has had no call in flight for `idle`.
async fn reap_when_idle(slot: Weak<Slot>, conn: Weak<Connection>, idle: Duration) {
    loop {
        let (Some(slot), Some(live)) = (slot.upgrade(), conn.upgrade()) else {
            return;
        };
        let now = Instant::now();
        let due = live.idle_since() + idle;
        let busy = live.in_flight.load(Ordering::SeqCst) > 0;
        if !busy && due <= now {
            tracing::info!(server = %slot.config.name, "stopping idle upstream");
            forget(&slot, &live).await;
            live.close().await;
            return;
        }
        drop((slot, live));
        tokio::time::sleep_until(if busy { now + idle } else { due }).await;
    }
}
