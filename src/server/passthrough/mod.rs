//! Upstream prompts, resources and completions passed through to the client: listed from the
//! catalogs with nothing started, and forwarded by prompt name or resource URI ([`Routes`])
//! to their server, which the upstream manager starts on first use as for a tool call.

mod routes;
mod template;

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResult,
    PromptReference, ReadResourceRequestParams, ReadResourceResult, Reference, ResultType,
};
use tokio_util::sync::CancellationToken;

use super::State;
use super::access::Access;
use super::catalogs::{first_run, names};
use crate::library::{Library, SEPARATOR};
use crate::upstream::{Answer, Origin, UpstreamError};
pub(in crate::server) use routes::Routes;
use routes::Shadowed;

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

/// The routes of the current library, built when it changes; each entry they leave out is
/// logged once.
pub(in crate::server) struct Passthrough {
    current: Mutex<Option<(Weak<Library>, Arc<Routes>)>>,
    reported: Mutex<HashSet<Shadowed>>,
    /// The URIs meta-server serves itself.
    own: fn(&str) -> bool,
}

impl Passthrough {
    pub(in crate::server) fn new(own: fn(&str) -> bool) -> Self {
        Self {
            current: Mutex::new(None),
            reported: Mutex::new(HashSet::new()),
            own,
        }
    }

    /// The routes of `state`'s library now, of the servers `access` sees.
    pub(in crate::server) fn routes(&self, state: &State, access: &Access) -> Arc<Routes> {
        let library = state.catalogs.library();
        if access.is_limited() {
            let mut servers = state.settings.servers.clone();
            servers.retain(|s| access.sees_server(&s.name));
            return Arc::new(Routes::build(&servers, &library.catalogs, self.own).0);
        }
        let mut current = self.current.lock();
        if let Some((of, routes)) = current.as_ref()
            && std::ptr::eq(of.as_ptr(), Arc::as_ptr(&library))
        {
            return routes.clone();
        }
        let (routes, shadowed) =
            Routes::build(&state.settings.servers, &library.catalogs, self.own);
        let mut reported = self.reported.lock();
        for left_out in shadowed {
            if !reported.contains(&left_out) {
                tracing::warn!(
                    server = %left_out.server,
                    "{} is served by {}, which comes first; this server's entry for it is left out",
                    left_out.uri,
                    left_out.by
                );
                reported.insert(left_out);
            }
        }
        let routes = Arc::new(routes);
        *current = Some((Arc::downgrade(&library), routes.clone()));
        routes
    }

    /// `prompts/get` of a prompt by its listed (or qualified) name, forwarded under its own
    /// name. A configured server without a catalog (that `access` sees) is listed first, and
    /// so are those with `prefix: false` when no prompt has the name. The server's
    /// requests for the client go to `origin`.
    pub(in crate::server) async fn get_prompt(
        &self,
        state: &Arc<State>,
        access: &Access,
        mut params: GetPromptRequestParams,
        cancelled: &CancellationToken,
        origin: &Origin,
    ) -> Result<GetPromptResult, McpError> {
        let qualified = params.name.clone();
        if let Some((server, _)) = qualified.split_once(SEPARATOR)
            && access.sees_server(server)
            && let Err(e) = first_run::ensure(state, server).await
        {
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
        params.name = name.to_owned();
        params.meta = None;
        // Those of a 2026-07-28 client's retry are meta-server's, never the upstream's.
        (params.input_responses, params.request_state) = (None, None);
        let answer = state.manager.get_prompt(server, params, origin);
        let mut result = forwarded(server, answer, cancelled).await?;
        result.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(result)
    }

    /// `resources/read` of a URI meta-server does not serve itself; `None` when no server
    /// lists it or has a template that matches it. The server's requests for the client go to
    /// `origin`.
    pub(in crate::server) async fn read(
        &self,
        state: &Arc<State>,
        access: &Access,
        mut params: ReadResourceRequestParams,
        cancelled: &CancellationToken,
        origin: &Origin,
    ) -> Option<Result<ReadResourceResult, McpError>> {
        let routes = self.routes(state, access);
        let server = routes.resource(&params.uri)?;
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
                let mut reference = PromptReference::new(name);
                reference.title = prompt.title.clone();
                params.r#ref = Reference::Prompt(reference);
                server
            }
            Reference::Resource(resource) if (self.own)(&resource.uri) => {
                return Ok(CompleteResult::default());
            }
            Reference::Resource(resource) => routes.completing(&resource.uri).ok_or_else(|| {
                McpError::invalid_params(
                    format!(
                        "unknown resource template \"{}\"; resources/templates/list shows them",
                        crate::echo::echo(&resource.uri)
                    ),
                    None,
                )
            })?,
            _ => {
                return Err(McpError::invalid_params(
                    "completion/complete takes a ref/prompt or a ref/resource",
                    None,
                ));
            }
        };
        params.meta = None;
        let answer = state.manager.complete(server, params);
        let mut result = forwarded(server, answer, cancelled).await?;
        result.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(result)
    }
}

/// How long a 2026-07-28 client may keep a list made from the catalogs. A catalog changes only
/// while its server is connected (a `list_changed`, a re-listing of a stale catalog on
/// connect), and a server stays connected until it has been idle for its `idleTimeoutSecs`:
/// a client that lists again after the shortest idle timeout sees what the last connection
/// changed. A server's own `ttlMs` for its tool list bounds it too.
pub(in crate::server) fn list_ttl(state: &State) -> Duration {
    let library = state.catalogs.library();
    let idle = state.settings.servers.iter().map(|s| s.idle_timeout);
    let own = library
        .catalogs
        .values()
        .filter_map(|c| c.ttl_ms.map(Duration::from_millis));
    idle.chain(own)
        .min()
        .unwrap_or(crate::config::DEFAULT_IDLE_TIMEOUT)
}

/// An upstream's answer for the client: its result; its own JSON-RPC error with its code and
/// `data` (up to [`ERROR_DATA_BYTES`]), naming the server; or why the server could not answer (-32603, saying what to do). The
/// upstream request is dropped (and cancelled) when the client cancels.
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
    use super::*;
    use rmcp::model::ErrorCode;
    use serde_json::json;

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
}
