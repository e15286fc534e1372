//! The local result store: full results kept for reading back by the session that made them,
//! in memory and, when large, in an owner-only temporary directory; one byte budget covers
//! both, and results expire after a TTL.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use std::time::Duration;

use moka::notification::RemovalCause;
use moka::policy::EvictionPolicy;

use super::{Body, Owner, ResultStore, StoreError, Stored, new_id};
use crate::atomic_file::{self, Access};

/// Results larger than this go to disk.
pub const DEFAULT_SPILL_BYTES: usize = 1 << 20;

/// Writes a result into `dir` (owner-only, atomically) and returns its disk slot.
fn spill(dir: &std::path::Path, id: &str, owner: &Owner, stored: &Stored) -> std::io::Result<Slot> {
    let path = dir.join(id);
    atomic_file::write(&path, stored.data().as_bytes(), Access::OwnerOnly)?;
    Ok(Slot::Disk {
        owner: owner.clone(),
        path: Arc::new(path),
        tool: stored.tool.as_str().into(),
        mime_type: stored.mime_type.as_str().into(),
        blob: stored.is_blob(),
        size: stored.size(),
    })
}

#[derive(Clone)]
enum Slot {
    Memory {
        owner: Owner,
        stored: Arc<Stored>,
    },
    Disk {
        owner: Owner,
        path: Arc<PathBuf>,
        tool: Arc<str>,
        mime_type: Arc<str>,
        blob: bool,
        size: usize,
    },
}

impl Slot {
    fn owner(&self) -> &Owner {
        match self {
            Slot::Memory { owner, .. } | Slot::Disk { owner, .. } => owner,
        }
    }

    /// Bytes it holds, in memory or on disk: both count against one budget.
    fn size(&self) -> usize {
        match self {
            Slot::Memory { stored, .. } => stored.size(),
            Slot::Disk { size, .. } => *size,
        }
    }
}

/// The moka-backed store: small results in memory, large ones on disk, all expiring after a
/// TTL. Memory and disk share one byte budget; over it the least recently used go first.
pub struct SpillStore {
    cache: moka::sync::Cache<String, Slot>,
    dir: OnceLock<tempfile::TempDir>,
    /// The byte budget for memory and disk together.
    capacity: u64,
    spill_bytes: usize,
    /// The last result read from disk, so paging through it does not re-read the file.
    hot: Mutex<Option<(String, Arc<Stored>)>>,
}

impl SpillStore {
    /// A store keeping results for `ttl` within `capacity` bytes (memory and disk together);
    /// results over `spill_bytes` are kept on disk.
    pub fn new(ttl: Duration, capacity: u64, spill_bytes: usize) -> Self {
        let cache = moka::sync::Cache::builder()
            .max_capacity(capacity)
            .eviction_policy(EvictionPolicy::lru())
            .weigher(|id: &String, slot: &Slot| {
                u32::try_from(id.len() + slot.size()).unwrap_or(u32::MAX)
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
            capacity,
            spill_bytes,
            hot: Mutex::new(None),
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

#[async_trait::async_trait]
impl ResultStore for SpillStore {
    /// Large results are kept in memory at once and written to disk behind the request, so
    /// storing never delays the answer; the memory slot is then replaced by the disk one.
    async fn put(&self, owner: &Owner, stored: Stored) -> Result<String, StoreError> {
        if stored.size() as u64 > self.capacity {
            return Err(StoreError::TooLarge {
                bytes: stored.size(),
                capacity: self.capacity,
                setting: "resultMemoryMb",
            });
        }
        let id = new_id();
        let large = stored.size() > self.spill_bytes;
        let stored = Arc::new(stored);
        let slot = Slot::Memory {
            owner: owner.clone(),
            stored: stored.clone(),
        };
        self.cache.insert(id.clone(), slot);
        // Evict (and delete the files of) what no longer fits now, not at some later access.
        self.cache.run_pending_tasks();
        if large {
            let dir = self.spill_dir()?.to_owned();
            let cache = self.cache.clone();
            let id = id.clone();
            let owner = owner.clone();
            std::thread::spawn(move || match spill(&dir, &id, &owner, &stored) {
                // Unless it was dropped meanwhile (TTL or the byte budget).
                Ok(slot) if cache.contains_key(&id) => {
                    cache.insert(id, slot);
                    cache.run_pending_tasks();
                }
                Ok(Slot::Disk { path, .. }) => {
                    let _ = std::fs::remove_file(path.as_path());
                }
                Ok(Slot::Memory { .. }) => {}
                Err(e) => {
                    tracing::warn!("result {id} stays in memory: cannot write it to disk: {e}")
                }
            });
        }
        Ok(id)
    }

    async fn get(&self, id: &str, owner: &Owner) -> Result<Arc<Stored>, StoreError> {
        let missing = || StoreError::Missing(id.to_owned());
        let slot = self
            .cache
            .get(id)
            .filter(|slot| slot.owner() == owner)
            .ok_or_else(missing)?;
        match slot {
            Slot::Memory { stored, .. } => Ok(stored),
            Slot::Disk {
                path,
                tool,
                mime_type,
                blob,
                ..
            } => {
                let mut hot = self.hot.lock();
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

    fn held_bytes(&self) -> Option<u64> {
        self.cache.run_pending_tasks();
        Some(self.cache.weighted_size())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{
        DEFAULT_RESULT_MEMORY as DEFAULT_MEMORY_BYTES, DEFAULT_RESULT_TTL as DEFAULT_TTL,
    };

    /// The store's calls, run to completion (the local store never waits).
    trait Now {
        fn put_now(&self, owner: &Owner, stored: Stored) -> Result<String, StoreError>;
        fn get_now(&self, id: &str, owner: &Owner) -> Result<Arc<Stored>, StoreError>;
    }

    impl<T: ResultStore + ?Sized> Now for T {
        fn put_now(&self, owner: &Owner, stored: Stored) -> Result<String, StoreError> {
            futures::executor::block_on(self.put(owner, stored))
        }
        fn get_now(&self, id: &str, owner: &Owner) -> Result<Arc<Stored>, StoreError> {
            futures::executor::block_on(self.get(id, owner))
        }
    }

    /// The behaviour every store must show, run over memory and disk placement.
    fn behaves(store: &dyn ResultStore) {
        let me = Owner::session();
        let text = "héllo wörld ✓ ".repeat(2000);
        let id = store
            .put_now(&me, Stored::text("s__t", "text/plain", text.clone()))
            .unwrap();
        assert!(
            id.starts_with("r-")
                && id.len() == 34
                && id[2..].chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
        let stored = store.get_now(&id, &me).unwrap();
        assert_eq!(stored.as_text(), Some(text.as_str()));
        assert_eq!(stored.tool, "s__t");
        assert_eq!(stored.char_len(), text.chars().count());
        for at in [0, 1, 4095, 4096, 4097, 9000, stored.char_len()] {
            let expected: usize = text.chars().take(at).map(char::len_utf8).sum();
            assert_eq!(stored.byte_offset(at), expected, "char {at}");
        }
        let blob = store
            .put_now(
                &me,
                Stored::new("s__img", "image/png", Body::Blob("aGVsbG8=".into())),
            )
            .unwrap();
        assert_eq!(
            store.get_now(&blob, &me).unwrap().body,
            Body::Blob("aGVsbG8=".into())
        );
        let unknown = store
            .get_now(&format!("r-{}", "0".repeat(32)), &me)
            .unwrap_err();
        let foreign = store.get_now(&id, &Owner::session()).unwrap_err();
        assert!(matches!(unknown, StoreError::Missing(_)), "{unknown:?}");
        assert_eq!(
            foreign.to_string(),
            unknown.to_string().replace(&"0".repeat(32), &id[2..]),
            "another session's result reads as unknown"
        );
    }

    #[test]
    fn memory_placement() {
        behaves(&SpillStore::new(
            DEFAULT_TTL,
            DEFAULT_MEMORY_BYTES,
            usize::MAX,
        ));
    }

    /// Waits (bounded) until `check` holds; spilling happens behind the request.
    fn eventually(what: &str, check: impl Fn() -> bool) {
        for _ in 0..1000 {
            if check() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("timed out waiting for {what}");
    }

    fn on_disk(store: &SpillStore) -> usize {
        store
            .cache
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Disk { .. }))
            .count()
    }

    #[test]
    fn disk_placement_is_owner_only() {
        let store = SpillStore::new(DEFAULT_TTL, DEFAULT_MEMORY_BYTES, 0);
        behaves(&store);
        let dir = store.dir.get().unwrap().path();
        eventually("both results to reach the disk", || on_disk(&store) == 2);
        assert_eq!(
            std::fs::read_dir(dir).unwrap().count(),
            2,
            "both results spilled"
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
    fn memory_and_disk_share_one_budget_oldest_out_first() {
        const BUDGET: u64 = 1 << 20;
        let store = SpillStore::new(DEFAULT_TTL, BUDGET, 10_000);
        let me = Owner::session();
        let ids: Vec<String> = (0..60)
            .map(|i| {
                let text = format!("{i:03}").repeat(100_000 / 3);
                store
                    .put_now(&me, Stored::text("s__t", "text/plain", text))
                    .unwrap()
            })
            .collect();
        let dir = store.dir.get().unwrap().path().to_owned();
        let disk_bytes = || -> u64 {
            std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|f| f.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        };
        eventually("stored results to fit the one budget", || {
            store.cache.run_pending_tasks();
            let memory: u64 = store
                .cache
                .iter()
                .filter_map(|(_, slot)| match slot {
                    Slot::Memory { stored, .. } => Some(stored.size() as u64),
                    Slot::Disk { .. } => None,
                })
                .sum();
            memory + disk_bytes() <= BUDGET
        });
        assert!(store.get_now(&ids[59], &me).is_ok(), "the newest is kept");
        assert!(
            store.get_now(&ids[0], &me).is_err(),
            "the oldest went first"
        );
        let huge = Stored::text("s__t", "text/plain", "x".repeat(BUDGET as usize + 1));
        let err = store.put_now(&me, huge).unwrap_err().to_string();
        assert!(err.contains("resultMemoryMb"), "{err}");
    }

    #[test]
    fn expired_results_read_as_unknown() {
        let store = SpillStore::new(Duration::from_millis(1), DEFAULT_MEMORY_BYTES, usize::MAX);
        let me = Owner::session();
        let id = store
            .put_now(&me, Stored::text("s__t", "text/plain", "x".into()))
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        store.cache.run_pending_tasks();
        let err = store.get_now(&id, &me).unwrap_err();
        assert!(matches!(err, StoreError::Missing(_)), "{err:?}");
        assert!(err.to_string().contains("re-run the tool"));
    }
}
