//! The result store: full results kept for reading back, in memory (bounded by bytes, with a
//! TTL) and spilled to an owner-only temporary directory when large.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use moka::notification::RemovalCause;
use rand::Rng;

use crate::atomic_file::{self, Access};

/// Results larger than this go to disk.
pub const DEFAULT_SPILL_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "result {0} has expired (results are kept for a limited time); re-run the tool to get it again"
    )]
    Expired(String),
    #[error(
        "no stored result {0}; resource ids look like r-1a2b3c4d and come from a truncation notice"
    )]
    Unknown(String),
    #[error("cannot keep the full result on disk: {0}")]
    Io(#[from] std::io::Error),
}

/// What a stored result holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Text(String),
    /// Base64 data of an image, audio clip or binary resource.
    Blob(String),
}

/// One full result.
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

    fn size(&self) -> usize {
        match &self.body {
            Body::Text(t) | Body::Blob(t) => t.len(),
        }
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

/// Writes a result into `dir` (owner-only, atomically) and returns its disk slot.
fn spill(dir: &std::path::Path, id: &str, stored: &Stored) -> std::io::Result<Slot> {
    let path = dir.join(id);
    let (Body::Text(data) | Body::Blob(data)) = &stored.body;
    atomic_file::write(&path, data.as_bytes(), Access::OwnerOnly)?;
    Ok(Slot::Disk {
        path: Arc::new(path),
        tool: stored.tool.as_str().into(),
        mime_type: stored.mime_type.as_str().into(),
        blob: matches!(stored.body, Body::Blob(_)),
    })
}

/// Keeps full results by id.
pub trait ResultStore: Send + Sync {
    /// Stores a result and returns its new id (`r-` + 8 hex digits).
    fn put(&self, stored: Stored) -> Result<String, StoreError>;
    fn get(&self, id: &str) -> Result<Arc<Stored>, StoreError>;
}

#[derive(Clone)]
enum Slot {
    Memory(Arc<Stored>),
    Disk {
        path: Arc<PathBuf>,
        tool: Arc<str>,
        mime_type: Arc<str>,
        blob: bool,
    },
}

/// The moka-backed store: small results in memory, large ones on disk, all expiring after a TTL.
pub struct SpillStore {
    cache: moka::sync::Cache<String, Slot>,
    dir: OnceLock<tempfile::TempDir>,
    spill_bytes: usize,
    issued: Mutex<HashSet<String>>,
    /// The last result read from disk, so paging through it does not re-read the file.
    hot: Mutex<Option<(String, Arc<Stored>)>>,
}

impl SpillStore {
    pub fn new(ttl: Duration, memory_bytes: u64, spill_bytes: usize) -> Self {
        let cache = moka::sync::Cache::builder()
            .max_capacity(memory_bytes)
            .weigher(|id: &String, slot: &Slot| {
                let size = match slot {
                    Slot::Memory(s) => s.size(),
                    Slot::Disk { .. } => 256,
                };
                u32::try_from(id.len() + size).unwrap_or(u32::MAX)
            })
            .time_to_live(ttl)
            .eviction_listener(|_id, slot, _cause: RemovalCause| {
                if let Slot::Disk { path, .. } = slot {
                    let _ = std::fs::remove_file(path.as_path());
                }
            })
            .build();
        Self {
            cache,
            dir: OnceLock::new(),
            spill_bytes,
            issued: Mutex::new(HashSet::new()),
            hot: Mutex::new(None),
        }
    }

    fn new_id(&self) -> String {
        let mut issued = self.issued.lock().expect("issued lock");
        loop {
            let id = format!("r-{:08x}", rand::rng().random::<u32>());
            if issued.insert(id.clone()) {
                return id;
            }
        }
    }

    fn spill_dir(&self) -> Result<&std::path::Path, StoreError> {
        if self.dir.get().is_none() {
            // Owner-only, and removed when the store is dropped.
            let dir = tempfile::Builder::new()
                .prefix("meta-server-results-")
                .tempdir()?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
            }
            let _ = self.dir.set(dir);
        }
        Ok(self.dir.get().expect("spill dir set").path())
    }
}

impl ResultStore for SpillStore {
    /// Large results are kept in memory at once and written to disk behind the request, so
    /// storing never delays the answer; the memory slot is then replaced by the disk one.
    fn put(&self, stored: Stored) -> Result<String, StoreError> {
        let id = self.new_id();
        let large = stored.size() > self.spill_bytes;
        let stored = Arc::new(stored);
        self.cache.insert(id.clone(), Slot::Memory(stored.clone()));
        if large {
            let dir = self.spill_dir()?.to_owned();
            let cache = self.cache.clone();
            let id = id.clone();
            std::thread::spawn(move || match spill(&dir, &id, &stored) {
                // Unless it was dropped meanwhile (TTL or memory bound).
                Ok(slot) if cache.contains_key(&id) => cache.insert(id, slot),
                Ok(Slot::Disk { path, .. }) => {
                    let _ = std::fs::remove_file(path.as_path());
                }
                Ok(Slot::Memory(_)) => {}
                Err(e) => {
                    tracing::warn!("result {id} stays in memory: cannot write it to disk: {e}")
                }
            });
        }
        Ok(id)
    }

    fn get(&self, id: &str) -> Result<Arc<Stored>, StoreError> {
        let missing = || {
            if self.issued.lock().expect("issued lock").contains(id) {
                StoreError::Expired(id.to_owned())
            } else {
                StoreError::Unknown(id.to_owned())
            }
        };
        match self.cache.get(id).ok_or_else(missing)? {
            Slot::Memory(stored) => Ok(stored),
            Slot::Disk {
                path,
                tool,
                mime_type,
                blob,
            } => {
                let mut hot = self.hot.lock().expect("hot lock");
                if let Some((hot_id, stored)) = hot.as_ref()
                    && hot_id == id
                {
                    return Ok(stored.clone());
                }
                let data = std::fs::read_to_string(path.as_path()).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => missing(),
                    _ => StoreError::Io(e),
                })?;
                let body = if blob {
                    Body::Blob(data)
                } else {
                    Body::Text(data)
                };
                let stored = Arc::new(Stored::new(&tool, &mime_type, body));
                *hot = Some((id.to_owned(), stored.clone()));
                Ok(stored)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{
        DEFAULT_RESULT_MEMORY as DEFAULT_MEMORY_BYTES, DEFAULT_RESULT_TTL as DEFAULT_TTL,
    };

    /// The behaviour every store must show, run over memory and disk placement.
    fn behaves(store: &dyn ResultStore) {
        let text = "héllo wörld ✓ ".repeat(2000);
        let id = store
            .put(Stored::text("s__t", "text/plain", text.clone()))
            .unwrap();
        assert!(
            id.starts_with("r-")
                && id.len() == 10
                && id[2..].chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
        let stored = store.get(&id).unwrap();
        assert_eq!(stored.as_text(), Some(text.as_str()));
        assert_eq!(stored.tool, "s__t");
        assert_eq!(stored.char_len(), text.chars().count());
        for at in [0, 1, 4095, 4096, 4097, 9000, stored.char_len()] {
            let expected: usize = text.chars().take(at).map(char::len_utf8).sum();
            assert_eq!(stored.byte_offset(at), expected, "char {at}");
        }
        let blob = store
            .put(Stored::new(
                "s__img",
                "image/png",
                Body::Blob("aGVsbG8=".into()),
            ))
            .unwrap();
        assert_eq!(
            store.get(&blob).unwrap().body,
            Body::Blob("aGVsbG8=".into())
        );
        assert!(matches!(
            store.get("r-00000000"),
            Err(StoreError::Unknown(_))
        ));
    }

    #[test]
    fn memory_placement() {
        behaves(&SpillStore::new(
            DEFAULT_TTL,
            DEFAULT_MEMORY_BYTES,
            usize::MAX,
        ));
    }

    #[test]
    fn disk_placement_is_owner_only() {
        let store = SpillStore::new(DEFAULT_TTL, DEFAULT_MEMORY_BYTES, 0);
        behaves(&store);
        let dir = store.dir.get().unwrap().path();
        // Written behind the request: wait (bounded) for both results to reach the disk.
        for _ in 0..500 {
            let on_disk = store
                .cache
                .iter()
                .filter(|(_, slot)| matches!(slot, Slot::Disk { .. }))
                .count();
            if on_disk == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            std::fs::read_dir(dir).unwrap().count(),
            2,
            "both results spilled"
        );
        let id = store.cache.iter().next().unwrap().0;
        assert!(
            store.get(&id).is_ok(),
            "a spilled result reads back from disk"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(dir).unwrap().permissions().mode() & 0o077,
                0
            );
            for file in std::fs::read_dir(dir).unwrap() {
                let mode = file.unwrap().metadata().unwrap().permissions().mode();
                assert_eq!(mode & 0o077, 0, "result files are owner-only");
            }
        }
    }

    #[test]
    fn expired_results_say_so() {
        let store = SpillStore::new(Duration::from_millis(1), DEFAULT_MEMORY_BYTES, usize::MAX);
        let id = store
            .put(Stored::text("s__t", "text/plain", "x".into()))
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        store.cache.run_pending_tasks();
        let err = store.get(&id).unwrap_err();
        assert!(matches!(err, StoreError::Expired(_)), "{err:?}");
        assert!(err.to_string().contains("re-run the tool"));
    }
}
