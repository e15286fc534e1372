//! Full results in the shared store, readable from every replica: one hash of metadata
//! (`r:<id>`: owner, tool, MIME type, kind, chars, chunks) and the text in chunks of
//! [`CHUNK_CHARS`] chars (`r:<id>:<n>`), all expiring together, so a page reads only the
//! chunks it covers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::{Body, Owner, ResultStore, Slice, StoreError, Stored, Valkey, new_id};

/// Chars per chunk: a page of the default budget (about 40,000 chars) reads one or two.
const CHUNK_CHARS: usize = 64 * 1024;

/// Results kept in Valkey/Redis for `ttl`, each at most `max_bytes`.
pub struct SharedResults {
    store: Valkey,
    ttl: Duration,
    max_bytes: u64,
}

/// The metadata of one stored result.
struct Meta {
    owner: String,
    tool: String,
    mime: String,
    blob: bool,
    chars: usize,
    chunks: usize,
}

impl Meta {
    fn read(fields: HashMap<String, String>) -> Option<Self> {
        let number = |key: &str| fields.get(key)?.parse::<usize>().ok();
        Some(Self {
            owner: fields.get("owner")?.clone(),
            tool: fields.get("tool")?.clone(),
            mime: fields.get("mime")?.clone(),
            blob: fields.get("blob")? == "1",
            chars: number("chars")?,
            chunks: number("chunks")?,
        })
    }
}

impl SharedResults {
    pub fn new(store: Valkey, ttl: Duration, max_bytes: u64) -> Self {
        Self {
            store,
            ttl,
            max_bytes,
        }
    }

    fn meta_key(&self, id: &str) -> String {
        self.store.key(&format!("r:{id}"))
    }

    fn chunk_key(&self, id: &str, n: usize) -> String {
        self.store.key(&format!("r:{id}:{n}"))
    }

    /// The metadata of `id` if `owner` may read it.
    async fn meta(&self, id: &str, owner: &Owner) -> Result<Meta, StoreError> {
        let key = self.meta_key(id);
        let fields: HashMap<String, String> = self
            .store
            .query("get", redis::cmd("HGETALL").arg(key))
            .await?;
        Meta::read(fields)
            .filter(|meta| meta.owner == owner.as_str())
            .ok_or_else(|| StoreError::Missing(id.to_owned()))
    }

    /// Chunks `range` of `id`, joined; any of them gone (expired meanwhile) reads as missing.
    async fn chunks(&self, id: &str, range: std::ops::Range<usize>) -> Result<String, StoreError> {
        if range.is_empty() {
            return Ok(String::new());
        }
        let keys: Vec<String> = range.map(|n| self.chunk_key(id, n)).collect();
        let parts: Vec<Option<String>> = self
            .store
            .query("get", redis::cmd("MGET").arg(keys))
            .await?;
        parts
            .into_iter()
            .collect::<Option<Vec<String>>>()
            .map(|parts| parts.concat())
            .ok_or_else(|| StoreError::Missing(id.to_owned()))
    }
}

/// `data` cut into pieces of `CHUNK_CHARS` chars (the last may be shorter).
fn chunked(data: &str) -> Vec<&str> {
    let mut pieces = Vec::with_capacity(data.len() / CHUNK_CHARS + 1);
    let mut rest = data;
    while !rest.is_empty() {
        let end = rest
            .char_indices()
            .nth(CHUNK_CHARS)
            .map_or(rest.len(), |(b, _)| b);
        let (piece, tail) = rest.split_at(end);
        pieces.push(piece);
        rest = tail;
    }
    pieces
}

#[async_trait::async_trait]
impl ResultStore for SharedResults {
    async fn put(&self, owner: &Owner, stored: Stored) -> Result<String, StoreError> {
        if stored.size() as u64 > self.max_bytes {
            return Err(StoreError::TooLarge {
                bytes: stored.size(),
                capacity: self.max_bytes,
                setting: "metaServer.store.maxResultMb",
            });
        }
        let id = new_id();
        let pieces = chunked(stored.data());
        let chars = if stored.is_blob() {
            stored.size()
        } else {
            stored.char_len()
        };
        let ttl = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let mut pipe = redis::pipe();
        for (n, piece) in pieces.iter().enumerate() {
            pipe.cmd("SET")
                .arg(self.chunk_key(&id, n))
                .arg(*piece)
                .arg("PX")
                .arg(ttl)
                .ignore();
        }
        let meta = self.meta_key(&id);
        pipe.cmd("HSET")
            .arg(&meta)
            .arg("owner")
            .arg(owner.as_str())
            .arg("tool")
            .arg(&stored.tool)
            .arg("mime")
            .arg(&stored.mime_type)
            .arg("blob")
            .arg(if stored.is_blob() { "1" } else { "0" })
            .arg("chars")
            .arg(chars)
            .arg("chunks")
            .arg(pieces.len())
            .ignore();
        pipe.cmd("PEXPIRE").arg(&meta).arg(ttl).ignore();
        self.store.query_pipe::<()>("put", &pipe).await?;
        Ok(id)
    }

    async fn get(&self, id: &str, owner: &Owner) -> Result<Arc<Stored>, StoreError> {
        let meta = self.meta(id, owner).await?;
        let data = self.chunks(id, 0..meta.chunks).await?;
        let body = if meta.blob {
            Body::Blob(data)
        } else {
            Body::Text(data)
        };
        Ok(Arc::new(Stored::new(&meta.tool, &meta.mime, body)))
    }

    async fn slice(
        &self,
        id: &str,
        owner: &Owner,
        from: usize,
        chars: usize,
    ) -> Result<Slice, StoreError> {
        let meta = self.meta(id, owner).await?;
        let first = (from / CHUNK_CHARS).min(meta.chunks);
        let last = (from.saturating_add(chars) / CHUNK_CHARS + 1).min(meta.chunks);
        let data = self.chunks(id, first..last.max(first)).await?;
        let body = if meta.blob {
            Body::Blob(data)
        } else {
            Body::Text(data)
        };
        Ok(Slice {
            stored: Arc::new(Stored::new(&meta.tool, &meta.mime, body)),
            start: (first * CHUNK_CHARS).min(meta.chars),
            total: meta.chars,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_whole_chars() {
        let text = "é".repeat(CHUNK_CHARS * 2 + 5);
        let pieces = chunked(&text);
        assert_eq!(
            pieces.iter().map(|p| p.chars().count()).collect::<Vec<_>>(),
            [CHUNK_CHARS, CHUNK_CHARS, 5]
        );
        assert_eq!(pieces.concat(), text);
        assert!(chunked("").is_empty());
    }
}
