//! First run: a configured server without a catalog is listed when it is first needed (a
//! call, details of its tools, a search filtered to it), and its catalog is written as soon as
//! it is listed. Listings run as tracked tasks: a client that leaves does not throw one away,
//! and concurrent needs of one server share one listing.

use std::sync::Arc;

use super::error::RefreshError;
use super::refresh::refresh;
use crate::catalog::Failure;
use crate::library::Library;
use crate::server::State;
use crate::upstream::UpstreamError;

/// Makes sure `server` has a catalog: lists it now if it is configured and has none. Returns
/// the library as it is then, the server's catalog in it.
pub(in crate::server) async fn ensure(
    state: &Arc<State>,
    server: &str,
) -> Result<Arc<Library>, RefreshError> {
    let library = state.catalogs.library();
    if state.settings().server(server).is_none() || library.catalogs.contains_key(server) {
        return Ok(library);
    }
    drop(library);
    let task = {
        let state = state.clone();
        let server = server.to_owned();
        state
            .catalogs
            .clone()
            .track(async move { list(&state, &server).await })
    };
    task.await
        .unwrap_or_else(|e| {
            Err(RefreshError::Task {
                server: server.to_owned(),
                reason: e.to_string(),
            })
        })
        .map(|()| state.catalogs.library())
}

/// Lists a server that has no catalog, once: whoever comes second waits for the first
/// listing and then finds the catalog. Failures are remembered for search results.
pub(in crate::server) async fn list(state: &Arc<State>, server: &str) -> Result<(), RefreshError> {
    let lock = state.catalogs.listing_lock(server);
    let _one = lock.lock().await;
    if state.catalogs.library().catalogs.contains_key(server) {
        return Ok(());
    }
    tracing::info!(server, "listing tools (no catalog yet)");
    let listed = refresh(state, server, false).await;
    if let Err(e) = &listed
        && state.settings().server(server).is_some()
    {
        let login = matches!(e, RefreshError::Upstream(UpstreamError::NeedsLogin { .. }));
        Failure::record(&state.settings().catalog_dir, server, &e.to_string(), login);
    }
    state
        .catalogs
        .set_unavailable(server, listed.as_ref().err().map(ToString::to_string));
    listed
}
