//! What the console shows and does, as JSON for its page: the servers, the tools waiting for
//! review (and approving them), the audit log's recent lines, the last hour's calls per
//! server, and a search as a given token sees it. Upstream text is sent as it is, in JSON
//! strings; the page only ever sets it as text.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::catalog::Catalog;
use crate::config::{ServerConfig, TransportConfig, TrustMode};
use crate::server::State;
use crate::server::access::Access;
use crate::server::catalogs::refresh;
use crate::server::tools::search;
use crate::trust::{Approvals, Choice, Kind, TrustError};

/// The audit log's tail read for the activity view, in bytes.
const AUDIT_TAIL: u64 = 512 * 1024;
/// Lines the activity view shows at most.
const ACTIVITY_LINES: usize = 200;

/// Why an action failed, as the page shows it.
#[derive(Debug, thiserror::Error)]
pub(super) enum ActionError {
    #[error("no server \"{0}\" is configured")]
    NoServer(String),
    #[error("server \"{0}\" has no catalog yet: refresh it first")]
    NoCatalog(String),
    #[error("no item \"{0}\" of server \"{1}\": reload the review and pick one it lists")]
    NoItem(String, String),
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error("refreshing failed: {0}")]
    Refresh(String),
}

/// Every configured server with its transport, state, revision, tools, last listing, login
/// and quarantined tools.
pub(super) fn servers(state: &State) -> Value {
    let library = state.catalogs.library();
    let unavailable: BTreeMap<String, String> = state.catalogs.unavailable().into_iter().collect();
    let indexing = state.catalogs.indexing();
    let settings = state.settings();
    let servers: Vec<Value> = settings
        .servers
        .iter()
        .map(|server| {
            let catalog = library.catalogs.get(&server.name);
            let (live, reason) = match (
                state.manager.connection_state(&server.name),
                unavailable.get(&server.name),
            ) {
                (_, Some(reason)) => ("unavailable", Some(reason.clone())),
                (Some(true), None) => ("connected", None),
                (None, None) => ("connecting", None),
                (Some(false), None) if indexing.contains(&server.name) => ("indexing", None),
                (Some(false), None) => ("idle", None),
            };
            let quarantined: Vec<String> = catalog
                .map(|c| {
                    let holds = state.trust.holds(c);
                    let names = holds
                        .iter()
                        .map(|(kind, key, _)| kind.name(&server.name, key));
                    names.collect()
                })
                .unwrap_or_default();
            json!({
                "name": server.name,
                "key": server.key,
                "description": server.description,
                "transport": transport(server),
                "state": live,
                "reason": reason,
                "revision": state.manager.revision(&server.name),
                "tools": catalog.map(|c| c.tools.len()),
                "listedAt": catalog.and_then(|c| c.fetched_at.clone()),
                "login": login(server),
                "quarantined": quarantined,
            })
        })
        .collect();
    json!({"servers": servers, "trust": trust_mode(state.trust.mode())})
}

fn transport(server: &ServerConfig) -> &'static str {
    match server.transport {
        TransportConfig::Stdio { .. } => "stdio",
        TransportConfig::Http { .. } => "http",
        TransportConfig::Sse { .. } => "sse",
    }
}

fn trust_mode(mode: TrustMode) -> &'static str {
    match mode {
        TrustMode::FirstUse => "first-use",
        TrustMode::Review => "review",
        TrustMode::Off => "off",
    }
}

/// The login state of a remote server (`null` for stdio).
fn login(server: &ServerConfig) -> Value {
    if matches!(server.transport, TransportConfig::Stdio { .. }) {
        return Value::Null;
    }
    match crate::auth::stored(server) {
        Ok(crate::auth::Stored::LoggedIn { expires_at, .. }) => {
            json!({"state": "logged-in", "expiresAt": expires_at})
        }
        Ok(crate::auth::Stored::OtherUrl) => json!({"state": "other-url"}),
        Ok(crate::auth::Stored::None) => json!({"state": "none"}),
        Err(e) => json!({"state": "unreadable", "error": e.to_string()}),
    }
}

/// What waits for approval (tools, prompts, resources, templates, instructions), each with its
/// approved and current version and its flags, and the approved items whose texts are flagged:
/// what `meta-server tools review` lists, from the shared store's approvals when there is one.
pub(super) async fn review(state: &State) -> Value {
    let library = state.catalogs.library();
    let settings = state.settings();
    let dir = &settings.catalog_dir;
    let mut items = Vec::new();
    for server in &settings.servers {
        let Some(catalog) = library.catalogs.get(&server.name) else {
            continue;
        };
        let approvals = match &state.shared {
            Some(store) => crate::trust::shared::load(store, dir, &server.name).await.0,
            None => Approvals::load(dir, &server.name),
        };
        items.extend(crate::trust::review(state.trust.mode(), approvals, catalog));
    }
    json!({"items": items, "trust": trust_mode(state.trust.mode())})
}

/// Approves the item `name` (as `tools approve` names it) of `server`, or everything of it
/// that waits (`name` absent), as the catalog holds it now: in the shared store when there is
/// one (every replica follows it), else beside the catalogs.
pub(super) async fn approve(
    state: &State,
    server: &str,
    name: Option<&str>,
) -> Result<Vec<String>, ActionError> {
    let settings = state.settings();
    let config = settings
        .server(server)
        .ok_or_else(|| ActionError::NoServer(server.to_owned()))?;
    let library = state.catalogs.library();
    let catalog: &Catalog = library
        .catalogs
        .get(&config.name)
        .ok_or_else(|| ActionError::NoCatalog(config.name.clone()))?;
    let choice = match name {
        None => Choice::All,
        Some(name) => {
            let no_item = || ActionError::NoItem(name.to_owned(), config.name.clone());
            let (kind, named, key) = Kind::parse(name).ok_or_else(no_item)?;
            if settings.server(named).map(|c| &c.name) != Some(&config.name) {
                return Err(no_item());
            }
            let key = crate::trust::key_named(catalog, kind, key).ok_or_else(no_item)?;
            Choice::Items(vec![(kind, key)])
        }
    };
    let dir = &settings.catalog_dir;
    let names = match &state.shared {
        Some(store) => crate::trust::shared::approve(store, dir, catalog, &choice).await?,
        None => crate::trust::approve(dir, catalog, &choice)?,
    };
    tracing::info!(server = config.name, ?names, "approved from the console");
    Ok(names)
}

/// Lists `server`'s tools again now (one listing at a time, as a first run takes).
pub(super) async fn refresh_server(state: &Arc<State>, server: &str) -> Result<(), ActionError> {
    let settings = state.settings();
    let config = settings
        .server(server)
        .ok_or_else(|| ActionError::NoServer(server.to_owned()))?;
    let lock = state.catalogs.listing_lock(&config.name);
    let _one = lock.lock().await;
    let listed = refresh(state, &config.name, true).await;
    (state.catalogs).set_unavailable(&config.name, listed.as_ref().err().map(ToString::to_string));
    listed.map_err(|e| ActionError::Refresh(e.to_string()))
}

/// Filters of the activity view: each, when given, must equal the line's field.
#[derive(Debug, Default)]
pub(super) struct Filters {
    pub server: Option<String>,
    pub tool: Option<String>,
    pub token: Option<String>,
    pub outcome: Option<String>,
}

/// The audit log's last lines (newest first) that pass `filters`.
pub(super) fn activity(state: &State, filters: &Filters) -> Value {
    let settings = state.settings();
    let Some(audit) = &settings.audit else {
        return json!({"configured": false, "lines": []});
    };
    let text = match tail(&audit.path, AUDIT_TAIL) {
        Ok(text) => text,
        Err(e) => {
            let error = format!("cannot read {}: {e}", audit.path.display());
            return json!({"configured": true, "lines": [], "error": error});
        }
    };
    let wanted = |line: &Value, key: &str, filter: &Option<String>| {
        filter
            .as_deref()
            .is_none_or(|f| f.is_empty() || line[key].as_str() == Some(f))
    };
    let tool_of = |line: &Value| {
        let named = line["tool"].as_str().or(line["prompt"].as_str());
        named
            .map(str::to_owned)
            .or(line["uri"].as_str().map(str::to_owned))
    };
    let lines: Vec<Value> = text
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|line| {
            wanted(line, "server", &filters.server)
                && wanted(line, "principal", &filters.token)
                && wanted(line, "outcome", &filters.outcome)
                && filters
                    .tool
                    .as_deref()
                    .is_none_or(|f| f.is_empty() || tool_of(line).as_deref() == Some(f))
        })
        .take(ACTIVITY_LINES)
        .collect();
    json!({"configured": true, "lines": lines})
}

/// The last `bytes` of the file at `path`, from its first whole line.
fn tail(path: &std::path::Path, bytes: u64) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(bytes);
    file.seek(SeekFrom::Start(start))?;
    let mut raw = Vec::new();
    file.take(bytes).read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    Ok(match (start > 0, text.find('\n')) {
        (true, Some(first)) => text[first + 1..].to_owned(),
        _ => text,
    })
}

/// The last hour of tool calls per minute and server.
pub(super) fn charts(state: &State) -> Value {
    let (now, minutes) = state.metrics.minutes.last_hour();
    json!({"now": now, "minutes": minutes})
}

/// `search_tools` as the holder of `access` would run it, with every hit's rank and score.
pub(super) async fn search_as(
    state: &State,
    access: &Access,
    query: String,
    server: Option<String>,
    limit: usize,
) -> Value {
    let args = search::Args {
        query,
        limit: limit.clamp(1, 50),
        server: server.filter(|s| !s.is_empty()),
        detail: search::Detail::Summary,
        group_by_server: false,
    };
    let soft = state.limits(&crate::budget::Route::SearchTools, None).soft;
    // No teacher: an operator's search teaches the ranking nothing.
    let who = crate::server::caller::Who {
        access: access.clone(),
        ..Default::default()
    };
    let reply = search::run(state, &who, soft, args).await;
    match reply.structured_content {
        Some(found) => json!({"ok": reply.is_error != Some(true), "result": found}),
        None => {
            let text: String = (reply.content.iter())
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect();
            json!({"ok": false, "error": text})
        }
    }
}
