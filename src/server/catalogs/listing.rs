//! One listing of a server and what follows it: the catalog logged, written and swapped into
//! the library.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::error::RefreshError;
use crate::catalog::{self, Catalog, tools_hash};
use crate::server::State;

/// A fresh catalog of `server` from its upstream.
pub(super) async fn fetch(state: &Arc<State>, server: &str) -> Result<Catalog, RefreshError> {
    let settings = state.settings();
    let config = settings.server(server).ok_or(RefreshError::NotConfigured)?;
    let fresh = catalog::fetch(&state.manager, config).await?;
    state.catalogs.count_catalog(server, true);
    state.catalogs.clear_dirty(server);
    Ok(fresh)
}

/// Logs what changed, persists the catalog and swaps the library.
pub(super) async fn install(state: &Arc<State>, fresh: Catalog) -> Result<(), RefreshError> {
    let server = fresh.server.clone();
    if state.settings().server(&server).is_none() {
        // Listed just before a config change removed the server: nothing of it is kept.
        return Ok(());
    }
    let library = state.catalogs.library();
    match library.catalogs.get(&server) {
        Some(old) if old.tools_hash == fresh.tools_hash => {
            tracing::debug!(server, "tool list unchanged");
        }
        old => log_changes(&server, old, &fresh),
    }
    observe(&state.settings(), state.shared.as_ref(), &fresh).await;
    if let Err(e) = fresh.write(&state.settings().catalog_dir) {
        tracing::warn!(server, "{e}");
    }
    state.catalogs.replace_catalog(fresh)?;
    // A changed tool loses what it learned: the evidence is checked against the catalog.
    if let Some(learner) = &state.learning {
        learner.recheck();
    }
    state.catalogs.embed_in_background();
    state.catalogs.save_index_in_background();
    Ok(())
}

/// Records `fresh` with pinning (before it is written; approvals shared through `store` if
/// given) and logs its new quarantines in one line.
pub(super) async fn observe(
    settings: &crate::config::Settings,
    store: Option<&crate::store::Valkey>,
    fresh: &Catalog,
) {
    let (mode, dir) = (settings.trust, &settings.catalog_dir);
    match crate::trust::shared::observe(mode, dir, store, fresh).await {
        Ok(held) if !held.is_empty() => tracing::warn!("{}", crate::trust::notice(&held)),
        Ok(_) => {}
        Err(e) => tracing::warn!(server = %fresh.server, "{e}"),
    }
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
