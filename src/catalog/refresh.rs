//! Building a fresh catalog from a live upstream.

use std::time::SystemTime;

use crate::config::ServerConfig;
use crate::upstream::{Manager, UpstreamError};
use crate::verbatim;

use super::{Catalog, FORMAT, RawTool, config_fingerprint, tools_hash};

/// Connects `server` (if needed), pages through its whole `tools/list` (and its prompts,
/// resources and resource templates) and returns its catalog: every object with every field
/// the server sent (see [`verbatim`]).
pub async fn fetch(manager: &Manager, server: &ServerConfig) -> Result<Catalog, UpstreamError> {
    let (list, conn) = manager.list_tools(&server.name).await?;
    let offers = manager.list_offers(&server.name).await?;
    let info = conn.server_info();
    let tools: Vec<RawTool> = list
        .items
        .iter()
        .map(|t| RawTool::from(verbatim::take(t)))
        .collect();
    Ok(Catalog {
        format: FORMAT,
        server: server.name.clone(),
        fetched_at: Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string()),
        config_fingerprint: Some(config_fingerprint(server)),
        protocol_version: info.as_ref().map(|i| i.protocol_version.to_string()),
        server_info: info
            .as_ref()
            .and_then(|i| serde_json::to_value(&i.server_info).ok()),
        instructions: info.and_then(|i| i.instructions.clone()),
        tools_hash: Some(tools_hash(&tools)),
        ttl_ms: list.ttl_ms,
        tools,
        prompts: offers.prompts.map(Into::into),
        resources: offers.resources.map(Into::into),
        resource_templates: offers.resource_templates.map(Into::into),
    })
}
