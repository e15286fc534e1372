//! Catalogs shared with other replicas through the store. At start-up the shared catalogs of
//! the configured servers are written into the catalog dir, so the library loads them. A
//! server is listed by one replica at a time: it takes the server's lease, lists, publishes;
//! the others wait for the lease to go and take the published catalog. Every replica follows
//! what the others publish. With the store unreachable, each replica lists for itself.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::error::RefreshError;
use super::listing;
use crate::catalog::{Catalog, config_fingerprint};
use crate::config::{ServerConfig, Settings};
use crate::server::State;
use crate::store::{SharedCatalog, Valkey};

/// How long one listing may hold a server's lease (a replica that dies holding it delays the
/// others by at most this).
const LEASE: Duration = Duration::from_secs(60);
/// How often a replica waiting for another's listing looks again.
const WAIT_STEP: Duration = Duration::from_millis(100);
/// How often each replica looks for catalogs the others published.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);
/// Takes of a lease tried before listing without one.
const ROUNDS: usize = 3;

/// The catalog in `shared` if it is one for `config` and still fresh.
fn usable(shared: &SharedCatalog, config: &ServerConfig) -> Option<Catalog> {
    let catalog = Catalog::parse(Path::new("<shared store>"), &shared.json)
        .inspect_err(|e| tracing::warn!(server = %config.name, "a shared catalog is unusable: {e}"))
        .ok()?;
    (catalog.server == config.name && !catalog.is_stale(config, std::time::SystemTime::now()))
        .then_some(catalog)
}

/// Writes every configured server's shared catalog that the catalog dir lacks or holds in
/// another version; returns the versions taken, by `<server>:<fingerprint>`.
pub(in crate::server) async fn pull(
    settings: &Settings,
    store: &Valkey,
) -> Vec<(String, String, String)> {
    let lookups = settings.servers.iter().map(|config| async move {
        let fingerprint = config_fingerprint(config);
        let shared = store.catalog(&config.name, &fingerprint).await;
        (config, fingerprint, shared)
    });
    let mut taken = Vec::new();
    for (config, fingerprint, shared) in futures::future::join_all(lookups).await {
        let shared = match shared {
            Ok(Some(shared)) => shared,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!("catalogs are not shared until the store answers: {e}");
                break;
            }
        };
        let Some(catalog) = usable(&shared, config) else {
            continue;
        };
        let local = Catalog::load_server(&settings.catalog_dir, &config.name)
            .ok()
            .flatten();
        if local.is_none_or(|l| {
            !l.lists_same(&catalog) || l.is_stale(config, std::time::SystemTime::now())
        }) {
            listing::observe(settings, Some(store), &catalog).await;
            if let Err(e) = catalog.write(&settings.catalog_dir) {
                tracing::warn!(server = %config.name, "{e}");
                continue;
            }
            tracing::info!(server = %config.name, "catalog taken from the shared store");
        }
        taken.push((
            config.name.clone(),
            Valkey::catalog_field(&config.name, &fingerprint),
            shared.version,
        ));
    }
    taken
}

/// Records the shared versions [`pull`] took, and counts them as taken from the store.
pub(in crate::server) fn record_pulled(state: &State, taken: Vec<(String, String, String)>) {
    for (server, field, version) in taken {
        state.catalogs.count_catalog(&server, false);
        state.catalogs.record_shared_version(field, version);
    }
}

/// A fresh catalog of `server`: listed through its lease, or the one another replica listed;
/// `changed` rules out catalogs published before this call.
pub(super) async fn refresh(
    state: &Arc<State>,
    store: &Valkey,
    server: &str,
    changed: bool,
) -> Result<Catalog, RefreshError> {
    let settings = state.settings();
    let config = settings.server(server).ok_or(RefreshError::NotConfigured)?;
    let fingerprint = config_fingerprint(config);
    let field = Valkey::catalog_field(server, &fingerprint);
    let mut seen = match store.catalog(server, &fingerprint).await {
        Ok(shared) => shared,
        Err(e) => {
            tracing::warn!(server, "listing without the shared store: {e}");
            return listing::fetch(state, server).await;
        }
    };
    if !changed
        && let Some(shared) = &seen
        && let Some(catalog) = usable(shared, config)
    {
        return Ok(take(state, &field, shared.version.clone(), catalog));
    }
    for _ in 0..ROUNDS {
        match store.lease(&field, LEASE).await {
            Ok(Some(lease)) => {
                let listed = listing::fetch(state, server).await;
                let published = match &listed {
                    Ok(catalog) => publish(store, &fingerprint, catalog).await,
                    Err(_) => None,
                };
                lease.release().await;
                let catalog = listed?;
                if let Some(version) = published {
                    state.catalogs.record_shared_version(field, version);
                }
                return Ok(catalog);
            }
            Ok(None) => {
                tracing::info!(
                    server,
                    "another replica is listing it; waiting for its catalog"
                );
                wait_for_lease(store, &field).await;
                match store.catalog(server, &fingerprint).await {
                    Ok(Some(shared))
                        if Some(&shared.version) != seen.as_ref().map(|s| &s.version) =>
                    {
                        if let Some(catalog) = usable(&shared, config) {
                            return Ok(take(state, &field, shared.version, catalog));
                        }
                        seen = Some(shared);
                    }
                    // Its listing failed, or it died: try to take the lease.
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            Err(_) => break,
        }
    }
    listing::fetch(state, server).await
}

/// Waits (at most one lease time) until nobody holds the lease on `field`.
async fn wait_for_lease(store: &Valkey, field: &str) {
    let deadline = tokio::time::Instant::now() + LEASE;
    while tokio::time::Instant::now() < deadline {
        match store.is_leased(field).await {
            Ok(true) => tokio::time::sleep(WAIT_STEP).await,
            _ => return,
        }
    }
}

/// Publishes `catalog` for the other replicas; `None` if the store did not take it.
async fn publish(store: &Valkey, fingerprint: &str, catalog: &Catalog) -> Option<String> {
    let json = serde_json::to_string(catalog).ok()?;
    store
        .publish_catalog(&catalog.server, fingerprint, json)
        .await
        .inspect_err(|e| tracing::warn!(server = %catalog.server, "catalog not shared: {e}"))
        .ok()
}

/// A catalog from the store, its version recorded.
fn take(state: &State, field: &str, version: String, catalog: Catalog) -> Catalog {
    let server = catalog.server.clone();
    tracing::info!(server, "catalog taken from the shared store");
    state.catalogs.count_catalog(&server, false);
    state
        .catalogs
        .record_shared_version(field.to_owned(), version);
    catalog
}

/// Installs the catalogs other replicas publish, as they publish them, until the process ends.
pub(in crate::server) async fn follow(state: Arc<State>, store: Valkey) {
    let mut every = tokio::time::interval(FOLLOW_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        every.tick().await;
        let Ok(versions) = store.catalog_versions().await else {
            continue;
        };
        for config in &state.settings().servers {
            let fingerprint = config_fingerprint(config);
            let field = Valkey::catalog_field(&config.name, &fingerprint);
            let Some(version) = versions.get(&field) else {
                continue;
            };
            let known = state.catalogs.shared_version(&field);
            if known.as_ref() == Some(version) {
                continue;
            }
            if let Ok(Some(shared)) = store.catalog(&config.name, &fingerprint).await
                && let Some(catalog) = usable(&shared, config)
                && let Err(e) =
                    listing::install(&state, take(&state, &field, shared.version, catalog)).await
            {
                tracing::warn!(server = %config.name, "shared catalog not installed: {e}");
            }
        }
    }
}
