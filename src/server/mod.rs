//! The MCP server the client talks to: three fixed meta-tools over the library of upstream
//! tools. The only module that knows the meta-tools exist.

mod call_tool;
mod definitions;
mod details_tool;
mod guard;
mod indexer;
mod instructions;
mod library;
mod reply;
mod search_tool;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, DiscoverRequestMethod, DiscoverResult, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::config::Settings;
use crate::upstream::Manager;

pub use definitions::definitions;
pub use library::{Library, LoadReport, qualified_name};

/// Shared state of one serving process.
pub struct State {
    pub settings: Settings,
    pub manager: Arc<Manager>,
    library: RwLock<Arc<Library>>,
    indexing: Mutex<BTreeSet<String>>,
}

impl State {
    pub fn new(settings: Settings, library: Library) -> Arc<Self> {
        Arc::new(Self {
            manager: Manager::new(&settings.servers),
            settings,
            library: RwLock::new(Arc::new(library)),
            indexing: Mutex::new(BTreeSet::new()),
        })
    }

    /// The current library (a snapshot; cheap to hold across a call).
    pub fn library(&self) -> Arc<Library> {
        self.library.read().expect("library lock").clone()
    }

    fn replace_library(&self, library: Library) {
        *self.library.write().expect("library lock") = Arc::new(library);
    }

    /// Servers being indexed in the background right now, sorted.
    pub fn indexing(&self) -> Vec<String> {
        self.indexing
            .lock()
            .expect("indexing lock")
            .iter()
            .cloned()
            .collect()
    }
}

/// The `ServerHandler` behind `meta-server serve`.
#[derive(Clone)]
pub struct MetaServer {
    state: Arc<State>,
    instructions: Arc<str>,
}

impl MetaServer {
    /// Fixes the `initialize` instructions from the catalogs present now.
    pub fn new(state: Arc<State>) -> Self {
        let instructions = instructions::overview(&state.settings, &state.library()).into();
        Self {
            state,
            instructions,
        }
    }
}

impl ServerHandler for MetaServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "meta-server",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_instructions(self.instructions.to_string())
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    /// This server speaks the `initialize` era only: answer the probe at once so clients fall back.
    async fn discover(&self, _cx: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        Err(McpError::method_not_found::<DiscoverRequestMethod>())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(definitions().to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let state = &self.state;
        let result = match request.name.as_ref() {
            definitions::SEARCH_TOOLS => search_tool::run(state, args),
            definitions::GET_TOOL_DETAILS => details_tool::run(state, args),
            definitions::CALL_TOOL => call_tool::run(state, args, cx.ct.clone()).await,
            other => {
                return Err(McpError::invalid_params(
                    format!(
                        "unknown tool \"{other}\"; this server has search_tools, get_tool_details and call_tool"
                    ),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

/// Runs `search_tools` with these arguments: the CLI's `search` uses the very same code.
pub fn search(state: &State, args: Value) -> rmcp::model::CallToolResult {
    search_tool::run(state, args)
}

/// Serves MCP over stdin/stdout until the client closes stdin or a signal arrives, then stops
/// every upstream.
pub async fn serve_stdio(settings: Settings) -> anyhow::Result<()> {
    let (library, report) = Library::load(&settings)?;
    for warning in &report.warnings {
        tracing::warn!("{warning}");
    }
    let state = State::new(settings, library);
    let server = MetaServer::new(state.clone());
    if !report.missing.is_empty() {
        tokio::spawn(indexer::index_missing(state.clone(), report.missing));
    }
    let (stdin, stdout) = rmcp::transport::stdio();
    let transport = guard::PreInitGuard::new(AsyncRwTransport::new_server(stdin, stdout));
    let running = server.serve(transport).await?;
    tokio::select! {
        quit = running.waiting() => tracing::info!(?quit, "client closed the connection"),
        () = shutdown_signal() => tracing::info!("signal received"),
    }
    tracing::info!("stopping upstreams");
    state.manager.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}
