//! `call_tool`: validate arguments against the tool's schema, connect its server if needed,
//! forward the call and pass the upstream result through. [`dispatch`] is the one path of
//! every tool call: the client's own and those of a `meta__run_script` script. A server that
//! answers the call with a JSON-RPC error has it said in an error result the model reads, or,
//! to a client that called the tool by its own name, passed on as it is ([`Called`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::ErrorData;
use serde::Deserialize;
use serde_json::{Map, Value};
use tracing::Instrument;
use tracing::field::Empty;

use super::definitions::definitions;
use super::reply::{self, Reply};
use super::{builtin, policy, script, skill};
use crate::audit::Outcome;
use crate::budget::Route;
use crate::config::RESERVED_SERVER;
use crate::learning::Weight;
use crate::server::State;
use crate::server::caller::Caller;
use crate::server::catalogs::{first_run, learning, names};
use crate::telemetry::TARGET;
use crate::upstream::UpstreamError;

/// `call_tool` arguments; alwaysLoad tools listed by their own name are these too.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(in crate::server) struct Args {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
}

/// Schema errors listed in one error result.
const MAX_SCHEMA_ERRORS: usize = 10;
/// Upstream progress waiting to be relayed; more is dropped (progress is advisory).
const PROGRESS_BACKLOG: usize = 64;

/// How a tool call ended for its caller: a result, or the JSON-RPC error its server answered
/// `tools/call` with.
pub(in crate::server) enum Called {
    Result(Reply),
    /// The server's own error (code, message, data), for a client that called the tool by
    /// its own name; and the error result that says it, for the model (`call_tool`, scripts).
    Rejected {
        error: ErrorData,
        reply: Reply,
    },
}

impl Called {
    /// The result the model reads.
    pub fn reply(&self) -> &Reply {
        match self {
            Self::Result(reply) | Self::Rejected { reply, .. } => reply,
        }
    }

    pub fn into_reply(self) -> Reply {
        match self {
            Self::Result(reply) | Self::Rejected { reply, .. } => reply,
        }
    }
}

impl From<Reply> for Called {
    fn from(reply: Reply) -> Self {
        Self::Result(reply)
    }
}

pub(in crate::server) async fn run(state: &Arc<State>, caller: &Caller, args: Args) -> Called {
    if definitions().iter().any(|t| t.name == args.name) {
        return reply::error(format!(
            "\"{}\" is a meta-tool: call it directly, not through call_tool",
            args.name
        ))
        .into();
    }
    dispatch(
        state,
        caller,
        &args.name,
        args.arguments.unwrap_or_default(),
    )
    .await
}

/// Calls tool `name` (qualified, or a tool's own name with `prefix: false`): the token's access, first run, allow/deny, argument
/// validation, call policy, lazy connect, timeouts, progress relay and result handling; one
/// audit line for it, and what a successful call teaches search.
pub(in crate::server) async fn dispatch(
    state: &Arc<State>,
    caller: &Caller,
    name: &str,
    arguments: Map<String, Value>,
) -> Called {
    let started = crate::clock::Instant::now();
    let name = &names::resolve(state, &caller.who.access, name).await;
    let span = tracing::info_span!(
        target: TARGET,
        "tool.call",
        "meta_server.tool" = name,
        "meta_server.arguments" = Empty,
        "meta_server.outcome" = Empty,
        "otel.status_code" = Empty,
    );
    if !span.is_disabled() && crate::telemetry::payloads() {
        span.record(
            "meta_server.arguments",
            Value::Object(arguments.clone()).to_string(),
        );
    }
    let recorded = (state.audit.as_ref())
        .filter(|log| log.with_arguments())
        .map(|_| arguments.clone());
    let (called, outcome) =
        Box::pin(attempt(state, caller, name, arguments).instrument(span.clone())).await;
    if !span.is_disabled() {
        let said = serde_json::to_value(outcome).unwrap_or_default();
        span.record("meta_server.outcome", said.as_str().unwrap_or_default());
        if outcome != Outcome::Ok {
            span.record("otel.status_code", "ERROR");
        }
    }
    // A successful call of a tool a search showed teaches that search (`learning.rs`).
    if matches!(outcome, Outcome::Ok) {
        learning::selected(state, &caller.who, [name.as_str()], Weight::Call);
    }
    if let Some(log) = &state.audit {
        crate::server::audit::call(
            log,
            caller,
            name,
            recorded.as_ref(),
            outcome,
            called.reply(),
            started,
        );
    }
    called
}

/// [`dispatch`] without the audit line: how the call ended, for its caller and the log.
async fn attempt(
    state: &Arc<State>,
    caller: &Caller,
    name: &str,
    arguments: Map<String, Value>,
) -> (Called, Outcome) {
    // A tool the caller's token may not see is unknown to it, and its server is not started.
    if !caller.who.access.sees(name) {
        return (unknown(state, caller, name).into(), Outcome::Denied);
    }
    let Some((server, _)) = name.split_once(crate::library::SEPARATOR) else {
        return (unknown(state, caller, name).into(), Outcome::Error);
    };
    // A configured server without a catalog is listed first (a script's calls included); the
    // library it returns is the one snapshot the tool and its quarantine are judged by.
    let library = match first_run::ensure(state, server).await {
        Ok(library) => library,
        Err(failed) => {
            return (
                reply::foreign_error(failed.to_string()).into(),
                Outcome::Error,
            );
        }
    };
    let Some(entry) = library.get(name).cloned() else {
        return (unknown(state, caller, name).into(), Outcome::Error);
    };
    let held =
        tracing::info_span!(target: TARGET, "trust.check", "meta_server.quarantined" = Empty)
            .in_scope(|| {
                let held = state.trust.quarantine_of(&library, &entry);
                tracing::Span::current().record("meta_server.quarantined", held.is_some());
                held
            });
    if let Some(held) = held {
        return (
            reply::error(held.refusal(&entry.qualified, &entry.qualified)).into(),
            Outcome::Quarantined,
        );
    }
    drop(library);
    if let Some(validator) = entry.validator() {
        let instance = Value::Object(arguments.clone());
        let problems: Vec<String> = validator
            .iter_errors(&instance)
            .take(MAX_SCHEMA_ERRORS)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "arguments" } else { &at };
                reply::echo(&format!("- {at}: {e}"))
            })
            .collect();
        if !problems.is_empty() {
            let message = format!(
                "arguments for {} do not match its input schema:\n{}\nSee get_tool_details {{\"names\": [\"{}\"]}} for the schema.",
                entry.qualified,
                problems.join("\n"),
                entry.qualified
            );
            return (reply::error(message).into(), Outcome::Error);
        }
    }
    let checked = policy::check(state, caller, &entry, &arguments)
        .instrument(tracing::info_span!(target: TARGET, "policy.check"))
        .await;
    if let Err(refused) = checked {
        return (refused.reply.into(), refused.outcome);
    }
    if let Some(skill) = &entry.skill {
        return ended(skill::run(state, skill, &caller.who.access));
    }
    let started = crate::clock::Instant::now();
    let result = if entry.server == RESERVED_SERVER && entry.def.name == script::TOOL {
        script::run(state, caller, arguments, boxed).await
    } else if entry.server == RESERVED_SERVER {
        builtin::run(state, caller, &entry.def.name, arguments).await
    } else {
        let (relay, mut progress) = tokio::sync::mpsc::channel(PROGRESS_BACKLOG);
        let call = state.manager.call_tool(
            &entry.server,
            &entry.def.name,
            Some(arguments),
            caller.progress_to.is_some().then_some(relay),
            &caller.origin,
        );
        tokio::pin!(call);
        // Dropping the upstream call on client cancellation forwards notifications/cancelled.
        loop {
            tokio::select! {
                result = &mut call => match result {
                    Ok(Ok(result)) => {
                        // Progress sent before the answer goes out before it.
                        while let Ok(mut update) = progress.try_recv() {
                            if let Some((peer, token)) = &caller.progress_to {
                                update.progress_token = token.clone();
                                let _ = peer.notify_progress(update).await;
                            }
                        }
                        break result;
                    }
                    Ok(Err(error)) => {
                        state.metrics.tool_call(&entry.server, caller.principal.as_deref(), false, started.elapsed());
                        let reply = reply::foreign_error(rejected(&entry.server, &entry.def.name, &error));
                        return (Called::Rejected { error, reply }, Outcome::Error);
                    }
                    Err(e) => {
                        state.metrics.tool_call(&entry.server, caller.principal.as_deref(), false, started.elapsed());
                        let outcome = match e {
                            UpstreamError::Timeout { .. } | UpstreamError::ConnectTimeout { .. } => Outcome::Timeout,
                            _ => Outcome::Error,
                        };
                        return (reply::foreign_error(e.to_string()).into(), outcome);
                    }
                },
                () = caller.cancelled.cancelled() => {
                    state.metrics.tool_call(&entry.server, caller.principal.as_deref(), false, started.elapsed());
                    return (reply::error("cancelled by the client").into(), Outcome::Error);
                }
                Some(mut update) = progress.recv() => {
                    if let Some((peer, token)) = &caller.progress_to {
                        update.progress_token = token.clone();
                        let _ = peer.notify_progress(update).await;
                    }
                }
            }
        }
    };
    let route = Route::CallTool {
        server: entry.server.clone(),
    };
    let result = state
        .shape(&entry.qualified, route, caller, result)
        .instrument(tracing::info_span!(target: TARGET, "result.fit"))
        .await;
    let ok = result.is_error != Some(true);
    state.metrics.tool_call(
        &entry.server,
        caller.principal.as_deref(),
        ok,
        started.elapsed(),
    );
    ended(result)
}

/// A result and how the call that made it ended, as far as the result says: `ok` or `error`.
fn ended(reply: Reply) -> (Called, Outcome) {
    let outcome = if reply.is_error == Some(true) {
        Outcome::Error
    } else {
        Outcome::Ok
    };
    (reply.into(), outcome)
}

/// What the model reads of `server`'s JSON-RPC error for a call of `tool`: its message, code
/// and data.
fn rejected(server: &str, tool: &str, error: &ErrorData) -> String {
    let data = match &error.data {
        Some(data) => format!(", data: {data}"),
        None => String::new(),
    };
    format!(
        "server \"{server}\" answered tools/call {tool} with an error: {} (JSON-RPC error {}{data})",
        error.message, error.code.0
    )
}

/// The error result for a tool `caller` does not know, with the names it may mean.
fn unknown(state: &State, caller: &Caller, name: &str) -> Reply {
    let suggestions = caller
        .who
        .access
        .suggestions(&state.catalogs.library(), name, 3);
    let mut message = format!("unknown tool \"{}\".", reply::echo(name));
    if !suggestions.is_empty() {
        message.push_str(&format!(" Did you mean: {}?", suggestions.join(", ")));
    }
    message.push_str(" Use search_tools to find tools; names are <server>__<tool>.");
    reply::error(message)
}

/// [`dispatch`] as the handle a script's nested calls take (a function of its own, so the
/// future's `Send` is known where it is boxed).
fn boxed<'a>(
    state: &'a Arc<State>,
    caller: &'a Caller,
    name: &'a str,
    arguments: Map<String, Value>,
) -> Pin<Box<dyn Future<Output = Reply> + Send + 'a>> {
    Box::pin(async move { dispatch(state, caller, name, arguments).await.into_reply() })
}
