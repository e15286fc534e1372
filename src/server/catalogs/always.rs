//! `alwaysLoad` servers: connected at start-up, their tools listed in `tools/list` under
//! qualified names after the three meta-tools (but those quarantined, see [`crate::trust`]). Fixed for the life of the process, so the
//! client's prompt cache stays valid; a change needs a restart.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::Value;

use super::refresh::refresh;
use crate::server::State;

/// Connects every alwaysLoad server (re-listing stale catalogs), then returns their tools in
/// server-name order, as they will be listed for the rest of the process.
pub(in crate::server) async fn prepare(state: &Arc<State>) -> Vec<Tool> {
    let servers: Vec<&str> = state
        .settings
        .servers
        .iter()
        .filter(|s| s.always_load)
        .map(|s| s.name.as_str())
        .collect();
    // Marked as indexing so the freshness watcher does not re-list them a second time.
    state
        .indexing
        .lock()
        .extend(servers.iter().map(|s| s.to_string()));
    futures::future::join_all(servers.iter().map(|&server| async move {
        if let Err(e) = state.manager.connect(server).await {
            tracing::warn!(
                server,
                "alwaysLoad server did not start; its tools are listed from the catalog: {e}"
            );
        } else if state.is_stale(server)
            && let Err(e) = refresh(state, server, false).await
        {
            tracing::warn!(server, "re-listing tools failed: {e}");
        }
        state.indexing.lock().remove(server);
    }))
    .await;
    let library = state.library();
    servers
        .iter()
        .flat_map(|&server| {
            library
                .entries
                .values()
                .filter(move |e| e.server == server)
                // Unapproved text never enters the fixed prefix; call_tool refuses the tool.
                .filter(|e| {
                    let held = state.quarantine(&library, e);
                    if let Some(q) = &held {
                        tracing::warn!(tool = %e.qualified, "alwaysLoad tool left out of tools/list: {}", q.why());
                    }
                    held.is_none()
                })
                .filter_map(|e| listed(e.def.value(), &e.qualified))
        })
        .collect()
}

/// The catalog tool as an MCP tool under its qualified name; `None` if it does not parse.
fn listed(mut raw: Value, qualified: &str) -> Option<Tool> {
    raw.as_object_mut()?.insert("name".into(), qualified.into());
    serde_json::from_value(raw)
        .inspect_err(|e| tracing::warn!(tool = qualified, "cannot list this alwaysLoad tool: {e}"))
        .ok()
}

/// Whether `name` is one of the tools listed at start-up.
pub(in crate::server) fn is_listed(listed: &[Tool], name: &str) -> bool {
    listed.iter().any(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::qualified_name;

    #[test]
    fn listed_tools_take_the_qualified_name() {
        let raw = serde_json::json!({"name": "get_current_time", "inputSchema": {"type": "object"}, "x-kept": 1});
        let tool = listed(raw, &qualified_name("time", "get_current_time")).unwrap();
        assert_eq!(tool.name, "time__get_current_time");
        assert!(is_listed(&[tool], "time__get_current_time"));
    }
}
