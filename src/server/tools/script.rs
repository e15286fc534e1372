//! `meta__run_script` (Code Mode): runs a script in [`crate::script`]'s sandbox, with the server
//! as its host: nested calls go through the [`Dispatch`] it is handed (the path of the client's own calls), search
//! and describe answer as `search_tools` and `get_tool_details` do.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolResult, ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::definitions::{GET_TOOL_DETAILS, SEARCH_TOOLS, definitions};
use super::reply::{self, Reply};
use super::{details, search};
use crate::budget::Route;
use crate::config::RESERVED_SERVER;
use crate::learning::Weight;
use crate::result::Owner;
use crate::script::{self, CallRecord, Host, HostFuture, Limits, Rejection, Report};
use crate::server::State;
use crate::server::caller::{Caller, Who};
use crate::server::catalogs::learning;
use crate::upstream::Origin;

/// The built-in tool's name under the `meta` server.
pub(in crate::server) const TOOL: &str = "run_script";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    code: String,
    #[serde(default)]
    input: Value,
    timeout_ms: Option<u64>,
    max_calls: Option<usize>,
}

#[derive(Serialize)]
struct Output {
    result: Value,
    logs: Vec<String>,
    calls: Vec<CallRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The one path of every tool call, handed to a script so its nested calls take it.
pub(in crate::server) type Dispatch =
    for<'a> fn(
        &'a Arc<State>,
        &'a Caller,
        &'a str,
        Map<String, Value>,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>>;

/// Runs the script (arguments already checked against the tool's schema) for `caller`; its
/// nested calls go through `dispatch`.
pub(in crate::server) async fn run(
    state: &Arc<State>,
    caller: &Caller,
    arguments: Map<String, Value>,
    dispatch: Dispatch,
) -> Reply {
    let args: Args = match reply::parse_args(TOOL, arguments) {
        Ok(args) => args,
        Err(e) => return reply::error(e),
    };
    let mut limits = Limits::default();
    if let Some(ms) = args.timeout_ms {
        limits.timeout = Duration::from_millis(ms);
    }
    if let Some(max) = args.max_calls {
        limits.max_calls = max;
    }
    // Scripts running at once are capped in the process and, over HTTP, per principal.
    let slot = match script::admit(caller.principal.as_deref()).await {
        Ok(slot) => slot,
        Err(busy) => return render(Report::failed(busy)),
    };
    // Nested calls still running when the script ends are cancelled with it.
    let scope = caller.cancelled.child_token();
    let _end = scope.clone().drop_guard();
    let host = Arc::new(ServerHost {
        state: state.clone(),
        dispatch,
        client_limit: caller.client_limit,
        owner: caller.owner.clone(),
        principal: caller.principal.clone(),
        origin: caller.origin.in_script(),
        who: caller.who.clone(),
        scope,
        progress: caller.progress_to.clone().map(|(peer, token)| {
            Arc::new(Progress {
                peer,
                token,
                started: tokio::sync::Mutex::new(0),
            })
        }),
    });
    let report = script::run(
        host,
        args.code,
        args.input,
        limits,
        caller.cancelled.clone(),
        slot,
    )
    .await;
    render(report)
}

/// `{result, logs, calls}` (plus `error` when the script failed) and its compact text.
fn render(report: Report) -> Reply {
    let Report {
        outcome,
        logs,
        calls,
    } = report;
    let (result, error) = match outcome {
        Ok(value) => (value, None),
        Err(e) => (Value::Null, Some(e.to_string())),
    };
    let mut text = match (&error, &result) {
        (Some(e), _) => format!("script error: {e}"),
        (None, Value::String(s)) => s.clone(),
        (None, value) => value.to_string(),
    };
    if !logs.is_empty() {
        text.push_str("\n[logs]\n");
        text.push_str(&logs.join("\n"));
    }
    if !calls.is_empty() {
        let failed: Vec<&str> = calls
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.name.as_str())
            .collect();
        text.push_str(&format!("\n[{} calls", calls.len()));
        if !failed.is_empty() {
            text.push_str(&format!(", {} failed: {}", failed.len(), failed.join(", ")));
        }
        text.push(']');
    }
    let failed = error.is_some();
    let mut reply = reply::structured(
        &Output {
            result,
            logs,
            calls,
            error,
        },
        text,
    );
    if failed {
        reply.is_error = Some(true);
    }
    reply
}

/// The server as the script's host.
struct ServerHost {
    state: Arc<State>,
    dispatch: Dispatch,
    client_limit: Option<usize>,
    /// Whose stored results the nested calls make: the script's caller.
    owner: Owner,
    principal: Option<Arc<str>>,
    /// The script's session, which its nested calls cannot ask for input.
    origin: Origin,
    /// The script's caller: its nested calls are its calls.
    who: Who,
    scope: CancellationToken,
    progress: Option<Arc<Progress>>,
}

/// Progress to the client, one notification per nested call as it starts: sent while the call
/// runs, so the script never waits for it.
struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    /// Calls started; held while notifying, so the client sees the count increase.
    started: tokio::sync::Mutex<u32>,
}

impl Progress {
    async fn starting(&self, name: &str) {
        let mut started = self.started.lock().await;
        *started += 1;
        let update = ProgressNotificationParam::new(self.token.clone(), f64::from(*started))
            .with_message(format!("calling {name}"));
        let _ = self.peer.notify_progress(update).await;
    }
}

impl ServerHost {
    /// The result budget of a meta-tool answer on `route`, within the caller's client limit.
    fn soft(&self, route: &Route) -> usize {
        self.state.limits(route, self.client_limit).soft
    }
}

/// Why a script may not call `name`, if it may not.
fn refused(name: &str) -> Option<String> {
    if name == crate::library::qualified_name(RESERVED_SERVER, TOOL) {
        return Some("a script cannot start another script; call the tools it would call".into());
    }
    definitions().iter().any(|t| t.name == name).then(|| {
        format!(
            "\"{name}\" is a meta-tool, not a tool a script calls: use tools.search(query), tools.describe(name) or tools.call(\"<server>__<tool>\", args)"
        )
    })
}

impl Host for ServerHost {
    fn call(&self, name: String, arguments: Map<String, Value>) -> HostFuture<CallToolResult> {
        let state = self.state.clone();
        let caller = Caller {
            client_limit: self.client_limit,
            owner: self.owner.clone(),
            principal: self.principal.clone(),
            cancelled: self.scope.clone(),
            progress_to: None,
            origin: self.origin.clone(),
            introduced: Default::default(),
            who: self.who.clone(),
        };
        let progress = self.progress.clone();
        let dispatch = self.dispatch;
        Box::pin(async move {
            if let Some(message) = refused(&name) {
                return reply::error(message);
            }
            let call = dispatch(&state, &caller, &name, arguments);
            match progress {
                Some(progress) => tokio::join!(progress.starting(&name), call).1,
                None => call.await,
            }
        })
    }

    fn search(&self, query: String, limit: Option<u32>) -> HostFuture<Result<Value, Rejection>> {
        let state = self.state.clone();
        let who = self.who.clone();
        let soft = self.soft(&Route::SearchTools);
        Box::pin(async move {
            let mut args = serde_json::Map::new();
            args.insert("query".into(), query.into());
            if let Some(limit) = limit {
                args.insert("limit".into(), limit.into());
            }
            let args = reply::parse_args(SEARCH_TOOLS, args)?;
            script::script_value(&search::run(&state, &who, soft, args).await)
        })
    }

    fn describe(&self, name: String) -> HostFuture<Result<Value, Rejection>> {
        let state = self.state.clone();
        let who = self.who.clone();
        let soft = self.soft(&Route::GetToolDetails);
        Box::pin(async move {
            let mut args = serde_json::Map::new();
            args.insert("names".into(), json!([name]));
            let args = reply::parse_args(GET_TOOL_DETAILS, args)?;
            let described = details::run(&state, &who.access, soft, args, None);
            let details = script::script_value(&described)?;
            if let Some(tool) = details["tools"].get(0) {
                learning::selected(&state, &who, [name.as_str()], Weight::Details);
                return Ok(tool.clone());
            }
            let mut message = format!("unknown tool \"{name}\".");
            if let Some(near) = details["notFound"][0]["suggestions"]
                .as_array()
                .filter(|s| !s.is_empty())
            {
                let near: Vec<&str> = near.iter().filter_map(Value::as_str).collect();
                message.push_str(&format!(" Did you mean: {}?", near.join(", ")));
            }
            Err(message.into())
        })
    }
}
