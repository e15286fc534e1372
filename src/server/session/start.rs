//! Start-up shared by stdio and HTTP, and the signal that ends serving.

use super::handler::MetaServer;
use crate::audit::AuditError;
use crate::config::Settings;
use crate::search::SearchError;
use crate::server::State;
use crate::server::catalogs::{freshness, names, shared};
use crate::server::tools::definitions::definitions;
use crate::server::tools::load_library;
use crate::store::{StoreError, Valkey};
use crate::trust::shared::Follow;

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Library(#[from] SearchError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Names(#[from] names::Clash),
    #[error(transparent)]
    Audit(#[from] AuditError),
}

/// Start-up shared by stdio and HTTP: checks that the audit log can be written, opens the
/// shared store if one is configured (taking the catalogs other replicas listed and the
/// approvals they share, then following both), loads the library from the catalogs, starts the
/// freshness watcher, connects alwaysLoad servers, fixes `tools/list` and the `initialize`
/// instructions, and refuses own names (`prefix: false`) that clash; checks that servers with
/// a catalog can be started, saves the search index if it was built or updated, and indexes
/// servers without one, all in the background; then follows the config file.
/// `many_clients`: `serve --http`, whose clients share the upstream connections.
pub(super) async fn start(
    settings: Settings,
    many_clients: bool,
) -> Result<MetaServer, StartError> {
    // A log that cannot take lines stops serving before anything starts, not each call later.
    if let Some(audit) = &settings.audit {
        crate::audit::check(audit)?;
    }
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
    let approvals = match &shared {
        Some(store) => {
            let servers = settings.servers.iter().map(|s| s.name.clone()).collect();
            let dir = settings.catalog_dir.clone();
            Some(Follow::start(dir, store.clone(), servers).await)
        }
        None => None,
    };
    let loaded = load_library(&settings)?;
    let (state, missing) = State::open(settings, shared.clone(), loaded);
    if many_clients {
        state.manager.serve_many_clients();
    }
    for (server, reason) in state.catalogs.unavailable() {
        if state.settings().server(&server).is_some() {
            tracing::warn!(server, "cannot be started: {reason}");
        }
    }
    shared::record_pulled(&state, pulled);
    if let Some(store) = shared {
        tokio::spawn(shared::follow(state.clone(), store));
    }
    if let Some(approvals) = approvals {
        let state = state.clone();
        let servers = move || {
            state
                .settings()
                .servers
                .iter()
                .map(|s| s.name.clone())
                .collect()
        };
        tokio::spawn(approvals.run(servers));
    }
    state.catalogs.embed_at_start();
    state.learn();
    tokio::spawn(freshness::watch(state.clone()));
    let checking = state.clone();
    tokio::task::spawn_blocking(move || checking.catalogs.check_launches());
    state.catalogs.save_index_in_background();
    let server = MetaServer::start(state.clone()).await;
    // With the catalogs of alwaysLoad servers as listed now: own names (`prefix: false`)
    // must not clash.
    let meta_tools: Vec<&str> = definitions().iter().map(|t| t.name.as_ref()).collect();
    let settings = state.settings();
    if names::unprefixed(&settings.servers).next().is_some()
        && let Err(clash) = names::check(
            &settings.source,
            &settings.servers,
            &names::Listed::of(&state.catalogs.library()),
            &meta_tools,
        )
    {
        state.stop().await;
        return Err(clash.into());
    }
    tokio::spawn(super::config_file::follow(server.clone()));
    let missing: Vec<String> = missing
        .into_iter()
        .filter(|s| !state.catalogs.library().catalogs.contains_key(s))
        .collect();
    if !missing.is_empty() {
        tokio::spawn(freshness::index_missing(state.clone(), missing));
    }
    Ok(server)
}

/// Resolves on Ctrl-C or SIGTERM. Without a SIGTERM handler (it cannot be installed), Ctrl-C
/// alone ends the wait.
pub(super) async fn shutdown_signal() {
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
