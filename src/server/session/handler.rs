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
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
    InitializeRequestParams, InitializeResult, InputResponses, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceUpdatedNotificationParam, ResultType, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, RequestContext, RoleServer, SubscriptionContext, SubscriptionSendError,
};
use rmcp::{ErrorData as McpError, ServerHandler};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::budget;
use crate::result::Owner;

use super::input_required::{Made, Parked, Turn, Waiting};
use super::list_changes::{Changed, ListChanges};
use super::principal::{ANONYMOUS, Principal, access, principal};
use super::subscriptions::{self, Subscribed};
use super::{instructions, login_offer, pages, revision, traced};
use crate::audit::Subject;
use crate::config::{RESERVED_SERVER, SKILL_SERVER};
use crate::server::access::Access;
use crate::server::caller::{Caller, Introduced, Who};
use crate::server::catalogs::always;
use crate::server::passthrough::{self, Passthrough};
use crate::server::tools::request::Request;
use crate::server::tools::{definitions, reply};
use crate::server::{State, audit};
use crate::upstream::{ClientId, LogLevel, Origin};

mod own;
use own::{OWN, is_own};

/// The `ServerHandler` behind `meta-server serve`.
#[derive(Clone)]
pub struct MetaServer {
    pub(in crate::server) state: Arc<State>,
    instructions: Arc<str>,
    /// The meta-tools, then the tools of alwaysLoad servers: fixed at start-up, and again only
    /// when a config change adds, removes or changes an alwaysLoad server (shared by every
    /// session, each told with `notifications/tools/list_changed`).
    tools: Arc<parking_lot::RwLock<Arc<[Tool]>>>,
    /// Whose results this session stores and may read back.
    owner: Owner,
    /// Every session reads every stored result (one owner for all).
    share_results: bool,
    /// Upstream prompts, resources and completions, routed from the catalogs.
    pub(in crate::server) passthrough: Arc<Passthrough>,
    /// This session, to whose client an upstream's requests during its calls go.
    client: ClientId,
    /// The 2026-07-28 calls of this process waiting for their client's input.
    waiting: Arc<Waiting<Result<CallToolResult, McpError>>>,
    waiting_prompts: Arc<Waiting<Result<GetPromptResult, McpError>>>,
    waiting_reads: Arc<Waiting<Option<Result<ReadResourceResult, McpError>>>>,
    /// Who is told that the upstream prompts or resources changed.
    list_changes: Arc<ListChanges>,
    /// This session's subscriptions to upstream resources.
    subscribed: Arc<Subscribed>,
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
        let instructions =
            instructions::overview(&state.settings(), &state.catalogs.library()).into();
        let passthrough = Arc::new(Passthrough::new(OWN));
        let list_changes = ListChanges::follow(&state, passthrough.clone());
        let parked = Arc::new(Parked::default());
        Self {
            state,
            instructions,
            tools: Arc::new(parking_lot::RwLock::new(tools)),
            owner: Owner::session(),
            share_results: false,
            passthrough,
            list_changes,
            subscribed: Arc::default(),
            client: ClientId::next(),
            introduced: Introduced::per_session(),
            log_level: LogLevel::default(),
            waiting: Waiting::new(parked.clone()),
            waiting_prompts: Waiting::new(parked.clone()),
            waiting_reads: Waiting::new(parked),
        }
    }

    /// `tools/list` now: the meta-tools, then the alwaysLoad servers' tools.
    fn tools(&self) -> Arc<[Tool]> {
        self.tools.read().clone()
    }

    /// Lists `always` (the alwaysLoad servers' tools after a config change) after the
    /// meta-tools from now on; if that changes `tools/list`, every session and listen stream
    /// that asked is told.
    pub(super) async fn relist_always(&self, always: Vec<Tool>) {
        let tools: Arc<[Tool]> = definitions::definitions()
            .iter()
            .cloned()
            .chain(always)
            .collect();
        {
            let mut held = self.tools.write();
            if *held == tools {
                return;
            }
            *held = tools;
        }
        tracing::info!("the alwaysLoad tools changed: tools/list changed");
        self.list_changes.tools_changed().await;
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
            introduced: Introduced::per_session(),
            log_level: LogLevel::default(),
            subscribed: Arc::default(),
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

impl ServerHandler for MetaServer {
    #[expect(deprecated, reason = "logging, for 2025-11-25 clients")]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_completions()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_resources_subscribe()
                .enable_logging()
                .enable_tools()
                .enable_tool_list_changed()
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
        let span = traced::request(&cx, "initialize", None);
        traced::within(span, async move {
            if revision::names_stateless(&cx) {
                return Err(revision::removed(
                    "initialize",
                    "send each request with its _meta instead (server/discover says what this server supports), or initialize without _meta to start a 2025-11-25 session",
                ));
            }
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
        })
        .await
    }

    /// Upstream log messages of this session's calls reach the client from `level` up. A
    /// 2026-07-28 client names its level in each request instead.
    #[expect(deprecated, reason = "logging, for 2025-11-25 clients")]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if revision::is_stateless(&cx) {
            return Err(revision::removed(
                "logging/setLevel",
                "name the level in each request's _meta (io.modelcontextprotocol/logLevel)",
            ));
        }
        *self.log_level.lock() = Some(request.level);
        Ok(())
    }

    /// A 2025-11-25 session is told when the upstream prompts or resources change.
    async fn on_initialized(&self, cx: NotificationContext<RoleServer>) {
        self.list_changes.add_session(cx.peer);
    }

    /// Changes of the upstream prompts and resources lists, and of `tools/list` (which changes
    /// only when a config change adds, removes or changes an alwaysLoad server).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        accepted.prompts_list_changed = requested.prompts_list_changed;
        accepted.resources_list_changed = requested.resources_list_changed;
        // rmcp gives no request here: over HTTP, a named token's request reaches this with the
        // URIs of its hidden servers already taken out (`http/listen.rs`).
        let routes = (self.passthrough).routes(&self.state, &Access::default());
        accepted.resource_subscriptions = (requested.resource_subscriptions.as_ref()).map(|uris| {
            // Too many is refused whole by `listen`: none is routed.
            if subscriptions::too_many(uris.len()).is_some() {
                return Vec::new();
            }
            let upstream = |uri: &&String| matches!(routes.resource(uri), Ok(Some(_)));
            uris.iter().filter(upstream).cloned().collect()
        });
        Some(accepted)
    }

    /// Sends the changes the stream accepted (list changes, updates of the upstream resources
    /// it subscribed to) until the client cancels it; a stream that fell behind is told both
    /// lists changed.
    async fn listen(&self, cx: SubscriptionContext) -> Result<(), McpError> {
        let asked = cx.requested().resource_subscriptions.as_ref();
        if let Some(refused) = subscriptions::too_many(asked.map_or(0, Vec::len)) {
            return Err(refused);
        }
        let mut changes = self.list_changes.stream();
        let subscribed = Subscribed::default();
        let uris = cx
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let access = access(&cx.request_context().extensions);
        let mut updates = (subscribed)
            .stream(&self.state, &self.passthrough, &uris, &access)
            .await;
        loop {
            let changed = tokio::select! {
                () = cx.cancelled() => return Ok(()),
                Some(uri) = updates.recv() => {
                    if let Err(SubscriptionSendError::SubscriptionClosed) =
                        cx.sink().notify_resource_updated(uri).await
                    {
                        return Ok(());
                    }
                    continue;
                }
                changed = changes.recv() => match changed {
                    Ok(changed) => changed,
                    Err(broadcast::error::RecvError::Lagged(_)) => Changed::ALL,
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            };
            let sink = cx.sink();
            for (kind, yes) in [
                (Changed::TOOLS, changed.tools),
                (Changed::PROMPTS, changed.prompts),
                (Changed::RESOURCES, changed.resources),
            ] {
                let sent = match kind {
                    _ if !yes => continue,
                    Changed::TOOLS => sink.notify_tool_list_changed().await,
                    Changed::PROMPTS => sink.notify_prompt_list_changed().await,
                    _ => sink.notify_resource_list_changed().await,
                };
                // A kind the stream did not ask for is not sent; the others still are.
                if let Err(SubscriptionSendError::SubscriptionClosed) = sent {
                    return Ok(());
                }
            }
        }
    }

    /// A subscription to an upstream's resource, passed on to the server that lists it (which
    /// is started if need be) if the request's token sees it; its updates reach this session.
    /// meta-server's own resources never change, so subscribing to them is a no-op.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if is_own(&request.uri) {
            return Ok(());
        }
        let peer = cx.peer.clone();
        let tell = move |uri: String| {
            let peer = peer.clone();
            async move {
                let params = ResourceUpdatedNotificationParam::new(uri);
                peer.notify_resource_updated(params).await.is_ok()
            }
        };
        let origin = self.session_origin(&cx);
        let seen = (request.uri.as_str(), &access(&cx.extensions));
        (self.subscribed)
            .add(&self.state, &self.passthrough, seen, &origin, tell)
            .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribed.remove(&request.uri);
        Ok(())
    }

    /// The client's new roots reach the servers its calls started, which ask for them again.
    async fn on_roots_list_changed(&self, _cx: NotificationContext<RoleServer>) {
        self.state.manager.roots_changed(self.client).await;
    }

    /// Skills, as `skill://<name>` resources holding their SKILL.md, then the upstreams'
    /// resources from their catalogs, in pages.
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let span = traced::request(&cx, "resources/list", None);
        traced::within(span, async move {
            let library = self.state.catalogs.library();
            let skills: Vec<_> = own::skills(&library).collect();
            let routes = (self.passthrough).routes(&self.state, &access(&cx.extensions));
            let upstream = passthrough::resources(&self.state, &routes);
            let all = skills.iter().chain(upstream.iter());
            let len = skills.len() + upstream.len();
            let (resources, next) = pages::page(all, len, cursor(&request))?;
            let mut list = ListResourcesResult::with_all_items(resources);
            list.next_cursor = next;
            if let Some((ttl, scope)) = self.catalog_list_hints(&cx) {
                list = list.with_ttl_ms(ttl).with_cache_scope(scope);
            }
            Ok(list)
        })
        .await
    }

    /// meta-server's stored-result template, then the upstreams' templates, in pages.
    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let span = traced::request(&cx, "resources/templates/list", None);
        traced::within(span, async move {
            let routes = (self.passthrough).routes(&self.state, &access(&cx.extensions));
            let own = [own::stored_result_template()];
            let upstream = passthrough::templates(&self.state, &routes);
            let all = own.iter().chain(upstream.iter());
            let len = own.len() + upstream.len();
            let (templates, next) = pages::page(all, len, cursor(&request))?;
            let mut list = ListResourceTemplatesResult::with_all_items(templates);
            list.next_cursor = next;
            if let Some((ttl, scope)) = self.catalog_list_hints(&cx) {
                list = list.with_ttl_ms(ttl).with_cache_scope(scope);
            }
            Ok(list)
        })
        .await
    }

    /// The upstreams' prompts from their catalogs, named `<server>__<prompt>`, in pages.
    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let span = traced::request(&cx, "prompts/list", None);
        traced::within(span, async move {
            let routes = (self.passthrough).routes(&self.state, &access(&cx.extensions));
            let prompts = passthrough::prompts(&self.state, &routes);
            let (prompts, next) = pages::page(prompts.iter(), prompts.len(), cursor(&request))?;
            let mut list = ListPromptsResult::with_all_items(prompts);
            list.next_cursor = next;
            if let Some((ttl, scope)) = self.catalog_list_hints(&cx) {
                list = list.with_ttl_ms(ttl).with_cache_scope(scope);
            }
            Ok(list)
        })
        .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let span = traced::request(&cx, "prompts/get", Some(&request.name));
        traced::within(span, async move {
            if !revision::is_stateless(&cx) {
                let caller = self.caller(&cx, self.session_origin(&cx), cx.ct.clone());
                let result = (self.passthrough)
                    .get_prompt(&self.state, &caller, request)
                    .await?;
                return Ok(GetPromptResponse::Complete(result));
            }
            let asked = serde_json::json!({"prompt": request.name, "arguments": request.arguments});
            let (state, answers) = (
                request.request_state.clone(),
                request.input_responses.clone(),
            );
            let (this, request, cx_of_call) = (self.clone(), request, cx.clone());
            let run = move |origin: Origin, cancelled: CancellationToken| async move {
                let caller = this.caller(&cx_of_call, origin, cancelled);
                (this.passthrough)
                    .get_prompt(&this.state, &caller, request)
                    .await
            };
            let turn = self
                .stateless(&self.waiting_prompts, &cx, asked, state, answers, run)
                .await?;
            Ok(match turn {
                Turn::Done(result) => GetPromptResponse::Complete(result?),
                Turn::Input(asked) => GetPromptResponse::InputRequired(asked),
            })
        })
        .await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let span = traced::request(&cx, "completion/complete", None);
        traced::within(span, async move {
            self.passthrough
                .complete(&self.state, &access(&cx.extensions), request, &cx.ct)
                .await
        })
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let span = traced::request(&cx, "resources/read", Some(&request.uri));
        traced::within(span, async move {
            if !is_own(&request.uri) {
                if !revision::is_stateless(&cx) {
                    let caller = self.caller(&cx, self.session_origin(&cx), cx.ct.clone());
                    let read = (self.passthrough)
                        .read(&self.state, &caller, request.clone())
                        .await;
                    if let Some(read) = read {
                        return Ok(read?.into());
                    }
                } else {
                    let asked = serde_json::json!({"uri": request.uri});
                    let (state, answers) = (
                        request.request_state.clone(),
                        request.input_responses.clone(),
                    );
                    let (this, read, cx_of_call) = (self.clone(), request.clone(), cx.clone());
                    let run = move |origin: Origin, cancelled: CancellationToken| async move {
                        let caller = this.caller(&cx_of_call, origin, cancelled);
                        (this.passthrough).read(&this.state, &caller, read).await
                    };
                    let turn = self
                        .stateless(&self.waiting_reads, &cx, asked, state, answers, run)
                        .await?;
                    match turn {
                        Turn::Done(Some(read)) => return Ok(read?.into()),
                        Turn::Input(asked) => {
                            return Ok(ReadResourceResponse::InputRequired(asked));
                        }
                        Turn::Done(None) => {}
                    }
                }
            }
            // meta-server's own (a skill, a stored result), or a URI no server has.
            let started = crate::clock::Instant::now();
            let read = match own::skill_name(&request.uri) {
                Some(name) => own::read_skill(&self.state.catalogs.library(), name, &request.uri),
                None => {
                    own::read_stored(&self.state, &request.uri, &self.owner(&cx.extensions)).await
                }
            };
            let caller = self.caller(&cx, self.session_origin(&cx), cx.ct.clone());
            let server = match own::skill_name(&request.uri) {
                Some(_) => Some(SKILL_SERVER),
                None => is_own(&request.uri).then_some(RESERVED_SERVER),
            };
            let subject = Subject::Resource(&request.uri);
            audit::passed(&self.state, &caller, server, subject, None, &read, started);
            Ok(read?.into())
        })
        .await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let span = traced::request(&cx, "tools/list", None);
        traced::within(span, async move {
            let mut list = ListToolsResult::with_all_items(self.tools().to_vec());
            if let Some((ttl, scope)) = revision::fixed_list_hints(&cx) {
                list = list.with_ttl_ms(ttl).with_cache_scope(scope);
            }
            Ok(list)
        })
        .await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let span = traced::request(&cx, "tools/call", Some(&request.name));
        if request.name == definitions::CALL_TOOL {
            traced::name_call(&span, request.arguments.as_ref());
        }
        let called = async {
            if revision::is_stateless(&cx) {
                return self.call_stateless(request, cx).await;
            }
            let started = crate::clock::Instant::now();
            let caller = self.caller(&cx, self.session_origin(&cx), cx.ct.clone());
            let arguments = request.arguments.unwrap_or_default();
            let read = Request::read(&request.name, arguments, &self.tools())?;
            if let Some(tool) = read.tool() {
                traced::tool(&Span::current(), tool);
            }
            let answer = read.run(&self.state, &caller).await;
            // A tool called by its own name answers with its server's JSON-RPC error as it is.
            let mut result = self.offer_logins(&answer.servers, answer.result?, &cx.peer, started);
            // An upstream's result read from a 2025-11-25 server has no `resultType`; rmcp
            // drops it again for a 2025-11-25 client.
            result.result_type.get_or_insert(ResultType::COMPLETE);
            Ok(result.into())
        };
        // Boxed: the whole call path is one large future in a debug build.
        let response = Box::pin(called.instrument(span.clone())).await;
        let failure = match &response {
            Err(_) => Some("protocol_error"),
            Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
                Some("tool_error")
            }
            Ok(_) => None,
        };
        traced::ended(&span, failure);
        response
    }
}

impl MetaServer {
    /// What this session knows about a call of `cx` from `origin`, cancelled by `cancelled`.
    fn caller(
        &self,
        cx: &RequestContext<RoleServer>,
        origin: Origin,
        cancelled: CancellationToken,
    ) -> Caller {
        let principal = principal(&cx.extensions);
        let who = Who::of(
            cx,
            &origin,
            revision::is_stateless(cx),
            (principal.as_deref(), access(&cx.extensions)),
        );
        Caller {
            // From this request's `_meta` (2026-07-28) or its session's `initialize`.
            client_limit: cx
                .client_info()
                .and_then(|client| budget::client_limit(&client.name)),
            owner: self.owner(&cx.extensions),
            principal,
            cancelled,
            progress_to: cx
                .meta
                .get_progress_token()
                .map(|token| (cx.peer.clone(), token)),
            origin,
            // No session remembers for a 2026-07-28 client: it gets them every time.
            introduced: if revision::is_stateless(cx) {
                Introduced::default()
            } else {
                self.introduced.clone()
            },
            who,
        }
    }

    /// Runs `run` for a 2026-07-28 request as one that may ask its client for input, or with a
    /// `requestState`, hands its retry's `answers` to the request held in `waiting` (see
    /// `input_required.rs`). `asked` is what a retry must repeat.
    async fn stateless<T, F>(
        &self,
        waiting: &Arc<Waiting<T>>,
        cx: &RequestContext<RoleServer>,
        asked: serde_json::Value,
        state: Option<String>,
        answers: Option<InputResponses>,
        run: impl FnOnce(Origin, CancellationToken) -> F,
    ) -> Result<Turn<T>, McpError>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let made = Made {
            principal: principal(&cx.extensions),
            request: asked,
        };
        if let Some(state) = state {
            return waiting.resume(&state, &made, answers, &cx.ct).await;
        }
        let capabilities = cx.client_capabilities().unwrap_or_default();
        let log = (cx.meta.log_level()).map(|level| {
            (
                cx.peer.clone(),
                Arc::new(parking_lot::Mutex::new(Some(level))),
            )
        });
        // The call runs as a task of its own, in the span of the request that started it.
        let span = Span::current();
        let run = move |inputs, cancelled| {
            let id = ClientId::next();
            run(Origin::Stateless { id, inputs, log }, cancelled).instrument(span)
        };
        waiting
            .start(made, capabilities, answers, &cx.ct, run)
            .await
    }

    /// Where the requests of a 2025-11-25 session's upstreams go: its client.
    fn session_origin(&self, cx: &RequestContext<RoleServer>) -> Origin {
        Origin::Client {
            id: self.client,
            peer: cx.peer.clone(),
            log_level: self.log_level.clone(),
        }
    }

    /// A call of a 2026-07-28 client: run (or, with a `requestState`, resumed) as a call
    /// that may ask its client for input. No login offer: an elicitation cannot be sent to
    /// such a client outside its call.
    async fn call_stateless(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let asked = serde_json::json!({"name": request.name, "arguments": request.arguments});
        // A retry's request was read when it was first made.
        let read = match request.request_state {
            Some(_) => None,
            None => {
                let arguments = request.arguments.unwrap_or_default();
                let read = Request::read(&request.name, arguments, &self.tools())?;
                if let Some(tool) = read.tool() {
                    traced::tool(&Span::current(), tool);
                }
                Some(read)
            }
        };
        let (this, cx_of_call) = (self.clone(), cx.clone());
        let run = move |origin: Origin, cancelled: CancellationToken| async move {
            let caller = this.caller(&cx_of_call, origin, cancelled);
            match read {
                Some(read) => read.run(&this.state, &caller).await.result,
                None => Ok(reply::error("a retry cannot start a call")),
            }
        };
        let (state, answers) = (request.request_state, request.input_responses);
        let turn = self
            .stateless(&self.waiting, &cx, asked, state, answers, run)
            .await?;
        Ok(match turn {
            Turn::Done(result) => {
                let mut result = result?;
                // An upstream's result read from a 2025-11-25 server has no `resultType`,
                // which a 2026-07-28 client needs.
                result.result_type.get_or_insert(ResultType::COMPLETE);
                result.into()
            }
            Turn::Input(asked) => asked.into(),
        })
    }
}

impl MetaServer {
    /// The cache hints of a list made from the catalogs, for a 2026-07-28 client: `private`
    /// when a named token limited to some servers or tools is configured, as the list then
    /// differs between tokens and no shared cache may hand one token's list to another.
    fn catalog_list_hints(
        &self,
        cx: &RequestContext<RoleServer>,
    ) -> Option<(u64, rmcp::model::CacheScope)> {
        revision::is_stateless(cx).then(|| {
            let ttl = passthrough::list_ttl(&self.state);
            let settings = self.state.settings();
            let tokens = &settings.http_tokens;
            let scope = if tokens.iter().any(|t| Access::of(t).is_limited()) {
                rmcp::model::CacheScope::Private
            } else {
                rmcp::model::CacheScope::Public
            };
            (ttl.as_millis() as u64, scope)
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
        started: crate::clock::Instant,
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

/// The cursor of a list request, if any.
fn cursor(request: &Option<PaginatedRequestParams>) -> Option<&str> {
    request.as_ref()?.cursor.as_deref()
}
