//! Upstreams inside the test process: an rmcp server on one end of an in-memory pipe and
//! meta-server's client on the other, so tests can run on tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex as StdMutex;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListPromptsResult,
    ListToolsResult, PaginatedRequestParams, Prompt, ServerCapabilities,
    ServerConfig as ServerInfo, Tool,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use tokio::io::DuplexStream;
use tokio::sync::Mutex;

use super::connect::{StderrTail, UpstreamClient};
use super::inbox::Handover;
use super::progress::ProgressRoutes;
use super::relay::{Origin, Relays};
use super::{Connection, Events, Manager, UpstreamError};
use crate::config::ServerConfig;
use rmcp::transport::async_rw::AsyncRwTransport;

/// Starts the server named by the first argument on the given end of a pipe.
pub type Serve = Arc<dyn Fn(&str, DuplexStream) + Send + Sync>;

/// Connects to an in-process server started by `serve`.
pub(super) async fn open(
    config: &ServerConfig,
    events: Option<Events>,
    serve: &Serve,
    (opener, roots): (Origin, super::roots::Roots),
) -> Result<Connection, UpstreamError> {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    serve(&config.name, theirs);
    let progress = ProgressRoutes::default();
    let relays = Relays::new(opener, roots);
    let client = UpstreamClient::new(config.name.clone(), events, relays.clone());
    let (read, write) = tokio::io::split(ours);
    let handover = Handover {
        server: config.name.clone(),
        progress: progress.clone(),
        relays: relays.clone(),
    };
    let transport = handover.wrap(AsyncRwTransport::new_client(read, write));
    let service = client
        .serve(transport)
        .await
        .map_err(|e| UpstreamError::Initialize {
            server: config.name.clone(),
            message: e.to_string(),
            stderr: String::new(),
        })?;
    Ok(Connection {
        peer: service.peer().clone(),
        service: Mutex::new(Some(service)),
        pid: None,
        lists_before_calls: false,
        listed: Default::default(),
        stderr: StderrTail::default(),
        progress,
        relays,
        faults: Default::default(),
        last_used: StdMutex::new(tokio::time::Instant::now()),
        in_flight: Default::default(),
        subscribed: Default::default(),
    })
}

/// A small upstream: `echo {text}`, `sleep {secs}` (on tokio's clock), tool and prompt lists
/// that tests can change and announce, and a count of `tools/list` requests and live
/// connections.
#[derive(Clone, Default)]
pub(crate) struct TestUpstream {
    pub tools: Arc<StdMutex<Vec<Tool>>>,
    pub prompts: Arc<StdMutex<Vec<Prompt>>>,
    pub lists: Arc<AtomicUsize>,
    pub live: Arc<AtomicUsize>,
    peers: Arc<StdMutex<Vec<Peer<RoleServer>>>>,
}

impl TestUpstream {
    pub fn new(tools: &[&str]) -> Self {
        let upstream = Self::default();
        upstream.set_tools(tools);
        upstream
    }

    /// A manager of `servers` that all connect to this upstream.
    pub fn manager(&self, servers: &[ServerConfig], events: Option<Events>) -> Arc<Manager> {
        Manager::in_process(servers, events, self.serve())
    }

    /// What starts this upstream on a pipe.
    pub fn serve(&self) -> Serve {
        let upstream = self.clone();
        Arc::new(move |_server, io| {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(running) = upstream.clone().serve(io).await else {
                    return;
                };
                upstream.live.fetch_add(1, Ordering::SeqCst);
                upstream.peers.lock().push(running.peer().clone());
                let _ = running.waiting().await;
                upstream.live.fetch_sub(1, Ordering::SeqCst);
            });
        })
    }

    pub fn set_tools(&self, names: &[&str]) {
        let schema = Arc::new(
            serde_json::json!({"type": "object"})
                .as_object()
                .cloned()
                .unwrap(),
        );
        *self.tools.lock() = names
            .iter()
            .map(|n| Tool::new(n.to_string(), format!("does {n}"), schema.clone()))
            .collect();
    }

    pub fn set_prompts(&self, names: &[&str]) {
        *self.prompts.lock() = names
            .iter()
            .map(|n| Prompt::new(*n, Some(format!("asks {n}")), None))
            .collect();
    }

    /// Sends `notifications/tools/list_changed` on every connection.
    pub async fn announce_change(&self) {
        let peers = self.peers.lock().clone();
        for peer in peers {
            let _ = peer.notify_tool_list_changed().await;
        }
    }

    /// Sends `notifications/prompts/list_changed` on every connection.
    pub async fn announce_prompts_change(&self) {
        let peers = self.peers.lock().clone();
        for peer in peers {
            let _ = peer.notify_prompt_list_changed().await;
        }
    }
}

impl ServerHandler for TestUpstream {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(
            self.prompts.lock().clone(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        Ok(ListToolsResult::with_all_items(self.tools.lock().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let text = match request.name.as_ref() {
            "echo" => args
                .get("text")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned(),
            "sleep" => {
                let secs = args.get("secs").and_then(|v| v.as_u64()).unwrap_or(0);
                tokio::time::sleep(Duration::from_secs(secs)).await;
                format!("slept {secs}s")
            }
            other => return Err(McpError::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}
