//! The `policy` blocks (per server and in `metaServer`) and `metaServer.audit`: which
//! annotated tools may be called and how, and where every call is recorded.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::values::{Flag, Positive, Str, kind};

/// Bytes the audit log grows to before it is rotated (`metaServer.audit.maxBytes`).
pub const DEFAULT_AUDIT_MAX_BYTES: u64 = 16 << 20;
/// The least `maxBytes`: 64 of the longest lines (`crate::audit::LINE_BYTES`), so that a few
/// calls cannot rotate a line out of both files.
pub const MIN_AUDIT_MAX_BYTES: u64 = 1 << 20;

/// What a `policy` block says; a key left out is decided by the next block out (a server's
/// block, then `metaServer.policy`, then the defaults: allow everything).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// `destructive`: what a call of a tool that may destroy (by its annotations) gets.
    pub destructive: Option<Destructive>,
    /// `readOnly`: only tools annotated `readOnlyHint` may be called.
    pub read_only: Option<bool>,
}

/// `policy.destructive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destructive {
    /// Called like any tool (the default).
    Allow,
    /// The user is asked first, through an elicitation to the calling client.
    Confirm,
    /// Refused.
    Deny,
}

impl Destructive {
    /// The value as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Confirm => "confirm",
            Self::Deny => "deny",
        }
    }
}

/// A `destructive` value that is none of the three words.
#[derive(Debug, thiserror::Error)]
#[error("must be \"allow\", \"confirm\" or \"deny\", found {0}")]
struct NotDestructive(&'static str);

/// `destructive` as read from the file.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
struct DestructiveValue(Destructive);

impl TryFrom<Value> for DestructiveValue {
    type Error = NotDestructive;
    fn try_from(value: Value) -> Result<Self, NotDestructive> {
        match value.as_str() {
            Some("allow") => Ok(Self(Destructive::Allow)),
            Some("confirm") => Ok(Self(Destructive::Confirm)),
            Some("deny") => Ok(Self(Destructive::Deny)),
            Some(_) => Err(NotDestructive("another string")),
            None => Err(NotDestructive(kind(&value))),
        }
    }
}

/// A `policy` block as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PolicyBlock {
    destructive: Option<DestructiveValue>,
    read_only: Option<Flag>,
}

impl From<PolicyBlock> for Policy {
    fn from(block: PolicyBlock) -> Self {
        Self {
            destructive: block.destructive.map(|d| d.0),
            read_only: block.read_only.map(|f| f.0),
        }
    }
}

/// `metaServer.audit`: one JSON line per tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSettings {
    /// `path`: the log file (relative to the config file's directory).
    pub path: PathBuf,
    /// `arguments`: whether lines carry the calls' argument values (not by default).
    pub arguments: bool,
    /// `maxBytes`: the size past which the file is renamed to `<path>.1` and begun anew.
    pub max_bytes: u64,
}

/// `metaServer.audit` as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AuditBlock {
    path: Option<Str>,
    arguments: Option<Flag>,
    max_bytes: Option<Positive>,
}

impl AuditBlock {
    /// The settings, `path` resolved against `base`; without a `path`, what to write.
    pub(super) fn settings(self, base: &Path) -> Result<AuditSettings, &'static str> {
        let path = self
            .path
            .filter(|p| !p.0.trim().is_empty())
            .ok_or("needs \"path\": the file that gets one JSON line per tool call")?;
        let max_bytes = self.max_bytes.map_or(DEFAULT_AUDIT_MAX_BYTES, |n| n.0);
        if max_bytes < MIN_AUDIT_MAX_BYTES {
            return Err(
                "maxBytes must be at least 1048576 (1 MiB), so that a few of the longest lines (16 KiB) cannot rotate a line out of both the file and <path>.1",
            );
        }
        Ok(AuditSettings {
            path: base.join(path.0),
            arguments: self.arguments.is_some_and(|f| f.0),
            max_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    fn parse(text: &str) -> Result<Settings, String> {
        Settings::parse(Path::new("/cfg/config.json"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_audit_block() {
        assert_eq!(parse(r#"{"mcpServers": {}}"#).unwrap().audit, None);
        let s =
            parse(r#"{"metaServer": {"audit": {"path": "logs/audit.jsonl"}}, "mcpServers": {}}"#)
                .unwrap();
        assert_eq!(
            s.audit,
            Some(AuditSettings {
                path: PathBuf::from("/cfg/logs/audit.jsonl"),
                arguments: false,
                max_bytes: DEFAULT_AUDIT_MAX_BYTES,
            })
        );
        let s = parse(
            r#"{"metaServer": {"audit": {"path": "/var/a", "arguments": true, "maxBytes": 1048576}}, "mcpServers": {}}"#,
        )
        .unwrap();
        let audit = s.audit.unwrap();
        assert!(audit.arguments && audit.max_bytes == 1 << 20 && audit.path == Path::new("/var/a"));
        let e = parse(
            r#"{"metaServer": {"audit": {"path": "a", "maxBytes": 1000}}, "mcpServers": {}}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("metaServer.audit") && e.contains("maxBytes must be at least 1048576"),
            "{e}"
        );
        let e = parse(r#"{"metaServer": {"audit": {}}, "mcpServers": {}}"#).unwrap_err();
        assert!(e.contains("metaServer.audit: needs \"path\""), "{e}");
        let e =
            parse(r#"{"metaServer": {"audit": {"path": "a", "maxbytes": 1}}, "mcpServers": {}}"#)
                .unwrap_err();
        assert!(
            e.contains("metaServer.audit.maxbytes") && e.contains("maxBytes"),
            "{e}"
        );
    }
}
