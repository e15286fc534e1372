//! `alwaysLoad` servers: connected at start-up, their tools listed in `tools/list` under
//! qualified names (own names with `prefix: false`) after the three meta-tools (but those
//! quarantined, see [`crate::trust`]).
//! Fixed for the life of the process, so the client's prompt cache stays valid; a change needs
//! a restart. A qualified name longer than model providers accept (64 characters) is listed
//! shortened (see [`listed_name`]).

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::Value;

use super::refresh::refresh;
use crate::config::ServerConfig;
use crate::server::State;

/// Connects every alwaysLoad server (re-listing stale catalogs), then returns their tools in
/// server-name order, as they will be listed for the rest of the process.
pub(in crate::server) async fn prepare(state: &Arc<State>) -> Vec<Tool> {
    let settings = state.settings();
    let always: Vec<&ServerConfig> = (settings.servers.iter())
        .filter(|s| s.always_load)
        .collect();
    let servers: Vec<&str> = always.iter().map(|s| s.name.as_str()).collect();
    // Marked as indexing so the freshness watcher does not re-list them a second time.
    state
        .catalogs
        .start_indexing(servers.iter().map(|s| s.to_string()));
    futures::future::join_all(servers.iter().map(|&server| async move {
        if let Err(e) = state.manager.connect(server).await {
            tracing::warn!(
                server,
                "alwaysLoad server did not start; its tools are listed from the catalog: {e}"
            );
        } else if state.catalogs.is_stale(server)
            && let Err(e) = refresh(state, server, false).await
        {
            tracing::warn!(server, "re-listing tools failed: {e}");
        }
        state.catalogs.end_indexing(server);
    }))
    .await;
    let library = state.catalogs.library();
    always
        .iter()
        .flat_map(|&server| {
            library
                .entries
                .values()
                .filter(move |e| e.server == server.name)
                // Unapproved text never enters the fixed prefix; call_tool refuses the tool.
                .filter(|e| {
                    let held = state.trust.quarantine_of(&library, e);
                    if let Some(q) = &held {
                        tracing::warn!(tool = %e.qualified, "alwaysLoad tool left out of tools/list: {}", q.why());
                    }
                    held.is_none()
                })
                .filter_map(|e| listed(e.def.value(), &e.qualified, server.prefix))
        })
        .collect()
}

/// Longest tool name model providers accept.
const MAX_NAME_CHARS: usize = 64;
/// Where a shortened tool's `_meta` keeps its qualified name.
const QUALIFIED_KEY: &str = "meta-server/qualifiedName";

/// The catalog tool as an MCP tool under its listed name (its own name, as its server sent
/// it, when the server is not `prefixed`); `None` if it does not parse.
fn listed(mut raw: Value, qualified: &str, prefixed: bool) -> Option<Tool> {
    if !prefixed {
        return serde_json::from_value(raw)
            .inspect_err(|e| {
                tracing::warn!(tool = qualified, "cannot list this alwaysLoad tool: {e}")
            })
            .ok();
    }
    let name = listed_name(qualified);
    let fields = raw.as_object_mut()?;
    if name != qualified {
        let meta = fields
            .entry("_meta")
            .or_insert_with(|| serde_json::json!({}));
        meta.as_object_mut()?
            .insert(QUALIFIED_KEY.into(), qualified.into());
    }
    fields.insert("name".into(), name.into());
    // Every field of the catalog's tool goes out in tools/list, not only those rmcp knows.
    crate::verbatim::carry(&mut raw);
    serde_json::from_value(raw)
        .inspect_err(|e| tracing::warn!(tool = qualified, "cannot list this alwaysLoad tool: {e}"))
        .ok()
}

/// The name `qualified` is listed under: itself when it has at most 64 characters, else its
/// first 55 characters, `_` and 8 hex digits of its checksum, which stay the same on every
/// start and machine while the names do.
pub(in crate::server) fn listed_name(qualified: &str) -> String {
    if qualified.chars().count() <= MAX_NAME_CHARS {
        return qualified.to_owned();
    }
    let head: String = qualified.chars().take(MAX_NAME_CHARS - 9).collect();
    let sum = crate::checksum::of(qualified.as_bytes());
    format!("{head}_{}", crate::checksum::hex(&sum[..4]))
}

/// The qualified name of the tool listed at start-up as `name`; `None` if none is.
pub(in crate::server) fn resolve(listed: &[Tool], name: &str) -> Option<String> {
    let tool = listed.iter().find(|t| t.name == name)?;
    let qualified = tool.meta.as_ref().and_then(|m| m.get(QUALIFIED_KEY));
    Some(qualified.and_then(Value::as_str).unwrap_or(name).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::qualified_name;

    #[test]
    fn listed_tools_take_the_qualified_name() {
        let raw = serde_json::json!({"name": "get_current_time", "inputSchema": {"type": "object"}, "x-kept": 1});
        let tool = listed(
            raw.clone(),
            &qualified_name("time", "get_current_time"),
            true,
        )
        .unwrap();
        assert_eq!(tool.name, "time__get_current_time");
        let mut out = serde_json::to_value(&tool).unwrap();
        crate::verbatim::complete(&mut out);
        assert_eq!(
            out,
            serde_json::json!({"name": "time__get_current_time", "inputSchema": {"type": "object"}, "x-kept": 1}),
            "listed with every field, under its qualified name"
        );
        let listed = [tool];
        assert_eq!(
            resolve(&listed, "time__get_current_time").as_deref(),
            Some("time__get_current_time")
        );
        assert_eq!(resolve(&listed, "time__convert_time"), None);
        let own = super::listed(raw, &qualified_name("time", "get_current_time"), false).unwrap();
        assert_eq!(own.name, "get_current_time", "prefix: false");
        assert!(own.meta.is_none());
        assert_eq!(
            resolve(&[own], "get_current_time").as_deref(),
            Some("get_current_time")
        );
    }

    #[test]
    fn a_name_over_64_characters_is_listed_shortened_and_resolves_back() {
        let long = |tool: &str| qualified_name("github-enterprise-server", tool);
        let (a, b) = (
            long("list_repository_collaborator_permission_levels_for_org"),
            long("list_repository_collaborator_permission_levels_for_team"),
        );
        assert!(a.len() > 64);
        let raw = |name: &str| serde_json::json!({"name": name, "inputSchema": {"type": "object"}, "_meta": {"x": 1}});
        let listed = [
            listed(raw("a"), &a, true).unwrap(),
            listed(raw("b"), &b, true).unwrap(),
        ];
        for (tool, qualified) in listed.iter().zip([&a, &b]) {
            assert_eq!(tool.name.chars().count(), 64, "{}", tool.name);
            assert!(qualified.starts_with(&tool.name[..55]));
            assert_eq!(tool.name, listed_name(qualified), "the same on every start");
            assert_eq!(resolve(&listed, &tool.name).as_ref(), Some(qualified));
            assert_eq!(
                tool.meta.as_ref().unwrap()["x"],
                1,
                "the server's own _meta is kept"
            );
        }
        assert_ne!(listed[0].name, listed[1].name);
        assert_eq!(listed_name("é".repeat(65).as_str()).chars().count(), 64);
    }
}
