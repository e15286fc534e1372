//! What `meta-server tools review` and the console's Review view list: every item of a catalog
//! that waits for approval or whose text is flagged, with its approved and current versions, and
//! how `tools approve` (and the console) name an item.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::{Approvals, Kind, Pending, TrustError, pending};
use crate::catalog::{Catalog, screen};
use crate::config::TrustMode;

/// One item of a review.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Reviewed {
    /// What `tools approve` takes.
    pub name: String,
    pub server: String,
    /// "tool", "prompt", "resource", "resource template" or "instructions".
    pub kind: &'static str,
    /// Why it waits for approval; absent when it is approved and only flagged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantined: Option<String>,
    /// When the version it differs from was approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<String>,
    /// The approved version, if any.
    pub approved: Option<Value>,
    /// The version in the catalog now.
    pub current: Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// The items of `catalog` that wait for approval under `mode` and `approvals`, or whose texts
/// are flagged, in catalog order by kind.
pub fn review(
    mode: TrustMode,
    approvals: Result<Option<Approvals>, TrustError>,
    catalog: &Catalog,
) -> Vec<Reviewed> {
    let server = &catalog.server;
    let mut pending: BTreeMap<(Kind, String), Pending> = pending(mode, approvals, catalog)
        .into_iter()
        .map(|p| ((p.kind, p.key.clone()), p))
        .collect();
    let mut listed = Vec::new();
    for (kind, key, current) in items(catalog) {
        let held = pending.remove(&(kind, key.clone()));
        let flags = flags_of(catalog, kind, &key, &current);
        if held.is_none() && flags.is_empty() {
            continue;
        }
        let approved = held.as_ref().and_then(|p| p.approved.clone());
        listed.push(Reviewed {
            name: kind.name(server, &key),
            server: server.clone(),
            kind: kind.noun(),
            quarantined: held.as_ref().map(|p| p.quarantine.why()),
            approved_at: approved.as_ref().map(|(at, _)| at.clone()),
            approved: approved.map(|(_, item)| item),
            current,
            flags,
        });
    }
    listed
}

/// The own key of the item of `kind` in `catalog` that `key` names as clients see it (tools
/// and prompts go by qualified names, which may differ from their own); `None` when there is
/// no such item.
pub fn key_named(catalog: &Catalog, kind: Kind, key: &str) -> Option<String> {
    let wanted = kind.name(&catalog.server, key);
    items(catalog)
        .into_iter()
        .find(|(k, own, _)| *k == kind && kind.name(&catalog.server, own) == wanted)
        .map(|(_, own, _)| own)
}

/// Every item of `catalog` a review looks at: (kind, key, item as received).
fn items(catalog: &Catalog) -> Vec<(Kind, String, Value)> {
    let mut all = Vec::new();
    for kind in Kind::ALL {
        for item in kind.items(catalog).unwrap_or_default() {
            if kind == Kind::Instructions && item.is_null() {
                continue;
            }
            if let Some(key) = kind.key_of(&item) {
                all.push((kind, key, item));
            }
        }
    }
    all
}

/// The flags of item `key` of `kind` in `catalog` (a tool's as search shows them).
fn flags_of(catalog: &Catalog, kind: Kind, key: &str, item: &Value) -> Vec<String> {
    match kind {
        Kind::Tool => catalog
            .tool_defs()
            .into_iter()
            .find(|d| d.name == key)
            .map(|d| d.flags())
            .unwrap_or_default(),
        Kind::Instructions => {
            let text = item.as_str().unwrap_or_default();
            let (kept, hidden) = crate::hidden::strip(text);
            screen::flags("these instructions", hidden, [kept.as_str()])
        }
        _ => {
            let field = match kind {
                Kind::Prompt => "name",
                Kind::Resource => "uri",
                _ => "uriTemplate",
            };
            screen::offer(kind.noun(), field, item)
                .map(|s| s.flags)
                .unwrap_or_default()
        }
    }
}
