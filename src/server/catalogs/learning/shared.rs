//! What search learned, shared by replicas through the store (`metaServer.store`): this
//! process's selections are merged into each tool's evidence there (written only over the
//! version read, so no replica drops another's), and what the others wrote is followed into
//! this process's copy, which the store's replaces (a forget there is a forget here).

use std::collections::{BTreeMap, HashMap};

use crate::learning::{Evidence, Teaching};
use crate::store::{StoreError, Valkey};

/// Writes tried per tool before giving up when other writers keep coming first.
const ROUNDS: usize = 5;

/// What this process last took from the store.
#[derive(Default)]
pub(super) struct Mirror {
    generation: Option<u64>,
    versions: HashMap<String, String>,
}

impl Mirror {
    /// Whether this process has taken the store's evidence at least once.
    pub(super) fn has_followed(&self) -> bool {
        self.generation.is_some()
    }
}

/// Merges `pending` into the store's evidence, tool by tool (bounded as [`Evidence::bound`]
/// at `now` bounds one tool); returns what could not be written.
pub(super) async fn publish(store: &Valkey, pending: Vec<Teaching>, now: u64) -> Vec<Teaching> {
    let mut by_tool: BTreeMap<String, Vec<Teaching>> = BTreeMap::new();
    for teaching in pending {
        by_tool
            .entry(teaching.tool.clone())
            .or_default()
            .push(teaching);
    }
    let mut failed = Vec::new();
    for (tool, teachings) in by_tool {
        match publish_tool(store, &tool, &teachings, now).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(
                    tool,
                    "learned evidence not shared: other replicas kept writing it"
                );
                failed.extend(teachings);
            }
            Err(e) => {
                tracing::warn!(tool, "learned evidence not shared yet: {e}");
                failed.extend(teachings);
            }
        }
    }
    failed
}

async fn publish_tool(
    store: &Valkey,
    tool: &str,
    teachings: &[Teaching],
    now: u64,
) -> Result<bool, StoreError> {
    for _ in 0..ROUNDS {
        let current = store.learned_tool(tool).await?;
        let expected = current.as_ref().map(|c| c.version.clone());
        let mut evidence = Evidence::default();
        if let Some(current) = current {
            evidence.tools.insert(tool.to_owned(), current.evidence);
        }
        for teaching in teachings {
            evidence.teach(teaching.clone());
        }
        evidence.bound(now);
        let written = store
            .replace_learned_tool(tool, expected.as_deref(), evidence.tools.get(tool))
            .await?;
        if written.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Brings `evidence` (this process's copy) in line with the store's if the store changed
/// since `mirror` says: the first time whole, then the tools whose version changed.
pub(super) async fn follow(
    store: &Valkey,
    evidence: &mut Evidence,
    mirror: &mut Mirror,
) -> Result<(), StoreError> {
    let generation = store.learned_generation().await?;
    if mirror.generation == Some(generation) {
        return Ok(());
    }
    let versions = store.learned_versions().await?;
    if mirror.has_followed() {
        for (tool, version) in &versions {
            if mirror.versions.get(tool) == Some(version) {
                continue;
            }
            match store.learned_tool(tool).await? {
                Some(shared) => {
                    evidence.tools.insert(tool.clone(), shared.evidence);
                }
                None => {
                    evidence.tools.remove(tool);
                }
            }
        }
        evidence.tools.retain(|tool, _| versions.contains_key(tool));
    } else {
        *evidence = store.learned().await?;
    }
    mirror.versions = versions;
    mirror.generation = Some(generation);
    Ok(())
}
