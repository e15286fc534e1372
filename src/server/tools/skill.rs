//! Skills as the model sees them: found by `search_tools`, and `get_tool_details` or
//! `call_tool` on one returns its instructions, starts connecting the servers it declares in
//! the background, and ranks their tools higher for the rest of the session.

use serde_json::{Value, json};

use super::reply::{self, Reply};
use crate::library::Entry;
use crate::server::State;
use crate::server::access::Access;
use crate::skills::Skill;

/// Boosts the skill's servers and starts the configured ones `access` sees; returns
/// (configured, missing). A server hidden from `access` is neither started nor named.
pub(in crate::server) fn activate(
    state: &State,
    skill: &Skill,
    access: &Access,
) -> (Vec<String>, Vec<String>) {
    let (configured, missing): (Vec<String>, Vec<String>) = (skill.servers.iter())
        .filter(|s| state.settings().server(s).is_none() || access.sees_server(s))
        .cloned()
        .partition(|s| state.settings().server(s).is_some());
    state.catalogs.boost(configured.iter().cloned());
    for server in &configured {
        let manager = state.manager.clone();
        let server = server.clone();
        tokio::spawn(async move {
            if let Err(e) = manager.connect(&server).await {
                tracing::warn!(server, "starting a server for a skill failed: {e}");
            }
        });
    }
    (configured, missing)
}

/// The skill's full definition for `get_tool_details`; activates it for `access`.
pub(in crate::server) fn details(
    state: &State,
    entry: &Entry,
    skill: &Skill,
    access: &Access,
) -> Value {
    let (servers, missing) = activate(state, skill, access);
    json!({
        "name": entry.qualified,
        "server": entry.server,
        "tool": skill.name,
        "kind": "skill",
        "description": skill.description,
        "inputSchema": {"type": "object"},
        "instructions": skill.body,
        "servers": servers,
        "missingServers": missing,
    })
}

/// `call_tool` on a skill: its instructions as text; activates it for `access`.
pub(in crate::server) fn run(state: &State, skill: &Skill, access: &Access) -> Reply {
    let (servers, missing) = activate(state, skill, access);
    let mut text = format!(
        "Skill {}: {}\n\n{}\n",
        skill.name, skill.description, skill.body
    );
    if !servers.is_empty() {
        text.push_str(&format!(
            "\nStarting its servers now: {}. Find their tools with search_tools.\n",
            servers.join(", ")
        ));
    }
    if !missing.is_empty() {
        text.push_str(&format!(
            "\nThis skill needs servers that are not configured: {}. Add them to {} to use it fully.\n",
            missing.join(", "),
            state.settings().source.display()
        ));
    }
    let out = json!({"skill": skill.name, "instructions": skill.body, "servers": servers, "missingServers": missing});
    reply::structured(&out, text)
}
