//! Keeping catalogs fresh while serving: servers without a catalog are indexed in the
//! background; a stale catalog (launch config changed) is re-listed when its server connects;
//! `tools/list_changed` re-lists the server after a quiet period. Each refresh persists the
//! catalog, swaps in a new library and saves its search index (with a shared store, through `shared`: one replica
//! lists, the others take its catalog). The meta-tools themselves never change.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;

use super::first_run;
use super::refresh::refresh;
use crate::server::State;
use crate::upstream::Event;

/// Quiet time after the last `list_changed` before re-listing (servers send bursts).
const DEBOUNCE: Duration = Duration::from_millis(300);

/// Indexes `servers` (no catalog yet) with bounded concurrency, then disconnects them.
/// Each listing is a tracked task, so it finishes even when the client leaves meanwhile.
pub(in crate::server) async fn index_missing(state: Arc<State>, servers: Vec<String>) {
    state.catalogs.start_indexing(servers.iter().cloned());
    let concurrency = state.settings().index_concurrency;
    futures::stream::iter(servers)
        .for_each_concurrent(concurrency, |server| {
            let state = state.clone();
            let task = state.catalogs.clone().track(async move {
                tracing::info!(server, "indexing in the background");
                if let Err(e) = first_run::list(&state, &server).await {
                    tracing::warn!(server, "background indexing failed: {e}");
                }
                state.manager.disconnect_if_idle(&server).await;
                state.catalogs.end_indexing(&server);
            });
            async move {
                let _ = task.await;
            }
        })
        .await;
}

/// Lists `server` again in the background, as for a changed list: what it answered does not
/// match its catalog.
pub(in crate::server) fn relist(state: &Arc<State>, server: &str) {
    let (state, server) = (state.clone(), server.to_owned());
    tokio::spawn(async move {
        if let Err(e) = refresh(&state, &server, true).await {
            tracing::warn!(server, "re-listing failed: {e}");
        }
    });
}

/// Reacts to upstream events until the manager is gone.
pub(in crate::server) async fn watch(state: Arc<State>) {
    let Some(mut events) = state.catalogs.take_events() else {
        return;
    };
    let mut due: BTreeMap<String, Instant> = BTreeMap::new();
    // Servers due because their tool list changed (not only because their catalog is stale).
    let mut changed: BTreeSet<String> = BTreeSet::new();
    loop {
        let next = due.values().min().copied();
        tokio::select! {
            event = events.recv() => match event {
                None => return,
                Some(Event::Connected(server)) => {
                    let indexing = state.catalogs.is_indexing(&server);
                    if !indexing && state.catalogs.is_stale(&server) {
                        due.insert(server, Instant::now());
                    }
                }
                Some(Event::ToolListChanged(server)) => {
                    changed.insert(server.clone());
                    due.insert(server, Instant::now() + DEBOUNCE);
                }
            },
            () = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let now = Instant::now();
                let ready: Vec<String> = due.iter().filter(|(_, t)| **t <= now).map(|(s, _)| s.clone()).collect();
                for server in ready {
                    due.remove(&server);
                    let was_changed = changed.remove(&server);
                    if state.manager.is_connected(&server).await {
                        if let Err(e) = refresh(&state, &server, was_changed).await {
                            tracing::warn!(server, "re-listing tools failed: {e}");
                        }
                    } else {
                        // Re-listed on its next connection instead of starting it now.
                        state.catalogs.mark_dirty(server);
                    }
                }
            }
        }
    }
}
