//! A server's last failed listing, kept beside the catalogs as `<server>.failed`: later
//! commands then say why it has no catalog instead of asking for an `index` that just failed.
//! A catalog written for the server removes it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::atomic_file::{self, Access};

/// Characters of the reason kept (the house convention for echoed errors).
const MAX_REASON_CHARS: usize = 1000;

/// Why and when listing a server failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// RFC 3339, UTC, seconds.
    pub at: String,
    /// The error, secrets already masked.
    pub reason: String,
    /// The server asked for a login (`meta-server auth login <server>`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_login: bool,
}

impl Failure {
    fn path(dir: &Path, server: &str) -> PathBuf {
        dir.join(format!("{server}.failed"))
    }

    /// Records that listing `server` failed now with `reason` (masked with the process's
    /// redactor), and whether it was for want of a login. Best effort: a record that cannot be
    /// written is a debug log line.
    pub fn record(dir: &Path, server: &str, reason: &str, needs_login: bool) {
        let reason: String = crate::redact::process()
            .apply(reason)
            .chars()
            .take(MAX_REASON_CHARS)
            .collect();
        let failure = Self {
            at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            reason,
            needs_login,
        };
        let text = serde_json::to_string(&failure).expect("a failure serializes");
        if let Err(e) =
            atomic_file::write(&Self::path(dir, server), text.as_bytes(), Access::OwnerOnly)
        {
            tracing::debug!(server, "cannot record the failed listing: {e}");
        }
    }

    /// The last failed listing of `server`, if one is recorded and readable.
    pub fn load(dir: &Path, server: &str) -> Option<Self> {
        let text = std::fs::read_to_string(Self::path(dir, server)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Forgets a failed listing of `server` (its catalog was just written).
    pub(super) fn clear(dir: &Path, server: &str) {
        let _ = std::fs::remove_file(Self::path(dir, server));
    }

    /// [`Self::note`] of each of `servers`, in one line.
    pub fn notes(dir: &Path, servers: &[String]) -> String {
        let notes: Vec<String> = servers.iter().map(|s| Self::note(dir, s)).collect();
        notes.join("; ")
    }

    /// How commands mention a server without a catalog: why its listing failed, or that it
    /// was never listed.
    pub fn note(dir: &Path, server: &str) -> String {
        match Self::load(dir, server) {
            Some(f) => format!("{server} (index failed: {})", f.reason),
            None => format!("{server} (not indexed yet)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_recorded_read_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Failure::note(dir.path(), "a"), "a (not indexed yet)");
        Failure::record(dir.path(), "a", "connection refused token=abcdef123", false);
        let f = Failure::load(dir.path(), "a").unwrap();
        assert!(f.reason.starts_with("connection refused"));
        assert!(!f.reason.contains("abcdef123"), "{}", f.reason);
        assert!(Failure::note(dir.path(), "a").contains("index failed: connection refused"));
        Failure::clear(dir.path(), "a");
        assert_eq!(Failure::load(dir.path(), "a"), None);
    }
}
