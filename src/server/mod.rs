//! The MCP server the client talks to: three fixed meta-tools over the library of upstream
//! tools. The only module that knows the meta-tools exist.

mod always;
mod builtin;
mod call_tool;
mod definitions;
mod details_tool;
mod freshness;
mod guard;
mod http;
mod instructions;
mod library;
mod reply;
mod script_tool;
mod search_tool;
mod skill_tool;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, DiscoverRequestMethod, DiscoverResult, Implementation,
    InitializeRequestParams, InitializeResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceTemplate, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::Value;

use crate::budget::{self, Budgets, ByteEstimate, Limits, O200k, Route, TokenCounter};
use crate::config::{Settings, Tokenizer};
use crate::result::{ResultHandler, SpillStore, store::DEFAULT_SPILL_BYTES};
use crate::search::SearchError;
use crate::upstream::Manager;

pub use definitions::definitions;
pub use http::{HttpError, HttpOptions, HttpServer, PATH as HTTP_PATH, Token};
pub use library::{Library, LoadReport, qualified_name};

/// URI scheme of skills as resources.
const SKILL_SCHEME: &str = "skill://";

/// Shared state of one serving process.
pub struct State {
    pub settings: Settings,
    pub manager: Arc<Manager>,
    pub results: ResultHandler,
    library: RwLock<Arc<Library>>,
    rebuilding: Mutex<()>,
    indexing: Mutex<BTreeSet<String>>,
    /// Servers whose tools rank higher because a skill that needs them was read.
    boosted: Mutex<BTreeSet<String>>,
    /// Servers whose tool list changed while they were disconnected.
    dirty: Mutex<BTreeSet<String>>,
    /// Upstream events, taken by the freshness watcher.
    events: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<crate::upstream::Event>>>,
    /// The embedding model, once loading was tried (`None`: BM25 only).
    embedder: OnceLock<Option<Arc<crate::search::embed::Embedder>>>,
    /// Held while tool vectors are computed, so only one thread does it.
    embedding: Mutex<()>,
}

impl State {
    pub fn new(settings: Settings, library: Library) -> Arc<Self> {
        let r = &settings.results;
        let counter: Arc<dyn TokenCounter> = match r.tokenizer {
            Tokenizer::O200k => Arc::new(O200k),
            Tokenizer::Estimate => Arc::new(ByteEstimate),
        };
        let store = Arc::new(SpillStore::new(r.ttl, r.memory_bytes, DEFAULT_SPILL_BYTES));
        let (events, receiver) = tokio::sync::mpsc::unbounded_channel();
        Arc::new(Self {
            manager: Manager::with_events(&settings.servers, events),
            results: ResultHandler::new(store, counter),
            settings,
            library: RwLock::new(Arc::new(library)),
            rebuilding: Mutex::new(()),
            indexing: Mutex::new(BTreeSet::new()),
            dirty: Mutex::new(BTreeSet::new()),
            boosted: Mutex::new(BTreeSet::new()),
            events: Mutex::new(Some(receiver)),
            embedder: OnceLock::new(),
            embedding: Mutex::new(()),
        })
    }

    /// The embedding model: loaded on first use from `settings.embed_dir`. A build without
    /// the feature, no configured directory, or missing files give `None` (BM25 only).
    fn embedder(&self) -> Option<Arc<crate::search::embed::Embedder>> {
        self.embedder
            .get_or_init(|| {
                let Some(dir) = &self.settings.embed_dir else {
                    if cfg!(feature = "embeddings") {
                        tracing::info!(
                            "embeddings not configured (set {} or metaServer.embeddings.dir); BM25 only",
                            crate::search::embed::ENV_DIR
                        );
                    }
                    return None;
                };
                let started = std::time::Instant::now();
                match crate::search::embed::Embedder::load(dir) {
                    Ok(e) => {
                        tracing::info!(dir = %dir.display(), took = ?started.elapsed(), "embedding model loaded");
                        Some(Arc::new(e))
                    }
                    Err(e) => {
                        tracing::warn!("embeddings off, BM25 only: {e}");
                        None
                    }
                }
            })
            .clone()
    }

    /// Loads the model if needed and computes the tool vectors of the current library (and of
    /// any library swapped in meanwhile), persisting them next to the catalogs. Blocking.
    pub fn embed_library(&self) {
        let Some(embedder) = self.embedder() else {
            return;
        };
        let _one = self.embedding.lock().expect("embedding lock");
        loop {
            let library = self.library();
            if !library.is_hybrid() {
                let started = std::time::Instant::now();
                match library.embed(embedder.clone(), Some(&self.settings.catalog_dir)) {
                    Ok(stats) => tracing::info!(
                        tools = stats.tools,
                        embedded = stats.embedded,
                        took = ?started.elapsed(),
                        "tool vectors ready; search is hybrid"
                    ),
                    Err(e) => {
                        tracing::warn!("tool vectors not computed, BM25 only: {e}");
                        return;
                    }
                }
            }
            if Arc::ptr_eq(&library, &self.library()) {
                return;
            }
        }
    }

    /// [`Self::embed_library`] on a thread of its own: BM25 answers until vectors are ready.
    /// After a library swap this is quick: unchanged tools come from the vector files.
    pub fn embed_in_background(self: &Arc<Self>) {
        if self.settings.embed_dir.is_none() && !cfg!(feature = "embeddings") {
            return;
        }
        if self.embedder.get().is_some_and(Option::is_none) {
            return;
        }
        let state = self.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("embed".into())
            .spawn(move || state.embed_library())
        {
            tracing::warn!("cannot start the embedding thread, BM25 only: {e}");
        }
    }

    /// The soft and hard limits for results on `route`, for a client whose own limit is
    /// `client` (learned per session from `initialize`).
    pub fn limits(&self, route: &Route, client: Option<usize>) -> Limits {
        let r = &self.settings.results;
        let budgets = Budgets {
            default_soft: r
                .max_result_tokens
                .map_or(budget::DEFAULT_RESULT_TOKENS, |t| t as usize),
            per_server: self
                .settings
                .servers
                .iter()
                .filter_map(|s| Some((s.name.clone(), s.max_result_tokens? as usize)))
                .collect(),
            hard: r
                .hard_result_tokens
                .map_or(budget::DEFAULT_HARD_TOKENS, |t| t as usize),
            client,
        };
        budgets.limits(route)
    }

    /// Passes a result through result handling for `route`.
    fn shape(
        &self,
        tool: &str,
        route: Route,
        client: Option<usize>,
        result: rmcp::model::CallToolResult,
    ) -> rmcp::model::CallToolResult {
        let limits = self.limits(&route, client);
        self.results.shape(tool, &route, limits, result)
    }

    /// The current library (a snapshot; cheap to hold across a call).
    pub fn library(&self) -> Arc<Library> {
        self.library.read().expect("library lock").clone()
    }

    /// Swaps in a library where `catalog` replaces its server's previous one.
    fn replace_catalog(
        &self,
        catalog: crate::catalog::Catalog,
    ) -> Result<(), crate::search::SearchError> {
        // One rebuild at a time, so concurrent refreshes never drop each other's catalogs;
        // searches keep reading the old library until the swap.
        let _writer = self.rebuilding.lock().expect("rebuild lock");
        let library = self
            .library()
            .with_catalog(&self.settings.servers, catalog)?;
        *self.library.write().expect("library lock") = Arc::new(library);
        Ok(())
    }

    /// Whether `server`'s catalog should be re-listed on its next connection: missing, made
    /// from another launch config, or changed while disconnected.
    pub fn is_stale(&self, server: &str) -> bool {
        let Some(config) = self.settings.server(server) else {
            return false;
        };
        let library = self.library();
        let fresh = library
            .catalogs
            .get(server)
            .is_some_and(|c| !c.is_stale(config, std::time::SystemTime::now()));
        !fresh || self.dirty.lock().expect("dirty lock").contains(server)
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
    /// The meta-tools, then the tools of alwaysLoad servers: fixed at start-up.
    tools: Arc<[rmcp::model::Tool]>,
    /// This session's client's own result limit, learned from its `initialize`.
    client_limit: Arc<OnceLock<Option<usize>>>,
}

impl MetaServer {
    /// Connects alwaysLoad servers and fixes `tools/list` and the `initialize` instructions
    /// from the catalogs present now.
    pub async fn start(state: Arc<State>) -> Self {
        let always = always::prepare(&state).await;
        let tools = definitions().iter().cloned().chain(always).collect();
        let instructions = instructions::overview(&state.settings, &state.library()).into();
        Self {
            state,
            instructions,
            tools,
            client_limit: Arc::default(),
        }
    }

    /// A handler for one more client session: shared state, its own client limit.
    pub fn for_session(&self) -> Self {
        Self {
            client_limit: Arc::default(),
            ..self.clone()
        }
    }

    fn client_limit(&self) -> Option<usize> {
        self.client_limit.get().copied().flatten()
    }
}

impl ServerHandler for MetaServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
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

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        let client = &request.client_info.name;
        let limit = budget::client_limit(client);
        if let Some(limit) = limit {
            tracing::info!(
                client,
                limit,
                "results are kept within the client's own limit"
            );
        }
        let _ = self.client_limit.set(limit);
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    /// Skills, as `skill://<name>` resources holding their SKILL.md.
    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let resources = self
            .state
            .library()
            .skills
            .iter()
            .map(|skill| {
                let mut r = rmcp::model::Resource::new(
                    format!("{SKILL_SCHEME}{}", skill.name),
                    skill.name.clone(),
                );
                r.description = Some(skill.description.clone());
                r.mime_type = Some("text/markdown".into());
                r
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut template = ResourceTemplate::new(
            format!("{}{{resourceId}}", crate::result::RESOURCE_PREFIX),
            "stored-result",
        );
        template.title = Some("Full result of a truncated tool call".into());
        template.description = Some(
            "The whole result behind a TRUNCATION NOTICE; resourceId is the notice's resourceId (r-xxxxxxxx).".into(),
        );
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if let Some(name) = request.uri.strip_prefix(SKILL_SCHEME) {
            let library = self.state.library();
            let skill = library
                .skills
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| {
                    McpError::resource_not_found(
                        format!("no skill \"{name}\"; resources/list shows the skills"),
                        None,
                    )
                })?;
            let mut contents =
                rmcp::model::ResourceContents::text(skill.text.clone(), request.uri.clone());
            if let rmcp::model::ResourceContents::TextResourceContents { mime_type, .. } =
                &mut contents
            {
                *mime_type = Some("text/markdown".into());
            }
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
        let id = crate::result::resource_id(&request.uri).ok_or_else(|| {
            McpError::resource_not_found(
                format!(
                    "unknown resource {}; stored results look like {}r-1a2b3c4d",
                    request.uri,
                    crate::result::RESOURCE_PREFIX
                ),
                None,
            )
        })?;
        match self.state.results.read_resource(id) {
            Ok(contents) => Ok(ReadResourceResult::new(vec![contents]).into()),
            Err(e) => Err(McpError::resource_not_found(e.to_string(), None)),
        }
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
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let state = &self.state;
        let client = self.client_limit();
        let caller = call_tool::Caller {
            client_limit: client,
            cancelled: cx.ct.clone(),
            progress_to: cx
                .meta
                .get_progress_token()
                .map(|token| (cx.peer.clone(), token)),
        };
        let result = match request.name.as_ref() {
            definitions::SEARCH_TOOLS => state.shape(
                definitions::SEARCH_TOOLS,
                Route::SearchTools,
                client,
                search_tool::run(state, args),
            ),
            definitions::GET_TOOL_DETAILS => state.shape(
                definitions::GET_TOOL_DETAILS,
                Route::GetToolDetails,
                client,
                details_tool::run(state, args),
            ),
            definitions::CALL_TOOL => call_tool::run(state, &caller, args).await,
            listed if always::is_listed(&self.tools, listed) => {
                let args = serde_json::json!({"name": listed, "arguments": args});
                call_tool::run(state, &caller, args).await
            }
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

/// Start-up shared by stdio and HTTP: loads the library from the catalogs, starts the
/// freshness watcher, connects alwaysLoad servers, fixes `tools/list` and the `initialize`
/// instructions, and indexes servers without a catalog in the background.
async fn start(settings: Settings) -> Result<MetaServer, SearchError> {
    let (library, report) = Library::load(&settings)?;
    for warning in &report.warnings {
        tracing::warn!("{warning}");
    }
    let state = State::new(settings, library);
    state.embed_in_background();
    tokio::spawn(freshness::watch(state.clone()));
    let server = MetaServer::start(state.clone()).await;
    let missing: Vec<String> = report
        .missing
        .into_iter()
        .filter(|s| !state.library().catalogs.contains_key(s))
        .collect();
    if !missing.is_empty() {
        tokio::spawn(freshness::index_missing(state.clone(), missing));
    }
    Ok(server)
}

/// Serves MCP over stdin/stdout until the client closes stdin or a signal arrives, then stops
/// every upstream.
pub async fn serve_stdio(settings: Settings) -> anyhow::Result<()> {
    let server = start(settings).await?;
    let state = server.state.clone();
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
