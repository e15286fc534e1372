//! The rmcp `ServerHandler` one client session talks to: `initialize`, `tools/list`, the
//! meta-tools, and resources (skills and stored results). One clone per session over the
//! shared [`State`].

use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, DiscoverRequestMethod, DiscoverResult,
    Implementation, InitializeRequestParams, InitializeResult, JsonObject,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceTemplate, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;

use crate::budget::{self, Route};
use crate::config::RESERVED_SERVER;
use crate::result::Owner;

use super::{
    State, always, call_tool, definitions, details_tool, first_run, instructions, login_offer,
    reply, search_tool,
};

/// URI scheme of skills as resources.
const SKILL_SCHEME: &str = "skill://";

/// The `ServerHandler` behind `meta-server serve`.
#[derive(Clone)]
pub struct MetaServer {
    pub(super) state: Arc<State>,
    instructions: Arc<str>,
    /// The meta-tools, then the tools of alwaysLoad servers: fixed at start-up.
    tools: Arc<[rmcp::model::Tool]>,
    /// This session's client's own result limit, learned from its `initialize`.
    client_limit: Arc<OnceLock<Option<usize>>>,
    /// Whose results this session stores and may read back.
    owner: Owner,
    /// Every session reads every stored result (one owner for all).
    share_results: bool,
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
            client_limit: Arc::default(),
            owner: Owner::session(),
            share_results: false,
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

    /// A handler for one more client session: shared state, its own client limit and, unless
    /// results are shared, its own stored results.
    pub fn for_session(&self) -> Self {
        Self {
            client_limit: Arc::default(),
            owner: if self.share_results {
                Owner::shared()
            } else {
                Owner::session()
            },
            ..self.clone()
        }
    }

    fn client_limit(&self) -> Option<usize> {
        self.client_limit.get().copied().flatten()
    }

    /// Whose stored results a request may create and read. Over HTTP: the principal that
    /// sent it (its bearer token) and, unless results are shared, its MCP session id; both
    /// are the same on every replica, so a result stored through one is read through any.
    /// Elsewhere (stdio): this session's own owner.
    fn owner(&self, extensions: &rmcp::model::Extensions) -> Owner {
        let Some(parts) = extensions.get::<http::request::Parts>() else {
            return self.owner.clone();
        };
        let principal = parts
            .extensions
            .get::<super::http::Principal>()
            .map_or(super::http::ANONYMOUS, |p| p.name());
        if self.share_results {
            return Owner::of(principal, None);
        }
        match parts
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            Some(session) => Owner::of(principal, Some(session)),
            None => self.owner.clone(),
        }
    }
}

/// The principal of a request over HTTP (anonymous without a token); `None` over stdio.
fn principal(extensions: &rmcp::model::Extensions) -> Option<Arc<str>> {
    let parts = extensions.get::<http::request::Parts>()?;
    let name = parts
        .extensions
        .get::<super::http::Principal>()
        .map_or(super::http::ANONYMOUS, |p| p.name());
    Some(name.into())
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
            "The whole result behind a TRUNCATION NOTICE; resourceId is the notice's resourceId (r- and 32 hex digits).".into(),
        );
        Ok(ListResourceTemplatesResult::with_all_items(vec![template]))
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
                    "unknown resource {}; stored results look like {}r-<32 hex digits>",
                    request.uri,
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
        let started = std::time::Instant::now();
        let caller = call_tool::Caller {
            client_limit: self.client_limit(),
            owner: self.owner(&cx.extensions),
            principal: principal(&cx.extensions),
            cancelled: cx.ct.clone(),
            progress_to: cx
                .meta
                .get_progress_token()
                .map(|token| (cx.peer.clone(), token)),
        };
        // Servers without a catalog that this call needs are listed first (first run).
        let args = Value::Object(request.arguments.unwrap_or_default());
        let servers = first_run::servers_of(&request.name, &args);
        if let Err(failed) = first_run::prepare(&self.state, &request.name, &args).await
            && request.name != definitions::SEARCH_TOOLS
        {
            let failed = reply::error(failed);
            return Ok(self
                .offer_logins(&servers, failed, &cx.peer, started)
                .into());
        }
        let Value::Object(arguments) = args else {
            unreachable!("built from an object above")
        };
        let result = self.dispatch(&request.name, arguments, &caller).await?;
        Ok(self
            .offer_logins(&servers, result, &cx.peer, started)
            .into())
    }
}

impl MetaServer {
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

/// A meta-tool call with its arguments read once, at dispatch.
enum Call {
    Search(search_tool::Args),
    Details(details_tool::Args),
    Tool(call_tool::Args),
}

impl MetaServer {
    /// Runs tool `name` of `tools/list`. Arguments a meta-tool cannot read are an error
    /// result naming the tool; a name that is not listed is a protocol error.
    pub(super) async fn dispatch(
        &self,
        name: &str,
        arguments: JsonObject,
        caller: &call_tool::Caller,
    ) -> Result<CallToolResult, McpError> {
        let call = match name {
            definitions::SEARCH_TOOLS => reply::parse_args(name, arguments).map(Call::Search),
            definitions::GET_TOOL_DETAILS => reply::parse_args(name, arguments).map(Call::Details),
            definitions::CALL_TOOL => reply::parse_args(name, arguments).map(Call::Tool),
            listed if always::is_listed(&self.tools, listed) => Ok(Call::Tool(call_tool::Args {
                name: listed.to_owned(),
                arguments: Some(arguments),
            })),
            other => {
                return Err(McpError::invalid_params(
                    format!(
                        "unknown tool \"{}\"; this server has search_tools, get_tool_details and call_tool",
                        reply::echo(other)
                    ),
                    None,
                ));
            }
        };
        let state = &self.state;
        let soft = |route: &Route| state.limits(route, caller.client_limit).soft;
        let (tool, route, result) = match call {
            Err(message) => {
                let route = match name {
                    definitions::SEARCH_TOOLS => Route::SearchTools,
                    definitions::GET_TOOL_DETAILS => Route::GetToolDetails,
                    _ => Route::CallTool {
                        server: RESERVED_SERVER.to_owned(),
                    },
                };
                (name, route, reply::error(message))
            }
            Ok(Call::Search(args)) => {
                let route = Route::SearchTools;
                let result = search_tool::run(state, soft(&route), args).await;
                (definitions::SEARCH_TOOLS, route, result)
            }
            Ok(Call::Details(args)) => {
                let route = Route::GetToolDetails;
                let result = details_tool::run(state, soft(&route), args);
                (definitions::GET_TOOL_DETAILS, route, result)
            }
            Ok(Call::Tool(args)) => {
                let result = call_tool::run(state, caller, args).await;
                // Results are shaped on their server's route; errors before that here.
                if result.is_error != Some(true) {
                    return Ok(result);
                }
                let route = Route::CallTool {
                    server: RESERVED_SERVER.to_owned(),
                };
                (definitions::CALL_TOOL, route, result)
            }
        };
        let result = state.shape(tool, route, caller, result).await;
        Ok(definitions::conform(tool, result))
    }
}
