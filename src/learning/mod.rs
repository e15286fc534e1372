//! Search that learns from use: a search followed in the same session by a successful call of
//! a tool it showed is evidence that the query meant that tool (docs/learning.md).
//!
//! `evidence.rs` keeps that evidence, bounded (per tool, per principal, in all) and tied to
//! each tool's fingerprint; `sessions.rs` attributes a call to the search that showed its tool;
//! `file.rs` reads and writes it beside the catalogs; `snapshot.rs` is what the search index
//! is given of it ([`Learned`]). Knows nothing of MCP: the server feeds it, `eval` replays
//! query sets through it.

mod evidence;
mod file;
mod sessions;
mod snapshot;

pub use evidence::{
    Contribution, Evidence, MAX_AGE, MAX_PER_TOOL, MAX_QUERY_CHARS, MAX_TOTAL, PRINCIPAL_PER_TOOL,
    PRINCIPAL_TOTAL, Query, Teaching, ToolEvidence, Weight,
};
pub use file::{DIR, LearnedError, lock, path, vectors_path};
pub use sessions::{SHOWN, Sessions, WINDOW};
pub use snapshot::{COUNTS, Learned, LearnedTool};

use sha2::{Digest, Sha256};

/// A short, stable digest of a principal or session name: what the evidence keeps of who
/// taught it (never the name itself).
pub fn digest(name: &str) -> String {
    crate::checksum::hex(&Sha256::digest(name.as_bytes())[..6])
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The fingerprint evidence is tied to: the tool's own (see
/// [`crate::catalog::tool_fingerprint`]), of the tool as served.
pub fn fingerprint(def: &crate::catalog::ToolDef) -> String {
    crate::catalog::tool_fingerprint(&def.raw)
}
