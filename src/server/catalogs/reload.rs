//! A changed config applied to the running process as a difference (see
//! [`Settings::reload`]): removed servers leave search, details and calls at once and their
//! processes stop; changed ones are restarted and indexed again; added ones are searchable as
//! soon as their catalog is there (the one `meta-server add` wrote, one another replica
//! published, or one listed now in the background). Live `metaServer` settings change; those
//! only a start applies are named in the log.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::Tool;

use super::names::{self, Listed};
use super::{always, freshness, refresh::refresh};
use crate::catalog::Catalog;
use crate::config::{Change, ConfigError, Settings};
use crate::server::State;
use crate::server::tools::definitions::definitions;
use crate::upstream::CommandLookups;

/// Why a reread config is not applied.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("{0}; the running config stays")]
    Config(#[from] ConfigError),
    #[error(
        "{}: server \"{key}\": {reason}; the running config stays",
        path.display()
    )]
    Entry {
        path: std::path::PathBuf,
        key: String,
        reason: String,
    },
    #[error("{0}; the running config stays")]
    Names(#[from] names::Clash),
    #[error("the search index could not follow the config: {0}; the running config stays")]
    Index(#[from] crate::search::SearchError),
}

/// What a reload did.
pub(in crate::server) struct Reloaded {
    pub change: Change,
    /// The tools of alwaysLoad servers, when the config changed which they are.
    pub always: Option<Vec<Tool>>,
}

/// Applies the config file's new `text`. A config that does not load, or that newly skips
/// an entry (one bad edit of a server would otherwise remove it), is not applied.
pub(in crate::server) async fn apply(
    state: &Arc<State>,
    text: &str,
) -> Result<Reloaded, ReloadError> {
    let old = state.settings();
    let new = old.reread(text)?;
    if let Some(bad) = (new.skipped.iter()).find(|s| !old.skipped.contains(s)) {
        return Err(ReloadError::Entry {
            path: old.source.clone(),
            key: bad.key.clone(),
            reason: bad.reason.clone(),
        });
    }
    let (new, change) = old.reload(new);
    if change.is_empty() {
        return Ok(Reloaded {
            change,
            always: None,
        });
    }
    let mut beside = written_beside(&new, &change);
    check_names(state, &new, &change, &beside)?;
    let always_changed = (change.added.iter())
        .chain(&change.changed)
        .any(|name| new.server(name).is_some_and(|s| s.always_load))
        || (change.removed.iter().chain(&change.changed))
            .any(|name| old.server(name).is_some_and(|s| s.always_load));
    crate::redact::extend_process(new.servers.iter().flat_map(|s| s.secrets()));
    state.set_settings(new, &change.changed)?;
    let settings = state.settings();
    // The library no longer has them: now their processes stop.
    let stopped = state.manager.reconfigure(&settings.servers).await;
    if !stopped.is_empty() {
        tracing::info!(servers = %stopped.join(", "), "stopped upstreams the config changed or removed");
    }
    let mut lookups = CommandLookups::default();
    let mut missing = Vec::new();
    for name in change.added.iter().chain(&change.changed) {
        let Some(server) = settings.server(name) else {
            continue;
        };
        if !state.catalogs.check_launch(server, &mut lookups, true) {
            continue;
        }
        // Its age is not asked: a server that wants its list fetched again (`ttlMs`) is
        // listed again when it connects, as at start-up.
        let fresh = |c: &Catalog| c.describes(server);
        if state
            .catalogs
            .library()
            .catalogs
            .get(name)
            .is_some_and(fresh)
        {
            continue; // Indexed again under its new config already (allow/deny, description).
        }
        match beside.remove(name) {
            Some(catalog) => {
                tracing::info!(server = %name, "catalog found beside the others");
                state.catalogs.replace_catalog(catalog)?;
            }
            None if server.always_load => {} // Listed below, before tools/list is fixed again.
            None => missing.push(name.clone()),
        }
    }
    state.catalogs.embed_in_background();
    state.catalogs.save_index_in_background();
    let (relist, index): (Vec<String>, Vec<String>) =
        (missing.into_iter()).partition(|name| change.changed.contains(name));
    if !index.is_empty() {
        tokio::spawn(freshness::index_missing(state.clone(), index));
    }
    for server in relist {
        let state = state.clone();
        state.catalogs.clone().track(async move {
            tracing::info!(server, "listing again under its new config");
            if let Err(e) = refresh(&state, &server, false).await {
                tracing::warn!(server, "listing under the new config failed: {e}");
            }
            state.manager.disconnect_if_idle(&server).await;
        });
    }
    let always = match always_changed {
        true => Some(always::prepare(state).await),
        false => None,
    };
    Ok(Reloaded { change, always })
}

/// The catalogs in the catalog dir (written by `meta-server add` or `index`) of the servers
/// `change` added or changed, those that describe them as `new` configures them.
fn written_beside(new: &Settings, change: &Change) -> BTreeMap<String, Catalog> {
    (change.added.iter().chain(&change.changed))
        .filter_map(|name| {
            let server = new.server(name)?;
            let catalog = Catalog::load_server(&new.catalog_dir, name)
                .ok()
                .flatten()?;
            catalog.describes(server).then(|| (name.clone(), catalog))
        })
        .collect()
}

/// Checks the own names of servers with `prefix: false` as at start-up, over the names known
/// now: the running library's, less removed servers', with the catalogs written `beside` the
/// others for added and changed servers (those not listed yet are checked when they are).
fn check_names(
    state: &State,
    new: &Settings,
    change: &Change,
    beside: &BTreeMap<String, Catalog>,
) -> Result<(), names::Clash> {
    // Only own names can clash; gathering every tool's names is for nothing without them.
    if names::unprefixed(&new.servers).next().is_none() {
        return Ok(());
    }
    let mut listed = Listed::of(&state.catalogs.library());
    for name in &change.removed {
        listed.without(name);
    }
    for catalog in beside.values() {
        listed.with_catalog(catalog);
    }
    let meta_tools: Vec<&str> = definitions().iter().map(|t| t.name.as_ref()).collect();
    names::check(&new.source, &new.servers, &listed, &meta_tools)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::{RawTool, config_fingerprint};
    use crate::upstream::in_process::TestUpstream;

    fn config(servers: serde_json::Value, meta: serde_json::Value) -> String {
        let mut global = json!({"skillsDirs": [], "catalogDir": "catalogs"});
        global
            .as_object_mut()
            .unwrap()
            .extend(meta.as_object().unwrap().clone());
        json!({"metaServer": global, "mcpServers": servers}).to_string()
    }

    /// A fresh catalog of `server` as `settings` configure it, with `tools`.
    fn catalog(settings: &Settings, server: &str, tools: &[&str]) -> Catalog {
        let tools = (tools.iter())
            .map(|t| RawTool::from(json!({"name": t, "description": format!("does {t}"), "inputSchema": {"type": "object"}})))
            .collect();
        let mut catalog = Catalog::new(server, tools);
        catalog.config_fingerprint = settings.server(server).map(config_fingerprint);
        let none: Arc<[serde_json::Value]> = Arc::from(Vec::new());
        (
            catalog.prompts,
            catalog.resources,
            catalog.resource_templates,
        ) = (Some(none.clone()), Some(none.clone()), Some(none));
        catalog
    }

    #[tokio::test]
    async fn a_changed_config_is_applied_as_a_difference_and_a_broken_one_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let catalogs = dir.path().join("catalogs");
        let before = config(
            json!({"up": {"command": "sh"}, "gone": {"command": "sh"}, "kept": {"command": "sh"}}),
            json!({}),
        );
        let settings = Settings::parse(&path, &before).unwrap();
        catalog(&settings, "up", &["alpha", "beta"])
            .write(&catalogs)
            .unwrap();
        catalog(&settings, "gone", &["gamma"])
            .write(&catalogs)
            .unwrap();
        catalog(&settings, "kept", &["alpha"])
            .write(&catalogs)
            .unwrap();
        let (library, _) = crate::server::load_library(&settings).unwrap();
        let upstream = TestUpstream::new(&["alpha", "beta"]);
        let state = State::with_manager(settings, library, |servers, events| {
            upstream.manager(servers, Some(events))
        });
        state.manager.connect("up").await.unwrap();
        state.manager.connect("kept").await.unwrap();
        let has = |name: &str| state.catalogs.library().get(name).is_some();
        assert!(has("up__beta") && has("gone__gamma"));

        // up now denies beta; gone goes; new comes with the catalog `meta-server add` wrote.
        let after = config(
            json!({"up": {"command": "sh", "denyTools": ["beta"]}, "new": {"command": "sh"},
                   "kept": {"command": "sh"}}),
            json!({"trust": "off", "policy": {"destructive": "deny"}}),
        );
        let new = Settings::parse(&path, &after).unwrap();
        catalog(&new, "new", &["delta"]).write(&catalogs).unwrap();
        let reloaded = apply(&state, &after).await.unwrap();
        assert_eq!(
            reloaded.change,
            Change {
                added: vec!["new".into()],
                removed: vec!["gone".into()],
                changed: vec!["up".into()],
                fixed: vec!["metaServer.trust"],
                settings: true,
            }
        );
        assert!(
            reloaded.always.is_none(),
            "no alwaysLoad server came or went"
        );
        assert!(
            has("up__alpha") && !has("up__beta"),
            "up indexed under its new config"
        );
        assert!(
            !has("gone__gamma"),
            "a removed server leaves search at once"
        );
        assert!(
            has("new__delta"),
            "an added server's catalog is searched at once"
        );
        assert!(
            !state.manager.is_connected("up").await,
            "a changed server is restarted: its connection closed"
        );
        assert!(
            state.manager.is_connected("kept").await && has("kept__alpha"),
            "only it: an unchanged server keeps its connection and its tools"
        );
        assert!(
            state.manager.connect("gone").await.is_err(),
            "nor can it be called"
        );
        let settings = state.settings();
        assert_eq!(
            settings.trust,
            crate::config::TrustMode::FirstUse,
            "trust waits for a start"
        );
        assert_eq!(
            settings.policy.destructive,
            Some(crate::config::Destructive::Deny)
        );

        // Broken edits: nothing changes, and the error names the key.
        for (broken, key) in [
            (
                config(json!({"up": {"url": "ftp://x"}}), json!({})),
                "mcpServers.\"up\".url",
            ),
            (
                config(json!({}), json!({"timeoutSecs": "soon"})),
                "metaServer.timeoutSecs",
            ),
            ("{\"mcpServers\": {".to_owned(), "line 1"),
        ] {
            let err = apply(&state, &broken)
                .await
                .err()
                .expect("refused")
                .to_string();
            assert!(
                err.contains(key) && err.contains("running config stays"),
                "{err}"
            );
            assert!(has("new__delta") && state.settings().server("new").is_some());
        }
        assert!(apply(&state, &after).await.unwrap().change.fixed == ["metaServer.trust"]);
        state.manager.shutdown().await;
    }

    #[tokio::test]
    async fn a_reload_whose_own_names_clash_is_not_applied() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let catalogs = dir.path().join("catalogs");
        let before = config(json!({"up": {"command": "sh"}}), json!({}));
        let settings = Settings::parse(&path, &before).unwrap();
        catalog(&settings, "up", &["read"])
            .write(&catalogs)
            .unwrap();
        let (library, _) = crate::server::load_library(&settings).unwrap();
        let upstream = TestUpstream::new(&["read"]);
        let state = State::with_manager(settings, library, |servers, events| {
            upstream.manager(servers, Some(events))
        });

        // An added server's own name is a meta-tool's; then another's is up's qualified name.
        for (tools, first) in [
            (["call_tool"], "meta-tool call_tool"),
            (["up__read"], "tool \"read\" of server \"up\""),
        ] {
            let after = config(
                json!({"up": {"command": "sh"}, "own": {"command": "sh", "prefix": false}}),
                json!({}),
            );
            let new = Settings::parse(&path, &after).unwrap();
            catalog(&new, "own", &tools).write(&catalogs).unwrap();
            let err = apply(&state, &after)
                .await
                .err()
                .expect("refused")
                .to_string();
            assert!(
                err.contains(first)
                    && err.contains("server \"own\" (prefix: false)")
                    && err.contains("running config stays"),
                "{err}"
            );
            assert!(state.settings().server("own").is_none(), "not applied");
        }

        // Prefixed, the same server comes in.
        let after = config(
            json!({"up": {"command": "sh"}, "own": {"command": "sh"}}),
            json!({}),
        );
        let new = Settings::parse(&path, &after).unwrap();
        catalog(&new, "own", &["up__read"])
            .write(&catalogs)
            .unwrap();
        apply(&state, &after).await.unwrap();
        assert!(state.catalogs.library().get("own__up__read").is_some());
        state.manager.shutdown().await;
    }
}
