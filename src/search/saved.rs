//! The search index saved in a directory, so start-up reads it instead of analysing every
//! tool text again: tantivy's files, the side tables, and `manifest.json`, written last,
//! with the size and checksum (xxh3) of every file and the sources the index was built from.
//!
//! Layout: `<dir>/v<FORMAT>/manifest.json` names a generation directory beside it that holds
//! the files. A save writes a new generation, then the manifest (temp file + rename); a
//! generation is never written again, so a reader sees a whole index or none. A file that
//! does not match the manifest is an error, never served.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use tantivy::Index;
use tantivy::directory::{Directory, RamDirectory};

use super::tables::Tables;
use super::{SearchIndex, SearchOptions, schema};
use crate::atomic_file::{self, Access};
use crate::checksum;

/// The saved format; a change makes earlier saves unread (they stay in their own directory).
pub const FORMAT: u32 = 3;
const MANIFEST: &str = "manifest.json";
const TABLES: &str = "tables.bin";
/// tantivy's list of its index's segments, and of the files it manages (which a reopened
/// index needs to save all its files again).
const META: [&str; 2] = ["meta.json", ".managed.json"];
/// Generations other than the current one older than this are deleted by a save, and without
/// a manifest they mean a save was interrupted; younger ones may be another process's save
/// in progress.
const KEEP_OTHERS: Duration = Duration::from_secs(60);

/// Why a saved index cannot be used or saved.
#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    #[error("saved search index {path} is unusable: {message}")]
    Unusable { path: PathBuf, message: String },
    #[error("cannot save the search index in {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Per source (a server, the built-in tools, skills), a hash of what its documents are made of.
pub type Sources = BTreeMap<String, String>;

#[derive(Serialize, Deserialize)]
struct Manifest {
    format: u32,
    /// The search options' debug form: another ranking setup builds another index.
    options: String,
    /// The directory beside the manifest that holds the files.
    generation: String,
    files: BTreeMap<String, FileSum>,
    /// What the index was built from, by source (a server, the built-in tools, skills): a hash
    /// of its inputs, compared by the caller to tell which sources changed.
    sources: Sources,
}

#[derive(Serialize, Deserialize, PartialEq)]
struct FileSum {
    size: u64,
    xxh3: String,
}

impl FileSum {
    fn of(bytes: &[u8]) -> Self {
        Self {
            size: bytes.len() as u64,
            xxh3: checksum::hex(&checksum::of(bytes)),
        }
    }
}

impl SearchIndex {
    /// Saves this index in `dir` with the hashes of its `sources`. Returns `Ok(false)` without
    /// saving when this is no longer the newest version (a newer one is saved instead).
    pub fn save(&self, dir: &Path, sources: &Sources) -> Result<bool, SavedError> {
        let root = dir.join(format!("v{FORMAT}"));
        let failed = |source| SavedError::Write {
            path: root.clone(),
            source,
        };
        if !self.is_newest() {
            return Ok(false);
        }
        let directory = self.index.directory();
        let mut names: Vec<PathBuf> = directory.list_managed_files().into_iter().collect();
        names.extend(META.map(PathBuf::from));
        names.sort();
        names.dedup();
        let mut files = Vec::with_capacity(names.len() + 1);
        for name in names {
            match directory.atomic_read(&name) {
                Ok(bytes) => files.push((name.to_string_lossy().into_owned(), bytes)),
                // Listed but gone: a segment dropped at the last commit.
                Err(tantivy::directory::error::OpenReadError::FileDoesNotExist(_)) => {}
                Err(e) => return Err(failed(std::io::Error::other(e.to_string()))),
            }
        }
        files.push((TABLES.to_owned(), self.tables.encode()));
        if !self.is_newest() {
            // Updated while the files were read: they may not fit the tables.
            return Ok(false);
        }
        std::fs::create_dir_all(&root).map_err(failed)?;
        let generation = tempfile::Builder::new()
            .prefix("g")
            .tempdir_in(&root)
            .map_err(failed)?
            .keep();
        let mut sums = BTreeMap::new();
        for (name, bytes) in &files {
            std::fs::write(generation.join(name), bytes).map_err(failed)?;
            sums.insert(name.clone(), FileSum::of(bytes));
        }
        let generation = generation
            .file_name()
            .expect("a temp dir has a name")
            .to_string_lossy()
            .into_owned();
        let manifest = Manifest {
            format: FORMAT,
            options: format!("{:?}", self.options),
            generation: generation.clone(),
            files: sums,
            sources: sources.clone(),
        };
        let text = serde_json::to_vec_pretty(&manifest).expect("manifest serializes");
        atomic_file::write(&root.join(MANIFEST), &text, Access::OwnerOnly).map_err(failed)?;
        remove_old_generations(&root, &generation);
        Ok(true)
    }

    /// The index saved in `dir` with the hashes of its sources; `Ok(None)` when there is none
    /// for this format and these options. Every file is checked against the manifest first:
    /// a missing, truncated or changed file is an error.
    pub fn open_saved(
        dir: &Path,
        options: &SearchOptions,
    ) -> Result<Option<(Self, Sources)>, SavedError> {
        let root = dir.join(format!("v{FORMAT}"));
        let unusable = |message: String| SavedError::Unusable {
            path: root.clone(),
            message,
        };
        let text = match std::fs::read(root.join(MANIFEST)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Younger files may be another process's first save, still writing.
                if std::fs::read_dir(&root).is_ok_and(|d| d.flatten().any(|e| is_old(&e))) {
                    return Err(unusable(
                        "its files have no manifest: a save was interrupted".into(),
                    ));
                }
                return Ok(None);
            }
            Err(e) => return Err(unusable(e.to_string())),
        };
        let manifest: Manifest = serde_json::from_slice(&text)
            .map_err(|e| unusable(format!("its manifest does not parse: {e}")))?;
        if manifest.format != FORMAT || manifest.options != format!("{options:?}") {
            return Ok(None);
        }
        let generation = root.join(&manifest.generation);
        if manifest.generation.contains(['/', '\\']) || manifest.generation.starts_with('.') {
            return Err(unusable("its manifest names no generation".into()));
        }
        if let Some(name) = (manifest.files.keys()).find(|n| n.contains(['/', '\\']) || *n == "..")
        {
            return Err(unusable(format!(
                "its manifest names a file outside it: {name}"
            )));
        }
        let read = |name: &str, sum: &FileSum| {
            let bytes = std::fs::read(generation.join(name))
                .map_err(|e| unusable(format!("{name}: {e}")))?;
            match FileSum::of(&bytes) == *sum {
                true => Ok(bytes),
                false => Err(unusable(format!("{name} does not match its checksum"))),
            }
        };
        let tables_sum =
            (manifest.files.get(TABLES)).ok_or_else(|| unusable(format!("no {TABLES}")))?;
        let tables = read(TABLES, tables_sum)?;
        // The side tables are decoded on another thread while tantivy's files are read.
        let (tables, index) = std::thread::scope(|scope| {
            let tables = scope
                .spawn(|| Tables::decode(&tables).map_err(|e| unusable(format!("{TABLES}: {e}"))));
            let ram = RamDirectory::create();
            let files = manifest.files.iter().filter(|(name, _)| *name != TABLES);
            for (name, sum) in files {
                ram.atomic_write(Path::new(name), &read(name, sum)?)
                    .map_err(|e| unusable(format!("{name}: {e}")))?;
            }
            let index = Index::open(ram).map_err(|e| unusable(e.to_string()))?;
            let tables = tables
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            Ok::<_, SavedError>((tables, index))
        })?;
        let (definition, fields) = schema::schema(options);
        if index.schema() != definition {
            return Err(unusable("its schema is not this build's".into()));
        }
        let analyzers = schema::register_analyzers(&index, options);
        let live = tables.live as u64;
        let opened = Self::open(index, analyzers, fields, options.clone(), tables)
            .map_err(|e| unusable(e.to_string()))?;
        let found = opened.searcher.num_docs();
        if found != live {
            return Err(unusable(format!(
                "{found} documents, {live} in the side tables"
            )));
        }
        Ok(Some((opened, manifest.sources)))
    }

    fn is_newest(&self) -> bool {
        self.generation.load(SeqCst) == self.version
    }
}

/// Deletes the generations in `root` other than `current` that are older than
/// [`KEEP_OTHERS`]; what cannot be deleted stays for the next save.
fn remove_old_generations(root: &Path, current: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name() != current
            && is_old(&entry)
            && entry.file_type().is_ok_and(|t| t.is_dir())
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether `entry` was last changed more than [`KEEP_OTHERS`] ago.
fn is_old(entry: &std::fs::DirEntry) -> bool {
    entry.metadata().and_then(|m| m.modified()).is_ok_and(|t| {
        SystemTime::now()
            .duration_since(t)
            .is_ok_and(|age| age > KEEP_OTHERS)
    })
}
