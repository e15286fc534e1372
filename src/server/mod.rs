//! The MCP server the client talks to: three fixed meta-tools over the library of upstream
//! tools. The only module that knows the meta-tools exist.
//!
//! `state.rs` is what one process shares, `handler.rs` what one session talks to, `stdio.rs` and
//! `http.rs` the two transports; each meta-tool has a file of its own.

mod always;
mod builtin;
mod call_tool;
mod definitions;
mod details_tool;
mod first_run;
mod freshness;
#[cfg(test)]
mod freshness_tests;
mod guard;
mod handler;
mod http;
mod instructions;
mod login_offer;
pub mod metrics;
mod reply;
mod script_tool;
mod search_tool;
mod shared;
mod skill_tool;
mod state;
mod stdio;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use crate::config::Settings;
use crate::library::{Library, LoadReport};
use crate::search::SearchError;
use crate::store::{StoreError, Valkey};

pub use builtin::catalog as builtin_catalog;
pub use definitions::definitions;
pub use handler::MetaServer;
pub use http::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, HttpError, HttpOptions,
    HttpServer, PATH as HTTP_PATH, Token,
};
pub use search_tool::{Args as SearchArgs, Detail};
pub use state::State;
pub use stdio::{StdioError, serve_stdio};

/// Runs `search_tools` with these arguments over `library`, as a session that has read no
/// skill and within the budget a client without a limit of its own gets: the CLI's `search`
/// answers with the very same code, without a server.
pub fn search_tools(
    library: &Library,
    settings: &Settings,
    args: SearchArgs,
) -> rmcp::model::CallToolResult {
    let results = state::result_handler(settings, None);
    let scope = search_tool::Scope {
        library,
        servers: settings.servers.iter().map(|s| s.name.as_str()).collect(),
        boosted: Default::default(),
        indexing: Vec::new(),
        unavailable: settings
            .skipped
            .iter()
            .map(|s| (s.key.clone(), s.reason.clone()))
            .collect(),
        results: &results,
        soft: state::budgets(settings)
            .limits(&crate::budget::Route::SearchTools, None)
            .soft,
    };
    search_tool::answer(&scope, args)
}

/// The library of the configured servers' catalogs, skills and the built-in `meta` tools.
pub fn load_library(settings: &Settings) -> Result<(Library, LoadReport), SearchError> {
    Library::load(settings, Some(builtin::catalog()))
}

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Library(#[from] SearchError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Start-up shared by stdio and HTTP: opens the shared store if one is configured (taking the
/// catalogs other replicas listed), loads the library from the catalogs, starts the freshness
/// watcher, connects alwaysLoad servers, fixes `tools/list` and the `initialize` instructions;
/// checks that servers with a catalog can be started, saves the search index if it was built or
/// updated, and indexes servers without one, all in the background.
async fn start(settings: Settings) -> Result<MetaServer, StartError> {
    let shared = match &settings.store {
        Some(store) => Some(Valkey::open(&store.url)?),
        None => None,
    };
    let pulled = match &shared {
        Some(store) => {
            tracing::info!(
                store = store.shown_url(),
                "results, sessions and catalogs are shared"
            );
            shared::pull(&settings, store).await
        }
        None => Vec::new(),
    };
    let (state, missing) = State::open(settings, shared.clone())?;
    shared::record_pulled(&state, pulled);
    if let Some(store) = shared {
        tokio::spawn(shared::follow(state.clone(), store));
    }
    state.embed_at_start();
    tokio::spawn(freshness::watch(state.clone()));
    let checking = state.clone();
    tokio::task::spawn_blocking(move || checking.check_launches());
    state.save_index_in_background();
    let server = MetaServer::start(state.clone()).await;
    let missing: Vec<String> = missing
        .into_iter()
        .filter(|s| !state.library().catalogs.contains_key(s))
        .collect();
    if !missing.is_empty() {
        tokio::spawn(freshness::index_missing(state.clone(), missing));
    }
    Ok(server)
}

/// Runs one `call_tool` outside any session, as `meta-server call` does: the very path of
/// the meta-tool (first run, allow/deny, argument validation, lazy connect, result handling).
pub async fn call(
    state: &Arc<State>,
    name: &str,
    arguments: serde_json::Map<String, serde_json::Value>,
) -> rmcp::model::CallToolResult {
    let caller = call_tool::Caller {
        client_limit: None,
        owner: crate::result::Owner::session(),
        principal: None,
        cancelled: tokio_util::sync::CancellationToken::new(),
        progress_to: None,
    };
    let args = call_tool::Args {
        name: name.to_owned(),
        arguments: Some(arguments),
    };
    call_tool::run(state, &caller, args).await
}

/// Resolves on Ctrl-C or SIGTERM. Without a SIGTERM handler (it cannot be installed), Ctrl-C
/// alone ends the wait.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {},
                    _ = term.recv() => {},
                }
                return;
            }
            Err(e) => tracing::warn!("cannot watch for SIGTERM, only Ctrl-C stops serving: {e}"),
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
