//! First run: a configured server without a catalog is listed when it is first needed (a
//! call, details of its tools, a search filtered to it), and its catalog is written as soon as
//! it is listed. Listings run as tracked tasks: a client that leaves does not throw one away,
//! and concurrent needs of one server share one listing.

use std::sync::Arc;

use serde_json::Value;

use super::definitions::{CALL_TOOL, GET_TOOL_DETAILS, SEARCH_TOOLS};
use super::{State, freshness};
use crate::library::SEPARATOR;

/// Lists every server that the meta-tool call `tool` with `args` needs and that has no
/// catalog yet. Returns the first failure as a message the model can act on.
pub(super) async fn prepare(state: &Arc<State>, tool: &str, args: &Value) -> Result<(), String> {
    let servers = servers_of(tool, args);
    let listed = futures::future::join_all(servers.iter().map(|s| ensure(state, s))).await;
    listed.into_iter().collect()
}

/// The servers a meta-tool call is about: those of the tools it calls or describes, or the
/// one a search is filtered to. Sorted, without repeats.
pub(super) fn servers_of(tool: &str, args: &Value) -> Vec<String> {
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

/// Makes sure `server` has a catalog: lists it now if it is configured and has none.
pub(super) async fn ensure(state: &Arc<State>, server: &str) -> Result<(), String> {
    if state.settings.server(server).is_none() || state.library().catalogs.contains_key(server) {
        return Ok(());
    }
    let task = {
        let state = state.clone();
        let server = server.to_owned();
        state
            .tasks
            .clone()
            .spawn(async move { list(&state, &server).await })
    };
    task.await
        .unwrap_or_else(|e| Err(format!("listing \"{server}\" failed: {e}")))
}

/// Lists a server that has no catalog, once: whoever comes second waits for the first
/// listing and then finds the catalog. Failures are remembered for search results.
pub(super) async fn list(state: &Arc<State>, server: &str) -> Result<(), String> {
    let lock = state.listing_lock(server);
    let _one = lock.lock().await;
    if state.library().catalogs.contains_key(server) {
        return Ok(());
    }
    tracing::info!(server, "listing tools (no catalog yet)");
    let listed = freshness::refresh(state, server, false).await;
    state.set_unavailable(server, listed.as_ref().err().cloned());
    listed
}
