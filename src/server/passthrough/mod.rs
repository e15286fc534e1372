//! Upstream prompts, resources and completions passed through to the client: listed from the
//! catalogs with nothing started, and forwarded by prompt name or resource URI ([`Routes`])
//! to their server, which the upstream manager starts on first use as for a tool call. Their
//! texts are screened as tools' are (cleaned and flagged when routes are built, see
//! [`crate::catalog::screen`]), and pinned ([`pins`]).

mod pins;
mod routes;
mod template;

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams, GetPromptResult,
    PromptReference, ReadResourceRequestParams, ReadResourceResult, Reference, ResultType,
};
use tokio_util::sync::CancellationToken;

use super::State;
use super::access::Access;
use super::audit;
use super::caller::Caller;
use super::catalogs::{first_run, names};
use crate::audit::Subject;
use crate::config::Settings;
use crate::library::{Library, SEPARATOR};
use crate::upstream::{Answer, UpstreamError};
pub(in crate::server) use pins::{prompts, resources, templates};
use routes::LeftOut;
pub(in crate::server) use routes::{OwnSpaces, Routes};
use template::MatchError;

/// Characters of an upstream's error message passed on.
const ERROR_CHARS: usize = 2_000;
/// Bytes of an upstream error's `data` (as JSON) passed on; larger data is left out.
const ERROR_DATA_BYTES: usize = 4_096;
/// The longest URI an error's `data` repeats.
const DATA_URI_CHARS: usize = 2_048;

/// A resource-not-found error (-32002, -32602 at 2026-07-28) whose `data` names the URI
/// (SEP-2164), unless the URI is too long to repeat.
pub(in crate::server) fn not_found(message: String, uri: &str) -> McpError {
    let data = (uri.chars().count() <= DATA_URI_CHARS).then(|| serde_json::json!({"uri": uri}));
    McpError::resource_not_found(message, data)
}

/// Views of the routes kept per library: one per named token (configured tokens are few; a
/// bound all the same).
const MAX_VIEWS: usize = 64;

/// The routes of the current library, built when it changes (each entry they leave out logged
/// once), and each named token's view of them, made on its first request.
pub(in crate::server) struct Passthrough {
    current: Mutex<Option<Current>>,
    reported: Mutex<HashSet<LeftOut>>,
    /// The URIs meta-server serves itself.
    own: OwnSpaces,
}

/// The routes of one library under one config (whose file order settles contested URIs) and
/// the views made of them.
struct Current {
    of: Weak<Library>,
    under: Weak<Settings>,
    routes: Arc<Routes>,
    views: Vec<(Access, Arc<Routes>)>,
}

impl Passthrough {
    pub(in crate::server) fn new(own: OwnSpaces) -> Self {
        Self {
            current: Mutex::new(None),
            reported: Mutex::new(HashSet::new()),
            own,
        }
    }

    /// The routes of `state`'s library now, as `access` sees them; built again when the
    /// library or the config (a reload: the file order may be new) is.
    pub(in crate::server) fn routes(&self, state: &State, access: &Access) -> Arc<Routes> {
        let library = state.catalogs.library();
        let settings = state.settings();
        let mut current = self.current.lock();
        let fresh = current.as_ref().is_some_and(|c| {
            std::ptr::eq(c.of.as_ptr(), Arc::as_ptr(&library))
                && std::ptr::eq(c.under.as_ptr(), Arc::as_ptr(&settings))
        });
        if !fresh {
            let servers = settings.servers_in_file_order();
            let (routes, left_out) = Routes::build(&servers, &library.catalogs, self.own);
            self.report(left_out);
            *current = Some(Current {
                of: Arc::downgrade(&library),
                under: Arc::downgrade(&settings),
                routes: Arc::new(routes),
                views: Vec::new(),
            });
        }
        let current = current.as_mut().expect("set above");
        if !access.is_limited() {
            return current.routes.clone();
        }
        if let Some((_, view)) = current.views.iter().find(|(a, _)| a.is_same(access)) {
            return view.clone();
        }
        let view = Arc::new(current.routes.seen_by(access));
        if current.views.len() == MAX_VIEWS {
            current.views.remove(0);
        }
        current.views.push((access.clone(), view.clone()));
        view
    }

    /// Logs each entry left out, once per process.
    fn report(&self, left_out: Vec<LeftOut>) {
        let mut reported = self.reported.lock();
        for entry in left_out {
            if !reported.contains(&entry) {
                tracing::warn!(server = %entry.server, "{entry}");
                reported.insert(entry);
            }
        }
    }

    /// `prompts/get` of a prompt by its listed (or qualified) name, forwarded under its own
    /// name, with its audit line. A configured server without a catalog (that the caller's
    /// token sees) is listed first, and so are those with `prefix: false` when no prompt has
    /// the name. The server's requests for the client go to the caller's origin.
    pub(in crate::server) async fn get_prompt(
        &self,
        state: &Arc<State>,
        caller: &Caller,
        params: GetPromptRequestParams,
    ) -> Result<GetPromptResult, McpError> {
        let started = crate::clock::Instant::now();
        let (qualified, arguments) = (params.name.clone(), params.arguments.clone());
        let mut answered = None;
        let result = self.prompt(state, caller, params, &mut answered).await;
        let subject = Subject::Prompt(&qualified);
        let arguments = arguments.as_ref();
        let answered = answered.as_deref();
        audit::passed(
            state, caller, answered, subject, arguments, &result, started,
        );
        result
    }

    /// [`Self::get_prompt`] without the audit line; `answered` is set to the server it goes to.
    async fn prompt(
        &self,
        state: &Arc<State>,
        caller: &Caller,
        mut params: GetPromptRequestParams,
        answered: &mut Option<String>,
    ) -> Result<GetPromptResult, McpError> {
        let (access, cancelled, origin) = (&caller.who.access, &caller.cancelled, &caller.origin);
        let qualified = params.name.clone();
        if let Some((server, _)) = qualified.split_once(SEPARATOR)
            && access.sees_server(server)
            && let Err(e) = first_run::ensure(state, server).await
        {
            *answered = Some(server.to_owned());
            return Err(McpError::internal_error(e.to_string(), None));
        }
        let mut routes = self.routes(state, access);
        if routes.prompt(&qualified).is_none() && names::list_unprefixed(state, access).await {
            routes = self.routes(state, access);
        }
        let Some((server, name)) = routes.prompt(&qualified) else {
            return Err(McpError::invalid_params(
                format!(
                    "unknown prompt \"{}\"; prompts/list shows the prompts, named <server>__<prompt>",
                    crate::echo::echo(&qualified)
                ),
                None,
            ));
        };
        *answered = Some(server.to_owned());
        pins::check_prompt(state, server, name, &qualified)?;
        params.name = name.to_owned();
        params.meta = None;
        // Those of a 2026-07-28 client's retry are meta-server's, never the upstream's.
        (params.input_responses, params.request_state) = (None, None);
        let answer = state.manager.get_prompt(server, params, origin);
        let result = forwarded(server, answer, cancelled).await?;
        let library = state.catalogs.library();
        let relist = || crate::server::catalogs::freshness::relist(state, server);
        let catalog = library.catalogs.get(server);
        let mut result = pins::prompt_answer(catalog, server, name, &qualified, result, relist)?;
        result.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(result)
    }

    /// `resources/read` of a URI meta-server does not serve itself, with its audit line;
    /// `None` (and no line) when no server lists it or has a template that matches it. The
    /// server's requests for the client go to the caller's origin.
    pub(in crate::server) async fn read(
        &self,
        state: &Arc<State>,
        caller: &Caller,
        params: ReadResourceRequestParams,
    ) -> Option<Result<ReadResourceResult, McpError>> {
        let started = crate::clock::Instant::now();
        let uri = params.uri.clone();
        let mut answered = None;
        let result = self
            .forward_read(state, caller, params, &mut answered)
            .await?;
        let (subject, answered) = (Subject::Resource(&uri), answered.as_deref());
        audit::passed(state, caller, answered, subject, None, &result, started);
        Some(result)
    }

    /// [`Self::read`] without the audit line; `answered` is set to the server it goes to.
    async fn forward_read(
        &self,
        state: &Arc<State>,
        caller: &Caller,
        mut params: ReadResourceRequestParams,
        answered: &mut Option<String>,
    ) -> Option<Result<ReadResourceResult, McpError>> {
        let (access, cancelled, origin) = (&caller.who.access, &caller.cancelled, &caller.origin);
        let routes = self.routes(state, access);
        let server = match off_the_workers(&routes, &params.uri, Routes::resource).await {
            Ok(server) => server?,
            Err(e) => return Some(Err(e.into())),
        };
        let server = server.as_str();
        *answered = Some(server.to_owned());
        if let Err(refused) = pins::check_uri(state, server, &params.uri) {
            return Some(Err(refused));
        }
        params.meta = None;
        (params.input_responses, params.request_state) = (None, None);
        let answer = state.manager.read_resource(server, params, origin);
        Some(
            forwarded(server, answer, cancelled)
                .await
                .map(|mut result| {
                    result.result_type.get_or_insert(ResultType::COMPLETE);
                    result
                }),
        )
    }

    /// `completion/complete` for an upstream prompt (by qualified name) or resource template
    /// (by its `uriTemplate`, or a URI it matches). meta-server's own template completes to
    /// nothing.
    pub(in crate::server) async fn complete(
        &self,
        state: &Arc<State>,
        access: &Access,
        mut params: CompleteRequestParams,
        cancelled: &CancellationToken,
    ) -> Result<CompleteResult, McpError> {
        let routes = self.routes(state, access);
        let completing_server;
        let server = match &params.r#ref {
            Reference::Prompt(prompt) => {
                let (server, name) = routes.prompt(&prompt.name).ok_or_else(|| {
                    McpError::invalid_params(
                        format!(
                            "unknown prompt \"{}\"; prompts/list shows the prompts, named <server>__<prompt>",
                            crate::echo::echo(&prompt.name)
                        ),
                        None,
                    )
                })?;
                pins::check_prompt(state, server, name, &prompt.name)?;
                let mut reference = PromptReference::new(name);
                reference.title = prompt.title.clone();
                params.r#ref = Reference::Prompt(reference);
                server
            }
            Reference::Resource(resource) if self.own.holds(&resource.uri) => {
                return Ok(CompleteResult::default());
            }
            Reference::Resource(resource) => {
                let completing = off_the_workers(&routes, &resource.uri, Routes::completing);
                completing_server = completing.await?;
                let server = completing_server.as_deref().ok_or_else(|| {
                    McpError::invalid_params(
                        format!(
                            "unknown resource template \"{}\"; resources/templates/list shows them",
                            crate::echo::echo(&resource.uri)
                        ),
                        None,
                    )
                })?;
                pins::check_uri(state, server, &resource.uri)?;
                server
            }
            _ => {
                return Err(McpError::invalid_params(
                    "completion/complete takes a ref/prompt or a ref/resource",
                    None,
                ));
            }
        };
        params.meta = None;
        let answer = state.manager.complete(server, params);
        let mut result = pins::completion(forwarded(server, answer, cancelled).await?);
        result.result_type.get_or_insert(ResultType::COMPLETE);
        cap_completion(&mut result.completion);
        Ok(result)
    }
}

/// `find` (the server of a URI in `routes`) run on a blocking thread: matching an unlisted URI
/// against many templates is CPU work (bounded, see `template.rs`) that must not hold an async
/// worker, which other requests would wait behind.
pub(in crate::server) async fn off_the_workers(
    routes: &Arc<Routes>,
    uri: &str,
    find: for<'a> fn(&'a Routes, &str) -> Result<Option<&'a str>, MatchError>,
) -> Result<Option<String>, MatchError> {
    let (routes, uri) = (routes.clone(), uri.to_owned());
    let found =
        tokio::task::spawn_blocking(move || find(&routes, &uri).map(|s| s.map(str::to_owned)));
    match found.await {
        Ok(found) => found,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The runtime is shutting down: nothing is routed any more.
        Err(_) => Ok(None),
    }
}

/// MCP's most values in one completion (100): more are cut to the first 100, with `total`
/// saying how many there were and `hasMore`, as the spec has it.
fn cap_completion(completion: &mut CompletionInfo) {
    let values = completion.values.len();
    if values <= CompletionInfo::MAX_VALUES {
        return;
    }
    completion.values.truncate(CompletionInfo::MAX_VALUES);
    let said = completion.total.map_or(0, |total| total as usize);
    completion.total = Some(u32::try_from(values.max(said)).unwrap_or(u32::MAX));
    completion.has_more = Some(true);
}

/// How long a 2026-07-28 client may keep a list made from the catalogs. A catalog changes only
/// while its server is connected (a `list_changed`, a re-listing of a stale catalog on
/// connect), and a server stays connected until it has been idle for its `idleTimeoutSecs`:
/// a client that lists again after the shortest idle timeout sees what the last connection
/// changed. A server's own `ttlMs` for its tool list bounds it too.
pub(in crate::server) fn list_ttl(state: &State) -> Duration {
    let library = state.catalogs.library();
    let settings = state.settings();
    let idle = settings.servers.iter().map(|s| s.idle_timeout);
    let own = library
        .catalogs
        .values()
        .filter_map(|c| c.ttl_ms.map(Duration::from_millis));
    idle.chain(own)
        .min()
        .unwrap_or(crate::config::DEFAULT_IDLE_TIMEOUT)
}

/// An upstream's answer for the client: its result; its own JSON-RPC error with its code and
/// `data` (up to [`ERROR_DATA_BYTES`]), naming the server; or why the server could not answer
/// (-32603, saying what to do). The upstream request is dropped (and cancelled) when the
/// client cancels.
async fn forwarded<T>(
    server: &str,
    answer: impl Future<Output = Result<Answer<T>, UpstreamError>>,
    cancelled: &CancellationToken,
) -> Result<T, McpError> {
    // On the heap: a first use opens the connection inside it, a deep future that would
    // overflow a worker's stack under a 2026-07-28 request over HTTP (debug builds).
    let answer = Box::pin(answer);
    let answer = tokio::select! {
        answer = answer => answer,
        () = cancelled.cancelled() => {
            return Err(McpError::internal_error("cancelled by the client", None));
        }
    };
    match answer {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(mut error)) => {
            let message = format!("server \"{server}\": {}", error.message);
            error.message = match message.char_indices().nth(ERROR_CHARS) {
                None => message,
                Some((end, _)) => format!("{}… (error cut)", &message[..end]),
            }
            .into();
            // What the server said with it (a URI not found, the capabilities it needs) is
            // kept, within a bound.
            let size = error.data.as_ref().map(|d| d.to_string().len());
            if size.is_some_and(|size| size > ERROR_DATA_BYTES) {
                error.data = None;
            }
            Err(error)
        }
        Err(e) => Err(McpError::internal_error(e.to_string(), None)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rmcp::model::ErrorCode;
    use serde_json::json;

    use super::*;
    use crate::catalog::Catalog;
    use crate::config::Settings;

    #[tokio::test]
    async fn an_upstream_error_keeps_its_code_and_data_within_a_bound() {
        let said = |data| {
            let error = McpError::new(ErrorCode(-32021), "needs sampling", data);
            async move { Ok::<Answer<()>, UpstreamError>(Err(error)) }
        };
        let never = CancellationToken::new();
        let data = json!({"requiredCapabilities": {"sampling": {}}});
        let kept = forwarded("s", said(Some(data.clone())), &never)
            .await
            .unwrap_err();
        assert_eq!((kept.code, kept.data), (ErrorCode(-32021), Some(data)));
        assert_eq!(kept.message, "server \"s\": needs sampling");
        let huge = json!({"blob": "x".repeat(ERROR_DATA_BYTES)});
        let cut = forwarded("s", said(Some(huge)), &never).await.unwrap_err();
        assert_eq!((cut.code, cut.data), (ErrorCode(-32021), None));
    }

    #[test]
    fn not_found_names_the_uri_unless_it_is_too_long() {
        let e = not_found("gone".into(), "test://x");
        assert_eq!(e.data, Some(json!({"uri": "test://x"})));
        assert_eq!(
            not_found("gone".into(), &"u".repeat(DATA_URI_CHARS + 1)).data,
            None
        );
    }

    fn catalog(server: &str, uri: &str) -> Catalog {
        let resource = json!({"uri": uri, "name": uri});
        Catalog {
            resources: Some(vec![resource].into()),
            ..Catalog::new(server, Vec::new())
        }
    }

    #[tokio::test]
    async fn a_tokens_view_of_the_routes_is_made_once_per_library() {
        let settings = Settings::parse(
            std::path::Path::new("config.json"),
            r#"{"metaServer": {"skillsDirs": [], "http": {"tokens": [
                    {"name": "only-b", "token": "${B}", "servers": ["b"]}]}},
                "mcpServers": {"b": {"command": "b"}, "a": {"command": "a"}}}"#,
        )
        .expect("config");
        let catalogs: BTreeMap<String, Catalog> = [catalog("a", "a://1"), catalog("b", "b://1")]
            .into_iter()
            .map(|c| (c.server.clone(), c))
            .collect();
        let library = Library::build(&settings.servers, catalogs).expect("library");
        let state = State::new(settings, library);
        let passthrough = Passthrough::new(OwnSpaces(&["skill://"]));
        let settings = state.settings();
        let token = &settings.http_tokens[0];
        let only_b = Access::of(token);
        let view = passthrough.routes(&state, &only_b);
        let uris: Vec<&str> = view.resources().iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["b://1"]);
        assert!(
            Arc::ptr_eq(&view, &passthrough.routes(&state, &only_b)),
            "kept"
        );
        let all = passthrough.routes(&state, &Access::default());
        let uris: Vec<&str> = all.resources().iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["b://1", "a://1"], "in file order");
        // A new library: the views of the old one are dropped with it.
        (state.catalogs)
            .replace_catalog(catalog("b", "b://2"))
            .expect("replaced");
        let fresh = passthrough.routes(&state, &only_b);
        let uris: Vec<&str> = fresh.resources().iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["b://2"]);
        assert!(Arc::ptr_eq(&fresh, &passthrough.routes(&state, &only_b)));
    }

    #[tokio::test]
    async fn a_reload_that_reorders_the_file_moves_a_contested_uri() {
        let config = |first: &str, second: &str| {
            let text = format!(
                r#"{{"metaServer": {{"skillsDirs": []}},
                    "mcpServers": {{"{first}": {{"command": "x"}}, "{second}": {{"command": "x"}}}}}}"#
            );
            Settings::parse(std::path::Path::new("config.json"), &text).expect("config")
        };
        let settings = config("a", "b");
        let catalogs: BTreeMap<String, Catalog> = [catalog("a", "x://1"), catalog("b", "x://1")]
            .into_iter()
            .map(|c| (c.server.clone(), c))
            .collect();
        let library = Library::build(&settings.servers, catalogs).expect("library");
        let state = State::new(settings, library);
        let passthrough = Passthrough::new(OwnSpaces(&["skill://"]));
        let owner = |routes: &Routes| {
            routes
                .resource("x://1")
                .expect("matched")
                .map(str::to_owned)
        };
        let all = Access::default();
        assert_eq!(
            owner(&passthrough.routes(&state, &all)).as_deref(),
            Some("a")
        );
        let (reordered, change) = state.settings().reload(config("b", "a"));
        assert!(change.settings, "a new file order is a change: {change:?}");
        state.set_settings(reordered, &[]).expect("set");
        assert_eq!(
            owner(&passthrough.routes(&state, &all)).as_deref(),
            Some("b"),
            "the first in the file now"
        );
    }
}
