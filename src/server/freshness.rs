//! Keeping catalogs fresh while serving: servers without a catalog are indexed in the
//! background; a stale catalog (launch config changed) is re-listed when its server connects;
//! `tools/list_changed` re-lists the server after a quiet period. Each refresh persists the
//! catalog, swaps in a new library and saves its search index (with a shared store, through `shared.rs`: one replica
//! lists, the others take its catalog). The meta-tools themselves never change.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;
use tokio::time::Instant;

use super::{State, first_run};
use crate::catalog::{self, Catalog, tools_hash};
use crate::upstream::Event;

/// Quiet time after the last `list_changed` before re-listing (servers send bursts).
const DEBOUNCE: Duration = Duration::from_millis(300);

/// Indexes `servers` (no catalog yet) with bounded concurrency, then disconnects them.
/// Each listing is a tracked task, so it finishes even when the client leaves meanwhile.
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
            let task = state.tasks.clone().spawn(async move {
                tracing::info!(server, "indexing in the background");
                if let Err(e) = first_run::list(&state, &server).await {
                    tracing::warn!(server, "background indexing failed: {e}");
                }
                state.manager.disconnect_if_idle(&server).await;
                state
                    .indexing
                    .lock()
                    .expect("indexing lock")
                    .remove(&server);
            });
            async move {
                let _ = task.await;
            }
        })
        .await;
}

/// Reacts to upstream events until the manager is gone.
pub(super) async fn watch(state: Arc<State>) {
    let Some(mut events) = state.events.lock().expect("events lock").take() else {
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
                    let indexing = state.indexing.lock().expect("indexing lock").contains(&server);
                    if !indexing && state.is_stale(&server) {
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
                        state.dirty.lock().expect("dirty lock").insert(server);
                    }
                }
            }
        }
    }
}

/// Lists `server`'s tools and installs the catalog; with a shared store, only if no other
/// replica is listing it or has listed it: `changed` (its tool list changed) rules out
/// catalogs listed before now.
pub(super) async fn refresh(state: &Arc<State>, server: &str, changed: bool) -> Result<(), String> {
    match &state.shared {
        Some(store) => super::shared::refresh(state, store, server, changed).await,
        None => install(state, fetch(state, server).await?),
    }
}

/// A fresh catalog of `server` from its upstream.
pub(super) async fn fetch(state: &Arc<State>, server: &str) -> Result<Catalog, String> {
    let config = state.settings.server(server).ok_or("not configured")?;
    let fresh = catalog::fetch(&state.manager, config)
        .await
        .map_err(|e| e.to_string())?;
    state.count_catalog(server, true);
    state.dirty.lock().expect("dirty lock").remove(server);
    Ok(fresh)
}

/// Logs what changed, persists the catalog and swaps the library.
pub(super) fn install(state: &Arc<State>, fresh: Catalog) -> Result<(), String> {
    let server = fresh.server.clone();
    let library = state.library();
    match library.catalogs.get(&server) {
        Some(old) if old.tools_hash == fresh.tools_hash => {
            tracing::debug!(server, "tool list unchanged");
        }
        old => log_changes(&server, old, &fresh),
    }
    if let Err(e) = fresh.write(&state.settings.catalog_dir) {
        tracing::warn!(server, "{e}");
    }
    state.replace_catalog(fresh).map_err(|e| e.to_string())?;
    state.embed_in_background();
    state.save_index_in_background();
    Ok(())
}

fn log_changes(server: &str, old: Option<&Catalog>, fresh: &Catalog) {
    let by_name = |c: &Catalog| -> BTreeMap<String, String> {
        c.tools
            .iter()
            .map(|t| {
                let name = t
                    .value()
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                (name, tools_hash(std::slice::from_ref(t)))
            })
            .collect()
    };
    let before = old.map(by_name).unwrap_or_default();
    let after = by_name(fresh);
    let names = |set: BTreeSet<&String>| set.into_iter().cloned().collect::<Vec<_>>().join(", ");
    let added = names(after.keys().filter(|k| !before.contains_key(*k)).collect());
    let removed = names(before.keys().filter(|k| !after.contains_key(*k)).collect());
    let changed = names(
        after
            .iter()
            .filter(|(k, h)| before.get(*k).is_some_and(|b| b != *h))
            .map(|(k, _)| k)
            .collect(),
    );
    tracing::info!(server, tools = after.len(), %added, %removed, %changed, "tool list changed");
}
