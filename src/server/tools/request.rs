//! One meta-tool call, read once into its typed arguments: the servers it is about (listed
//! first when they have no catalog yet: first run), then run on its route and shaped.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, JsonObject, Tool};

use super::definitions::{self, CALL_TOOL, GET_TOOL_DETAILS, SEARCH_TOOLS};
use super::reply;
use super::{call, details, search};
use crate::budget::Route;
use crate::config::RESERVED_SERVER;
use crate::learning::Weight;
use crate::library::SEPARATOR;
use crate::server::State;
use crate::server::access::Access;
use crate::server::caller::Caller;
use crate::server::catalogs::{RefreshError, first_run, learning, names, resolve_listed};

/// A meta-tool's answer, and the servers its call was about (a login one of them needs can
/// be offered with it). The answer is the server's own JSON-RPC error when the client called
/// a tool by its own name and its server answered with one.
pub(in crate::server) struct Answer {
    pub result: Result<CallToolResult, McpError>,
    pub servers: Vec<String>,
}

/// A call of a tool of `tools/list`, its arguments read.
pub(in crate::server) enum Request {
    Search(search::Args),
    Details(details::Args),
    /// `call_tool`.
    Tool(call::Args),
    /// A tool of `tools/list` called by its own name (an alwaysLoad tool): what its server
    /// answers goes to the client as it is, a JSON-RPC error included.
    Own(call::Args),
    /// A meta-tool that cannot read its arguments, and why.
    Unreadable {
        tool: String,
        message: String,
    },
}

impl Request {
    /// Reads a call of `name` with `arguments`; a name that `listed` (the session's
    /// `tools/list`) does not hold is a protocol error.
    pub(in crate::server) fn read(
        name: &str,
        arguments: JsonObject,
        listed: &[Tool],
    ) -> Result<Self, McpError> {
        let read = match name {
            SEARCH_TOOLS => reply::parse_args(name, arguments).map(Self::Search),
            GET_TOOL_DETAILS => reply::parse_args(name, arguments).map(Self::Details),
            CALL_TOOL => reply::parse_args(name, arguments).map(Self::Tool),
            tool if let Some(qualified) = resolve_listed(listed, tool) => {
                Ok(Self::Own(call::Args {
                    name: qualified,
                    arguments: Some(arguments),
                }))
            }
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
        Ok(read.unwrap_or_else(|message| Self::Unreadable {
            tool: name.to_owned(),
            message,
        }))
    }

    /// The qualified name of the upstream tool this call runs, if it runs one.
    pub(in crate::server) fn tool(&self) -> Option<&str> {
        match self {
            Self::Tool(args) => Some(&args.name),
            _ => None,
        }
    }

    /// Runs the call for `caller` and shapes its result on its route. Servers without a
    /// catalog that a search or description is about are listed first (first run; a tool
    /// call lists its own on its path, which a script's calls take too).
    pub(in crate::server) async fn run(mut self, state: &Arc<State>, caller: &Caller) -> Answer {
        self.qualify(state, &caller.who.access).await;
        let servers = self.servers();
        let result = match self.prepare(state, &caller.who.access, &servers).await {
            Err(failed) => Ok(reply::error(failed.to_string())),
            Ok(()) => self.answer(state, caller).await,
        };
        Answer { result, servers }
    }

    /// Own names of tools (of servers with `prefix: false`) replaced by their qualified names,
    /// so every later step sees one name per tool.
    async fn qualify(&mut self, state: &Arc<State>, access: &Access) {
        match self {
            Self::Tool(args) => args.name = names::resolve(state, access, &args.name).await,
            Self::Details(args) => {
                for name in &mut args.names {
                    *name = names::resolve(state, access, name).await;
                }
            }
            // Already qualified from the session's tools/list.
            Self::Own(_) | Self::Search(_) | Self::Unreadable { .. } => {}
        }
    }

    /// The servers this call is about: those of the tools it calls or describes, or the one a
    /// search is filtered to. Sorted, without repeats.
    fn servers(&self) -> Vec<String> {
        let server_of = |name: &str| name.split_once(SEPARATOR).map(|(s, _)| s.to_owned());
        let mut servers: Vec<String> = match self {
            Self::Search(args) => args.server.iter().cloned().collect(),
            Self::Details(args) => args.names.iter().filter_map(|n| server_of(n)).collect(),
            Self::Tool(args) | Self::Own(args) => server_of(&args.name).into_iter().collect(),
            Self::Unreadable { .. } => Vec::new(),
        };
        servers.sort_unstable();
        servers.dedup();
        servers
    }

    /// Lists those of `servers` that `access` sees and that have no catalog yet, for a search
    /// or a description. A search goes on whatever happened (its result says which servers
    /// are unavailable); a description gets the first failure, as a message the model can act
    /// on.
    async fn prepare(
        &self,
        state: &Arc<State>,
        access: &Access,
        servers: &[String],
    ) -> Result<(), RefreshError> {
        if matches!(self, Self::Tool(_) | Self::Own(_) | Self::Unreadable { .. }) {
            return Ok(());
        }
        let seen = servers.iter().filter(|s| access.sees_server(s));
        let listed = futures::future::join_all(seen.map(|s| first_run::ensure(state, s))).await;
        match self {
            Self::Search(_) => Ok(()),
            _ => listed.into_iter().try_for_each(|l| l.map(drop)),
        }
    }

    /// Runs the call on its route and shapes its result; a tool called by its own name may
    /// answer with its server's JSON-RPC error instead.
    async fn answer(self, state: &Arc<State>, caller: &Caller) -> Result<CallToolResult, McpError> {
        let own = matches!(self, Self::Own(_));
        let soft = |route: &Route| state.limits(route, caller.client_limit).soft;
        let meta = || Route::CallTool {
            server: RESERVED_SERVER.to_owned(),
        };
        let (tool, route, result) = match self {
            Self::Unreadable { tool, message } => {
                let route = match tool.as_str() {
                    SEARCH_TOOLS => Route::SearchTools,
                    GET_TOOL_DETAILS => Route::GetToolDetails,
                    _ => meta(),
                };
                (tool, route, reply::error(message))
            }
            Self::Search(args) => {
                let route = Route::SearchTools;
                let result = search::run(state, &caller.who, soft(&route), args).await;
                (SEARCH_TOOLS.to_owned(), route, result)
            }
            Self::Details(args) => {
                let route = Route::GetToolDetails;
                let introduced = Some(&caller.introduced);
                let result =
                    details::run(state, &caller.who.access, soft(&route), args, introduced);
                let shown = learning::names(&result, "tools");
                let shown = shown.iter().map(String::as_str);
                learning::selected(state, &caller.who, shown, Weight::Details);
                (GET_TOOL_DETAILS.to_owned(), route, result)
            }
            Self::Tool(args) | Self::Own(args) => {
                let result = match call::run(state, caller, args).await {
                    call::Called::Rejected { error, .. } if own => return Err(error),
                    called => called.into_reply(),
                };
                // Results are shaped on their server's route; errors before that here.
                if result.is_error != Some(true) {
                    return Ok(result);
                }
                (CALL_TOOL.to_owned(), meta(), result)
            }
        };
        let result = state.shape(&tool, route, caller, result).await;
        Ok(definitions::conform(&tool, result))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{Value, json};

    use super::*;

    /// The fields an `Args` type reads, as serde names them when it refuses an unknown one.
    fn fields_read(tool: &str) -> BTreeSet<String> {
        let unknown: JsonObject = [("__unknown".to_owned(), json!(1))].into_iter().collect();
        let Request::Unreadable { message, .. } =
            Request::read(tool, unknown, crate::server::definitions()).unwrap()
        else {
            panic!("{tool} read an unknown field");
        };
        // "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`, `c`".
        let (_, expected) = message
            .split_once("expected")
            .unwrap_or_else(|| panic!("{message}"));
        expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn each_meta_tool_reads_exactly_the_arguments_its_definition_declares() {
        for tool in crate::server::definitions() {
            let declared: BTreeSet<String> = tool.input_schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            assert_eq!(fields_read(&tool.name), declared, "{}", tool.name);
            let required: Vec<&str> = tool.input_schema["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for field in required {
                let read =
                    Request::read(&tool.name, JsonObject::new(), crate::server::definitions())
                        .unwrap();
                let Request::Unreadable { message, .. } = read else {
                    panic!("{} reads without its required {field}", tool.name);
                };
                assert!(message.contains(field), "{message}");
            }
        }
    }
}
