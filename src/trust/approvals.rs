//! The approved version of each tool of a server, kept beside its catalog as
//! `<server>.approved` (owner-only, written atomically): its fingerprint, when it was approved
//! and its text as approved, which `tools review` shows beside the new one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::TrustError;
use crate::atomic_file::{self, Access};
use crate::catalog::{Catalog, RawTool, tool_fingerprint};

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
        }
    }

    /// Every tool of `catalog` approved as it is now.
    pub fn of(catalog: &Catalog) -> Self {
        let mut approvals = Self::empty(&catalog.server);
        for tool in &catalog.tools {
            approvals.approve(tool);
        }
        approvals
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
