//! The rmcp `ServerHandler` clients of both revisions talk to: `initialize` and
//! `server/discover`, `tools/list`, the meta-tools, resources (skills and stored results), and
//! the upstreams' prompts, resources and completions passed through.
//! One clone per session (per request for a 2026-07-28 client over HTTP) over the shared
//! [`State`].

use std::sync::Arc;

#[expect(deprecated, reason = "logging, for 2025-11-25 clients")]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    GetPromptRequestParams, GetPromptResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceTemplate, ResultType, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};

use crate::budget;
use crate::result::Owner;

use super::principal::{ANONYMOUS, Principal};
use super::{instructions, login_offer, revision};
use crate::server::State;
use crate::server::caller::{Caller, Introduced};
use crate::server::catalogs::always;
use crate::server::passthrough::{self, Passthrough};
use crate::server::tools::request::Request;
use crate::server::tools::{definitions, reply};
use crate::upstream::{ClientId, LogLevel, Origin};

/// URI scheme of skills as resources.
const SKILL_SCHEME: &str = "skill://";

/// Whether meta-server serves `uri` itself (a skill or a stored result), never an upstream.
fn is_own(uri: &str) -> bool {
    uri.starts_with(SKILL_SCHEME) || uri.starts_with(crate::result::RESOURCE_PREFIX)
}

/// The `ServerHandler` behind `meta-server serve`.
#[derive(Clone)]
pub struct MetaServer {
    pub(in crate::server) state: Arc<State>,
    instructions: Arc<str>,
    /// The meta-tools, then the tools of alwaysLoad servers: fixed at start-up.
    tools: Arc<[rmcp::model::Tool]>,
    /// Whose results this session stores and may read back.
    owner: Owner,
    /// Every session reads every stored result (one owner for all).
    share_results: bool,
    /// Upstream prompts, resources and completions, routed from the catalogs.
    passthrough: Arc<Passthrough>,
    /// This session, to whose client an upstream's requests during its calls go.
    client: ClientId,
    /// The log level this session's client asked for; upstream log messages at or above it
    /// reach the client.
    log_level: LogLevel,
    /// The servers whose instructions this session's client was given.
    introduced: Introduced,
}

impl MetaServer {
    /// Connects alwaysLoad servers and fixes `tools/list` and the `initialize` instructions
    /// from the catalogs present now.
    pub async fn start(state: Arc<State>) -> Self {
        let always = always::prepare(&state).await;
        let tools = definitions::definitions()
            .iter()
            .cloned()
            .chain(always)
            .collect();
        let instructions = instructions::overview(&state.settings, &state.library()).into();
        Self {
            state,
            instructions,
            tools,
            owner: Owner::session(),
            share_results: false,
            passthrough: Arc::new(Passthrough::new(is_own)),
            client: ClientId::next(),
            log_level: LogLevel::default(),
            introduced: Introduced::per_session(),
        }
    }

    /// Lets every session read every stored result, instead of only the session's own.
    pub fn sharing_results(self) -> Self {
        Self {
            owner: Owner::shared(),
            share_results: true,
            ..self
        }
    }

    /// A handler for one more client session: shared state and, unless results are shared,
    /// its own stored results.
    pub fn for_session(&self) -> Self {
        Self {
            owner: if self.share_results {
                Owner::shared()
            } else {
                Owner::session()
            },
            client: ClientId::next(),
            log_level: LogLevel::default(),
            introduced: Introduced::per_session(),
            ..self.clone()
        }
    }

    /// Whose stored results a request may create and read. Over HTTP: the principal that
    /// sent it (its bearer token) and, unless results are shared, its MCP session id; both
    /// are the same on every replica, so a result stored through one is read through any. A
    /// 2026-07-28 request has no session: its results are its principal's. Elsewhere (stdio):
    /// this session's own owner.
    fn owner(&self, extensions: &rmcp::model::Extensions) -> Owner {
        let Some(parts) = extensions.get::<http::request::Parts>() else {
            return self.owner.clone();
        };
        let principal = parts
            .extensions
            .get::<Principal>()
            .map_or(ANONYMOUS, |p| p.name());
        if self.share_results {
            return Owner::of(principal, None);
        }
        match parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            Some(session) => Owner::of(principal, Some(session)),
            None => Owner::of(principal, None),
        }
    }
}

/// The principal of a request over HTTP (anonymous without a token); `None` over stdio.
fn principal(extensions: &rmcp::model::Extensions) -> Option<Arc<str>> {
    let parts = extensions.get::<http::request::Parts>()?;
    let name = parts
        .extensions
        .get::<Principal>()
        .map_or(ANONYMOUS, |p| p.name());
    Some(name.into())
}

impl ServerHandler for MetaServer {
    #[expect(deprecated, reason = "logging, for 2025-11-25 clients")]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_completions()
                .enable_prompts()
                .enable_resources()
                .enable_logging()
                .enable_tools()
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
        std::borrow::Cow::Borrowed(revision::supported())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        let client = &request.client_info.name;
        if let Some(limit) = budget::client_limit(client) {
            tracing::info!(
                client,
                limit,
                "results are kept within the client's own limit"
            );
        }
        cx.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    /// Upstream log messages of this session's calls reach the client from `level` up.
    #[expect(deprecated, reason = "logging, for 2025-11-25 clients")]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.log_level.lock() = Some(request.level);
        Ok(())
    }

    /// The client's new roots reach the servers its calls started, which ask for them again.
    async fn on_roots_list_changed(&self, _cx: NotificationContext<RoleServer>) {
        self.state.manager.roots_changed(self.client).await;
    }

    /// Skills, as `skill://<name>` resources holding their SKILL.md, then the upstreams'
    /// resources from their catalogs.
    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let library = self.state.library();
        let skills = library.skills.iter().map(|skill| {
            let mut r = rmcp::model::Resource::new(
                format!("{SKILL_SCHEME}{}", skill.name),
                skill.name.clone(),
            );
            r.description = Some(skill.description.clone());
            r.mime_type = Some("text/markdown".into());
            r
        });
        let routes = self.passthrough.routes(&self.state);
        let resources = skills.chain(routes.resources().iter().cloned()).collect();
        let mut list = ListResourcesResult::with_all_items(resources);
        if let Some((ttl, scope)) = self.catalog_list_hints(&cx) {
            list = list.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(list)
    }

    /// meta-server's stored-result template, then the upstreams' templates.
    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let mut template = ResourceTemplate::new(
            format!("{}{{resourceId}}", crate::result::RESOURCE_PREFIX),
            "stored-result",
        );
        template.title = Some("Full result of a truncated tool call".into());
        template.description = Some(
            "The whole result behind a TRUNCATION NOTICE; resourceId is the notice's resourceId (r- and 32 hex digits).".into(),
        );
        let routes = self.passthrough.routes(&self.state);
        let templates = std::iter::once(template)
            .chain(routes.templates().iter().cloned())
            .collect();
        let mut list = ListResourceTemplatesResult::with_all_items(templates);
        if let Some((ttl, scope)) = self.catalog_list_hints(&cx) {
            list = list.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(list)
    }

    /// The upstreams' prompts from their catalogs, named `<server>__<prompt>`.
    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let routes = self.passthrough.routes(&self.state);
        let mut list = ListPromptsResult::with_all_items(routes.prompts().to_vec());
        if let Some((ttl, scope)) = self.catalog_list_hints(&cx) {
            list = list.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(list)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let result = self
            .passthrough
            .get_prompt(&self.state, request, &cx.ct)
            .await?;
        Ok(GetPromptResponse::Complete(result))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.passthrough
            .complete(&self.state, request, &cx.ct)
            .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if let Some(name) = request.uri.strip_prefix(SKILL_SCHEME) {
            let library = self.state.library();
            let skill = library
                .skills
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| {
                    McpError::resource_not_found(
                        format!(
                            "no skill \"{}\"; resources/list shows the skills",
                            reply::echo(name)
                        ),
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
        if !is_own(&request.uri)
            && let Some(read) = self
                .passthrough
                .read(&self.state, request.clone(), &cx.ct)
                .await
        {
            return Ok(read?.into());
        }
        let id = crate::result::resource_id(&request.uri).ok_or_else(|| {
            McpError::resource_not_found(
                format!(
                    "unknown resource {}; resources/list and resources/templates/list show the resources, and stored results look like {}r-<32 hex digits>",
                    reply::echo(&request.uri),
                    crate::result::RESOURCE_PREFIX
                ),
                None,
            )
        })?;
        match self
            .state
            .results
            .read_resource(id, &self.owner(&cx.extensions))
            .await
        {
            Ok(contents) => Ok(ReadResourceResult::new(vec![contents]).into()),
            Err(e) => Err(McpError::resource_not_found(e.to_string(), None)),
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut list = ListToolsResult::with_all_items(self.tools.to_vec());
        if let Some((ttl, scope)) = revision::fixed_list_hints(&cx) {
            list = list.with_ttl_ms(ttl).with_cache_scope(scope);
        }
        Ok(list)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let started = std::time::Instant::now();
        let caller = Caller {
            // From this request's `_meta` (2026-07-28) or its session's `initialize`.
            client_limit: cx
                .client_info()
                .and_then(|client| budget::client_limit(&client.name)),
            owner: self.owner(&cx.extensions),
            principal: principal(&cx.extensions),
            cancelled: cx.ct.clone(),
            progress_to: cx
                .meta
                .get_progress_token()
                .map(|token| (cx.peer.clone(), token)),
            origin: if revision::is_stateless(&cx) {
                Origin::Stateless(self.client)
            } else {
                Origin::Client {
                    id: self.client,
                    peer: cx.peer.clone(),
                    log_level: self.log_level.clone(),
                }
            },
            // No session remembers for a 2026-07-28 client: it gets them every time.
            introduced: if revision::is_stateless(&cx) {
                Introduced::default()
            } else {
                self.introduced.clone()
            },
        };
        let arguments = request.arguments.unwrap_or_default();
        let request = Request::read(&request.name, arguments, &self.tools)?;
        let servers = request.servers();
        // Servers without a catalog that this call needs are listed first (first run).
        let result = match request.prepare(&self.state).await {
            Err(failed) => reply::error(failed.to_string()),
            Ok(()) => request.run(&self.state, &caller).await,
        };
        // A 2026-07-28 client cannot be sent an elicitation: no login offer (yet) for it.
        let mut result = if revision::is_stateless(&cx) {
            result
        } else {
            self.offer_logins(&servers, result, &cx.peer, started)
        };
        // An upstream's result read from a 2025-11-25 server has no `resultType`, which a
        // 2026-07-28 client needs; rmcp drops it again for a 2025-11-25 one.
        result.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(result.into())
    }
}

impl MetaServer {
    /// The cache hints of a list made from the catalogs, for a 2026-07-28 client.
    fn catalog_list_hints(
        &self,
        cx: &RequestContext<RoleServer>,
    ) -> Option<(u64, rmcp::model::CacheScope)> {
        revision::is_stateless(cx).then(|| {
            let ttl = passthrough::list_ttl(&self.state);
            (ttl.as_millis() as u64, rmcp::model::CacheScope::Public)
        })
    }

    /// When `result` of a call begun at `started` failed because one of `servers` needs a
    /// login, offers the login to the user (URL-mode elicitation, if the client takes it) and
    /// says so in the result; a login that completed meanwhile is not offered again.
    fn offer_logins(
        &self,
        servers: &[String],
        mut result: CallToolResult,
        peer: &rmcp::service::Peer<RoleServer>,
        started: std::time::Instant,
    ) -> CallToolResult {
        if result.is_error != Some(true) {
            return result;
        }
        for server in servers {
            let Some(challenge) = self.state.manager.take_login_challenge(server) else {
                continue;
            };
            let said = if login_offer::logged_in_since(&self.state, server, started) {
                login_offer::JUST_LOGGED_IN
            } else if login_offer::offer(&self.state, server, challenge, peer) {
                login_offer::OFFERED
            } else {
                continue;
            };
            result.content.push(rmcp::model::ContentBlock::text(said));
            break;
        }
        result
    }
}
