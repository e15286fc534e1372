//! The servers a meta-tool call is about, listed first when they have no catalog yet (first
//! run): those of the tools it describes or calls, or the one a search is filtered to.

use std::sync::Arc;

use serde_json::Value;

use super::definitions::{CALL_TOOL, GET_TOOL_DETAILS, SEARCH_TOOLS};
use crate::library::SEPARATOR;
use crate::server::State;
use crate::server::catalogs::{RefreshError, first_run};

/// Lists every server that the meta-tool call `tool` with `args` needs and that has no
/// catalog yet. Returns the first failure as a message the model can act on.
pub(in crate::server) async fn prepare(
    state: &Arc<State>,
    tool: &str,
    args: &Value,
) -> Result<(), RefreshError> {
    let servers = servers_of(tool, args);
    let listed =
        futures::future::join_all(servers.iter().map(|s| first_run::ensure(state, s))).await;
    listed.into_iter().collect()
}

/// The servers a meta-tool call is about: those of the tools it calls or describes, or the
/// one a search is filtered to. Sorted, without repeats.
pub(in crate::server) fn servers_of(tool: &str, args: &Value) -> Vec<String> {
    let names: Vec<&str> = match tool {
        CALL_TOOL => args
            .get("name")
            .and_then(Value::as_str)
            .into_iter()
            .collect(),
        GET_TOOL_DETAILS => args
            .get("names")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default(),
        SEARCH_TOOLS => {
            return args
                .get("server")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .into_iter()
                .collect();
        }
        _ => Vec::new(),
    };
    let mut servers: Vec<String> = names
        .iter()
        .filter_map(|name| {
            name.split_once(SEPARATOR)
                .map(|(server, _)| server.to_owned())
        })
        .collect();
    servers.sort_unstable();
    servers.dedup();
    servers
}
