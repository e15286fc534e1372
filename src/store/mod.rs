//! Where full results, MCP sessions and catalogs are kept: in this process (`local.rs`: memory
//! and an owner-only temp dir), or in a Valkey/Redis server that several `serve --http` replicas
//! share (`valkey.rs` the connection, `results.rs` chunked results, `sessions.rs` rmcp's session
//! store, `catalogs.rs` shared catalogs and the lease that lets one replica list a server,
//! `approvals.rs` the tool approvals of every replica, `learned.rs` what search learned from use).

mod approvals;
mod catalogs;
mod learned;
mod local;
mod results;
mod sessions;
mod valkey;

use std::sync::{Arc, OnceLock};

use rand::Rng;
use sha2::{Digest, Sha256};

pub use approvals::SharedApprovals;
pub use catalogs::{Lease, SharedCatalog};
pub use learned::SharedEvidence;
pub use local::{DEFAULT_SPILL_BYTES, SpillStore};
pub use results::SharedResults;
pub use sessions::SharedSessions;
pub use valkey::{StoreStats, Valkey};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Unknown, expired and foreign ids all get this one message, so it tells nothing about
    /// results of other sessions. The id is the caller's, of any length: it is shown capped.
    #[error(
        "no stored result {}: results are kept for a limited time, for the session that made them, and ids come from a truncation notice; re-run the tool to get it again",
        crate::echo::echo(.0)
    )]
    Missing(String),
    #[error(
        "the full result is {bytes} bytes, more than the {capacity} bytes kept for stored results ({setting})"
    )]
    TooLarge {
        bytes: usize,
        capacity: u64,
        setting: &'static str,
    },
    /// An entry in the shared store that no replica could have written (someone else wrote to
    /// the store): refused before anything is read or allocated for it.
    #[error(
        "stored result {id} is corrupt in the shared store ({why}); re-run the tool to get it again"
    )]
    Corrupt { id: String, why: String },
    #[error("cannot keep the full result on disk: {0}")]
    Io(#[from] std::io::Error),
    /// The shared store cannot be reached (down, slow, refusing): callers go on without it.
    #[error("the shared store is unreachable: {0}")]
    Unavailable(String),
    #[error(
        "metaServer.store.url (or META_SERVER_STORE_URL) {0}; use redis://[:PASSWORD@]HOST[:PORT][/DB] or rediss://... for TLS"
    )]
    BadUrl(String),
}

/// What a stored result holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Text(String),
    /// Base64 data of an image, audio clip or binary resource.
    Blob(String),
}

/// One full result (or, in a [`Slice`], a part of one).
#[derive(Debug)]
pub struct Stored {
    /// Qualified name of the tool that produced it.
    pub tool: String,
    pub mime_type: String,
    pub body: Body,
    chars: OnceLock<CharIndex>,
}

impl Stored {
    pub fn text(tool: &str, mime_type: &str, text: String) -> Self {
        Self::new(tool, mime_type, Body::Text(text))
    }

    pub fn new(tool: &str, mime_type: &str, body: Body) -> Self {
        Self {
            tool: tool.to_owned(),
            mime_type: mime_type.to_owned(),
            body,
            chars: OnceLock::new(),
        }
    }

    pub fn size(&self) -> usize {
        self.data().len()
    }

    /// The text, or the base64 data of a blob.
    pub fn data(&self) -> &str {
        let (Body::Text(data) | Body::Blob(data)) = &self.body;
        data
    }

    pub fn is_blob(&self) -> bool {
        matches!(self.body, Body::Blob(_))
    }

    /// The text, or `None` for binary data.
    pub fn as_text(&self) -> Option<&str> {
        match &self.body {
            Body::Text(t) => Some(t),
            Body::Blob(_) => None,
        }
    }

    /// Number of chars in the text (0 for binary data).
    pub fn char_len(&self) -> usize {
        self.index().total
    }

    /// Byte offset of char offset `at` (clamped to the end).
    pub fn byte_offset(&self, at: usize) -> usize {
        let text = self.as_text().unwrap_or_default();
        let index = self.index();
        if at >= index.total {
            return text.len();
        }
        let block = at / CharIndex::STEP;
        let start = index.bytes[block];
        start
            + text[start..]
                .char_indices()
                .nth(at - block * CharIndex::STEP)
                .map_or(text.len() - start, |(b, _)| b)
    }

    fn index(&self) -> &CharIndex {
        self.chars
            .get_or_init(|| CharIndex::new(self.as_text().unwrap_or_default()))
    }
}

/// Byte offsets of every `STEP`-th char, so char offsets map to bytes without a full scan.
#[derive(Debug)]
struct CharIndex {
    total: usize,
    bytes: Vec<usize>,
}

impl CharIndex {
    const STEP: usize = 4096;

    fn new(text: &str) -> Self {
        let mut bytes = Vec::with_capacity(text.len() / Self::STEP + 1);
        let mut total = 0;
        for (b, _) in text.char_indices() {
            if total % Self::STEP == 0 {
                bytes.push(b);
            }
            total += 1;
        }
        if bytes.is_empty() {
            bytes.push(0);
        }
        Self { total, bytes }
    }
}

/// Chars `start..start + stored.char_len()` of a stored text of `total` chars: what paging
/// reads, so a store that keeps results in pieces fetches only the pieces a page needs.
#[derive(Debug)]
pub struct Slice {
    pub stored: Arc<Stored>,
    pub start: usize,
    pub total: usize,
}

/// Who may read a stored result: the client session (or principal) that made it, or every
/// session when results are shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner(Arc<str>);

impl Owner {
    /// A new owner no other session can name (128 random bits): one client session.
    pub fn session() -> Self {
        Self(format!("session-{:032x}", rand::rng().random::<u128>()).into())
    }

    /// The one owner of every result when sessions share their results.
    pub fn shared() -> Self {
        Self("shared".into())
    }

    /// The results of `principal`'s session `session`, or of all its sessions (`None`). A
    /// digest, so a shared store holds neither tokens nor session ids.
    pub fn of(principal: &str, session: Option<&str>) -> Self {
        let mut hash = Sha256::new();
        hash.update(principal.as_bytes());
        match session {
            Some(session) => {
                hash.update([0, 1]);
                hash.update(session.as_bytes());
            }
            None => hash.update([0, 0]),
        }
        let digest = hash.finalize();
        let hex = crate::checksum::hex(&digest[..16]);
        Self(format!("owner-{hex}").into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A new result id: `r-` and 32 hex digits, 128 random bits, so ids cannot be guessed.
pub(crate) fn new_id() -> String {
    format!("r-{:032x}", rand::rng().random::<u128>())
}

/// Keeps full results by id, each readable only by its owner.
#[async_trait::async_trait]
pub trait ResultStore: Send + Sync {
    /// Stores a result for `owner` and returns its new id (see [`new_id`]).
    async fn put(&self, owner: &Owner, stored: Stored) -> Result<String, StoreError>;

    /// The result `id`, if it is still kept and `owner` made it; an unknown, expired or
    /// foreign id gets the same error.
    async fn get(&self, id: &str, owner: &Owner) -> Result<Arc<Stored>, StoreError>;

    /// At least chars `from..from + chars` (clamped to the end) of the text `id`, as
    /// [`Self::get`] would give them; stores that keep results in pieces read only those needed.
    async fn slice(
        &self,
        id: &str,
        owner: &Owner,
        from: usize,
        chars: usize,
    ) -> Result<Slice, StoreError> {
        let _ = (from, chars);
        let stored = self.get(id, owner).await?;
        let total = stored.char_len();
        Ok(Slice {
            stored,
            start: 0,
            total,
        })
    }

    /// Bytes of results held by this process now, when it holds them (for metrics).
    fn held_bytes(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_of_principals_and_sessions() {
        let a = Owner::of("token-1", Some("s1"));
        assert_eq!(
            a,
            Owner::of("token-1", Some("s1")),
            "stable across replicas"
        );
        assert_ne!(a, Owner::of("token-1", Some("s2")));
        assert_ne!(a, Owner::of("token-2", Some("s1")));
        assert_ne!(Owner::of("token-1", None), Owner::of("token-1", Some("")));
        assert!(!a.as_str().contains("token") && !a.as_str().contains("s1"));
    }

    #[test]
    fn ids_have_128_random_bits() {
        let id = new_id();
        assert!(id.len() == 34 && id[2..].chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(id, new_id());
    }
}
