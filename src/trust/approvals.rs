//! The approved version of each tool, prompt, resource and resource template of a server, and
//! of its instructions, kept beside its catalog as `<server>.approved` (owner-only, written
//! atomically): its fingerprint, when it was approved and its text as approved, which `tools
//! review` shows beside the new one.
//!
//! Format 1 throughout: prompts, resources, templates and instructions were added as optional
//! keys (a file without them is one made before they were pinned), and tool fingerprints of
//! version 2 (`2:`, the whole tool) beside version 1 (see [`Approved::holds_for`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use serde_json::Value;

use super::TrustError;
use super::kinds::Kind;
use crate::atomic_file::{self, Access};
use crate::catalog::{Catalog, RawTool, is_fingerprint_v1, tool_fingerprint, tool_fingerprint_v1};

/// The approvals format this build writes and reads.
const FORMAT: u64 = 1;

/// One server's approved tools, by tool name as the server wrote it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approvals {
    pub format: u64,
    pub server: String,
    /// When the server was first approved (RFC 3339, UTC).
    pub approved_at: String,
    pub tools: BTreeMap<String, Approved>,
    /// Approved prompts by name; `None` in a file made before prompts were pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<BTreeMap<String, Pinned>>,
    /// Approved resources by URI; `None` as for `prompts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, Pinned>>,
    /// Approved resource templates by `uriTemplate`; `None` as for `prompts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_templates: Option<BTreeMap<String, Pinned>>,
    /// The approved instructions (an item of null: the server gave none); `None` as for
    /// `prompts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<Pinned>,
}

/// One approved tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approved {
    /// [`tool_fingerprint`] of `tool`.
    pub fingerprint: String,
    pub approved_at: String,
    /// The tool object as approved.
    pub tool: RawTool,
}

impl Approved {
    /// Whether the approval holds for `tool`, whose fingerprint is `fingerprint`. A version-1
    /// approval (made before fingerprints covered `_meta`, `icons`, `execution` and the rest)
    /// holds when its pinned fields match and the rest is what was approved with it, so an
    /// upgrade holds only tools whose newly pinned fields changed since.
    pub fn holds_for(&self, tool: &RawTool, fingerprint: &str) -> bool {
        self.fingerprint == fingerprint
            || (is_fingerprint_v1(&self.fingerprint)
                && self.fingerprint == tool_fingerprint_v1(tool)
                && tool_fingerprint(&self.tool) == fingerprint)
    }
}

/// One approved prompt, resource, resource template, or instructions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pinned {
    /// [`Kind::fingerprint`] of `item`.
    pub fingerprint: String,
    pub approved_at: String,
    /// The object (for instructions, the text or null) as approved.
    pub item: Value,
}

/// The current time as approvals record it.
pub(super) fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// The name of a tool object; `None` when it has no string name.
pub(super) fn name_of(tool: &RawTool) -> Option<String> {
    tool.value().get("name")?.as_str().map(str::to_owned)
}

impl Approvals {
    /// The file holding `server`'s approvals in the catalog dir `dir`.
    pub fn path(dir: &Path, server: &str) -> PathBuf {
        dir.join(format!("{server}.approved"))
    }

    /// No tool of `server` approved yet.
    pub fn empty(server: &str) -> Self {
        Self {
            format: FORMAT,
            server: server.to_owned(),
            approved_at: now(),
            tools: BTreeMap::new(),
            prompts: Some(BTreeMap::new()),
            resources: Some(BTreeMap::new()),
            resource_templates: Some(BTreeMap::new()),
            instructions: None,
        }
    }

    /// Everything `catalog` holds approved as it is now (kinds it does not know stay unpinned).
    pub fn of(catalog: &Catalog) -> Self {
        let mut approvals = Self::empty(&catalog.server);
        for tool in &catalog.tools {
            approvals.approve(tool);
        }
        for kind in Kind::OFFERS {
            *approvals.offers_mut(kind) = None;
        }
        approvals.adopt(&[catalog]);
        approvals
    }

    /// Pins each kind this file has no approvals of (it was made before that kind was pinned)
    /// as the first of `catalogs` that knows it holds it now; true if any was.
    pub fn adopt(&mut self, catalogs: &[&Catalog]) -> bool {
        let mut adopted = false;
        for kind in Kind::OFFERS {
            if self.offers(kind).is_some() {
                continue;
            }
            let Some(items) = catalogs.iter().find_map(|c| kind.items(c)) else {
                continue;
            };
            let pinned = self.offers_mut(kind).insert(BTreeMap::new());
            for item in items {
                if let Some(key) = kind.key_of(&item) {
                    pinned.entry(key).or_insert_with(|| pin(kind, item));
                }
            }
            adopted = true;
        }
        if self.instructions.is_none()
            && let Some(catalog) = catalogs.first()
        {
            self.instructions = Some(pin(Kind::Instructions, super::kinds::instructions(catalog)));
            adopted = true;
        }
        adopted
    }

    /// The approved items of `kind`, one of [`Kind::OFFERS`]; `None` when not pinned yet.
    pub fn offers(&self, kind: Kind) -> Option<&BTreeMap<String, Pinned>> {
        match kind {
            Kind::Prompt => self.prompts.as_ref(),
            Kind::Resource => self.resources.as_ref(),
            Kind::ResourceTemplate => self.resource_templates.as_ref(),
            Kind::Tool | Kind::Instructions => None,
        }
    }

    fn offers_mut(&mut self, kind: Kind) -> &mut Option<BTreeMap<String, Pinned>> {
        match kind {
            Kind::Prompt => &mut self.prompts,
            Kind::Resource => &mut self.resources,
            Kind::ResourceTemplate => &mut self.resource_templates,
            Kind::Tool | Kind::Instructions => unreachable!("tools and instructions are no list"),
        }
    }

    /// The approved version of item `key` of `kind`, if any: when and what.
    pub fn approved(&self, kind: Kind, key: &str) -> Option<(&str, Value)> {
        match kind {
            Kind::Tool => self
                .tools
                .get(key)
                .map(|a| (a.approved_at.as_str(), a.tool.value())),
            Kind::Instructions => self
                .instructions
                .as_ref()
                .map(|p| (p.approved_at.as_str(), p.item.clone())),
            _ => self
                .offers(kind)?
                .get(key)
                .map(|p| (p.approved_at.as_str(), p.item.clone())),
        }
    }

    /// Approves `item` of `kind` (not a tool: see [`Self::approve`]) as it is now.
    pub fn approve_item(&mut self, kind: Kind, item: Value) {
        if kind == Kind::Instructions {
            self.instructions = Some(pin(kind, item));
        } else if let Some(key) = kind.key_of(&item) {
            self.offers_mut(kind)
                .get_or_insert_default()
                .insert(key, pin(kind, item));
        }
    }

    /// `server`'s approvals; `Ok(None)` when none were recorded.
    pub fn load(dir: &Path, server: &str) -> Result<Option<Self>, TrustError> {
        let path = Self::path(dir, server);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(TrustError::Read { path, source }),
        };
        Self::parse(&path, server, &text).map(Some)
    }

    /// `server`'s approvals in `text`, read from `origin` (a path, or where else they came from).
    pub fn parse(origin: &Path, server: &str, text: &str) -> Result<Self, TrustError> {
        let approvals: Self = serde_json::from_str(text).map_err(|e| TrustError::Invalid {
            path: origin.to_owned(),
            message: e.to_string(),
        })?;
        if approvals.format != FORMAT || approvals.server != server {
            return Err(TrustError::Invalid {
                path: origin.to_owned(),
                message: format!(
                    "it holds format {} approvals of server \"{}\"",
                    approvals.format, approvals.server
                ),
            });
        }
        Ok(approvals)
    }

    /// The approvals as their file holds them.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("approvals serialize");
        text.push('\n');
        text
    }

    /// Writes the approvals into `dir`, owner-only and atomically.
    pub fn write(&self, dir: &Path) -> Result<(), TrustError> {
        Self::write_text(dir, &self.server, &self.to_json())
    }

    /// Writes `text` as `server`'s approvals file in `dir`, owner-only and atomically.
    pub(super) fn write_text(dir: &Path, server: &str, text: &str) -> Result<(), TrustError> {
        let path = Self::path(dir, server);
        atomic_file::write(&path, text.as_bytes(), Access::OwnerOnly)
            .map_err(|source| TrustError::Write { path, source })
    }

    /// Approves `tool` as it is now; returns its name, `None` for a tool without one.
    pub fn approve(&mut self, tool: &RawTool) -> Option<String> {
        let name = name_of(tool)?;
        self.tools.insert(
            name.clone(),
            Approved {
                fingerprint: tool_fingerprint(tool),
                approved_at: now(),
                tool: tool.clone(),
            },
        );
        Some(name)
    }
}

/// `item` of `kind` approved now.
fn pin(kind: Kind, item: Value) -> Pinned {
    Pinned {
        fingerprint: kind.fingerprint(&item),
        approved_at: now(),
        item,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn approvals_round_trip_owner_only_and_refuse_another_servers_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Approvals::load(dir.path(), "s").unwrap(), None);
        let mut approvals = Approvals::empty("s");
        let tool = RawTool::from(json!({"name": "t", "description": "d"}));
        assert_eq!(approvals.approve(&tool).as_deref(), Some("t"));
        approvals.write(dir.path()).unwrap();
        let loaded = Approvals::load(dir.path(), "s").unwrap().unwrap();
        assert_eq!(loaded, approvals);
        assert_eq!(loaded.tools["t"].fingerprint, tool_fingerprint(&tool));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let path = Approvals::path(dir.path(), "s");
            let mode = std::fs::metadata(path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "mode {mode:o}");
        }
        std::fs::copy(
            Approvals::path(dir.path(), "s"),
            Approvals::path(dir.path(), "other"),
        )
        .unwrap();
        let err = Approvals::load(dir.path(), "other").unwrap_err();
        assert!(err.to_string().contains("tools approve"), "{err}");
    }
}
