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

    /// Why these counts are not those of an entry a replica wrote (at most `max_bytes`, in
    /// [`CHUNK_CHARS`]-char chunks), if they are not; checked before the chunks are read, so a
    /// claim of 10^12 chunks is an error, not an allocation that aborts the process.
    fn implausible(&self, max_bytes: u64) -> Option<String> {
        // Every char is at least one byte (a blob's base64 chars are one byte each).
        if self.chars as u64 > max_bytes {
            return Some(format!(
                "{} chars, more than the {max_bytes} bytes a stored result may have",
                self.chars
            ));
        }
        let expected = self.chars.div_ceil(CHUNK_CHARS);
        (self.chunks != expected).then(|| {
            format!(
                "{} chunks for {} chars, which take {expected}",
                self.chunks, self.chars
            )
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

    /// The metadata of `id` if `owner` may read it and it is that of a real entry.
    async fn meta(&self, id: &str, owner: &Owner) -> Result<Meta, StoreError> {
        let key = self.meta_key(id);
        let fields: HashMap<String, String> = self
            .store
            .query("get", redis::cmd("HGETALL").arg(key))
            .await?;
        let meta = Meta::read(fields)
            .filter(|meta| meta.owner == owner.as_str())
            .ok_or_else(|| StoreError::Missing(id.to_owned()))?;
        match meta.implausible(self.max_bytes) {
            None => Ok(meta),
            Some(why) => {
                tracing::warn!("shared store: result {id}: {why}");
                Err(StoreError::Corrupt {
                    id: id.to_owned(),
                    why,
                })
            }
        }
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

    fn meta(chars: &str, chunks: &str) -> Meta {
        let fields = [
            ("owner", "o"),
            ("tool", "t"),
            ("mime", "text/plain"),
            ("blob", "0"),
            ("chars", chars),
            ("chunks", chunks),
        ];
        Meta::read(fields.map(|(k, v)| (k.to_owned(), v.to_owned())).into()).expect("fields parse")
    }

    #[test]
    fn counts_no_real_entry_has_are_refused() {
        let max = 64 << 20;
        assert_eq!(meta("0", "0").implausible(max), None);
        assert_eq!(meta("5", "1").implausible(max), None);
        assert_eq!(
            meta(&(CHUNK_CHARS * 2 + 1).to_string(), "3").implausible(max),
            None
        );
        assert_eq!(meta(&(64 << 20).to_string(), "1024").implausible(max), None);
        for (chars, chunks) in [
            ("5", "1000000000000"),
            ("5", "0"),
            ("1000000000000000", "15258789063"),
            (&(CHUNK_CHARS * 2).to_string(), "3"),
        ] {
            assert!(
                meta(chars, chunks).implausible(max).is_some(),
                "{chars} chars, {chunks} chunks"
            );
        }
    }
}
