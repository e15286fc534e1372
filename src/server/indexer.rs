//! Background indexing at `serve` start: servers without a catalog are connected, listed,
//! persisted and disconnected, then become searchable.

use std::sync::Arc;

use futures::StreamExt;

use super::{Library, State};
use crate::catalog;

/// Indexes `servers` with bounded concurrency, swapping in a new library after each one.
pub(super) async fn index_missing(state: Arc<State>, servers: Vec<String>) {
    state
        .indexing
        .lock()
        .expect("indexing lock")
        .extend(servers.iter().cloned());
    let concurrency = state.settings.index_concurrency;
    futures::stream::iter(servers)
        .for_each_concurrent(concurrency, |server| {
            let state = state.clone();
            async move {
                index_one(&state, &server).await;
                state
                    .indexing
                    .lock()
                    .expect("indexing lock")
                    .remove(&server);
            }
        })
        .await;
}

async fn index_one(state: &State, server: &str) {
    let Some(config) = state.settings.server(server) else {
        return;
    };
    tracing::info!(server, "indexing in the background");
    let fetched = catalog::fetch(&state.manager, config).await;
    state.manager.disconnect_if_idle(server).await;
    let catalog = match fetched {
        Ok(catalog) => catalog,
        Err(e) => {
            tracing::warn!(server, "background indexing failed: {e}");
            return;
        }
    };
    if let Err(e) = catalog.write(&state.settings.catalog_dir) {
        tracing::warn!(server, "{e}");
    }
    let mut catalogs = state.library().catalogs.clone();
    catalogs.insert(server.to_owned(), catalog);
    match Library::build(&state.settings.servers, catalogs) {
        Ok(library) => state.replace_library(library),
        Err(e) => tracing::warn!(server, "rebuilding the search index failed: {e}"),
    }
    tracing::info!(server, "indexed");
}
