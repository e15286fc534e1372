//! Tool vectors for hybrid search: the embedding model the settings ask for, and the vectors
//! of a library's tools, reused from and saved to vector files beside the catalogs.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Library;
use crate::config::{EMBEDDINGS_ENV, Settings};
use crate::search::LearnedVectors;
use crate::search::embed::{
    self, DocVectors, EmbedError, Embedder, QuantizedRow, VectorFile, VectorTable,
};

/// The vector table's file in the catalog directory (hidden: it is no server's).
pub const TABLE_FILE: &str = ".tool-vectors";
/// Texts embedded per call: the f32 vectors of one chunk are held until quantized.
const EMBED_CHUNK: usize = 1024;

/// The embedding model `settings` ask for, loaded from `settings.embed_dir`; `None` (BM25
/// only) when embeddings are off, the build has none, or the model cannot be loaded, which is
/// said in one warning line.
pub fn embedder(settings: &Settings) -> Option<Arc<Embedder>> {
    if !settings.embeddings {
        tracing::info!(
            "hybrid search is off ({EMBEDDINGS_ENV} or metaServer.search.embeddings); BM25 only"
        );
        return None;
    }
    let started = crate::clock::Instant::now();
    match Embedder::load(&settings.embed_dir) {
        Ok(e) => {
            tracing::info!(dir = %settings.embed_dir.display(), took = ?started.elapsed(), "embedding model loaded");
            Some(Arc::new(e))
        }
        Err(e @ EmbedError::NotBuilt) => {
            tracing::info!("{e}");
            None
        }
        Err(e) => {
            tracing::warn!("search is BM25 only: {e}");
            None
        }
    }
}

pub(super) struct Semantic {
    pub(super) embedder: Arc<Embedder>,
    pub(super) vectors: DocVectors,
    /// The learned queries' vectors (see `learned.rs`).
    pub(super) learned: LearnedVectors,
}

/// What [`Library::embed`] did.
#[derive(Debug, Default, PartialEq)]
pub struct EmbedStats {
    /// Tools with a vector.
    pub tools: usize,
    /// Distinct texts embedded now (the other tools' vectors were stored, or shared with a
    /// tool of the same text).
    pub embedded: usize,
}

impl Library {
    /// Whether searches use tool vectors.
    pub fn is_hybrid(&self) -> bool {
        self.index.options().embeddings && self.semantic.get().is_some()
    }

    /// Computes the tool vectors with `embedder`, reusing and updating the vector table in
    /// `store` (`<store>/.tool-vectors`, keyed by text: a text already there, or shared with
    /// another tool, is not embedded again), and the vectors of the learned queries
    /// (`<store>/.learned/queries.vectors`). Vectors of format 1 files (`<server>.vectors`,
    /// `.<server>.vectors`) of tools the table lacks are carried into it, then the files
    /// removed. Blocking and slow for big catalogs: run it off the request path.
    /// A vector file that cannot be read or written is a warning, not an error.
    pub fn embed(
        &self,
        embedder: Arc<Embedder>,
        store: Option<&Path>,
    ) -> Result<EmbedStats, EmbedError> {
        Ok(self
            .embed_within(embedder, store, usize::MAX)?
            .unwrap_or_default())
    }

    /// Like [`Self::embed`], unless more than `most` distinct texts lack a stored vector: then
    /// nothing is done (`None`) and the caller embeds them elsewhere. With `most` small this
    /// is cheap (the table is mapped, a few texts embedded), so a server can be hybrid from
    /// its first search when `index` wrote the vectors.
    pub fn embed_within(
        &self,
        embedder: Arc<Embedder>,
        store: Option<&Path>,
        most: usize,
    ) -> Result<Option<EmbedStats>, EmbedError> {
        let model = embedder.model_id();
        // Each tool's text hash; each distinct text once.
        let mut hash_of: HashMap<&str, u64> = HashMap::with_capacity(self.entries.len());
        let mut texts: HashMap<u64, String> = HashMap::new();
        for entry in self.entries.values() {
            let def = &entry.def;
            let title = def.title.as_deref().unwrap_or_default();
            let text = embed::tool_text(&def.name, title, &def.description());
            let hash = embed::text_hash(&text);
            hash_of.insert(entry.qualified.as_str(), hash);
            texts.entry(hash).or_insert(text);
        }
        let path = store.map(|dir| dir.join(TABLE_FILE));
        let table = path
            .as_deref()
            .and_then(|p| {
                VectorTable::open(p)
                    .inspect_err(|e| tracing::warn!("{e}; its tools are embedded again"))
                    .ok()
                    .flatten()
            })
            .filter(|t| t.model() == model);
        let stored = |hash: u64| table.as_ref().and_then(|t| t.find(hash));
        let mut missing: Vec<u64> = texts
            .keys()
            .copied()
            .filter(|&h| stored(h).is_none())
            .collect();
        missing.sort_unstable();
        // Vectors the table lacks from format 1 files, once: the files are removed when the
        // table is saved, every server's (a copy's texts may all be found in another's).
        let (carried, old_files) = match store {
            Some(dir) if !missing.is_empty() => {
                let servers: BTreeSet<&str> =
                    self.entries.values().map(|e| e.server.as_str()).collect();
                self.carry_format_1(dir, &servers, &missing, model)
            }
            _ => (HashMap::new(), Vec::new()),
        };
        missing.retain(|h| !carried.contains_key(h));
        if missing.len() > most {
            return Ok(None);
        }
        let mut fresh: Vec<(u64, QuantizedRow)> = Vec::with_capacity(missing.len());
        // In chunks, so a big catalog's f32 vectors are never all held at once.
        for chunk in missing.chunks(EMBED_CHUNK) {
            let batch: Vec<String> = chunk.iter().map(|h| texts[h].clone()).collect();
            let vectors = embedder.embed_documents(&batch)?;
            fresh.extend(
                chunk
                    .iter()
                    .zip(&vectors)
                    .map(|(&h, v)| (h, QuantizedRow::of(v))),
            );
        }
        let embedded = fresh.len();
        let dim = fresh
            .first()
            .map(|(_, r)| r.row.len())
            .or_else(|| carried.values().next().map(|r| r.row.len()))
            .or_else(|| table.as_ref().map(VectorTable::dim))
            .unwrap_or_default();
        // The table keeps exactly the texts of this library's tools.
        let unchanged = fresh.is_empty()
            && carried.is_empty()
            && table.as_ref().is_some_and(|t| t.len() == texts.len());
        let table = match table {
            Some(t) if unchanged => t,
            old => {
                let kept = old.iter().flat_map(|t| {
                    (0..t.len())
                        .filter(|&i| texts.contains_key(&t.hash(i)))
                        .map(move |i| (t.hash(i), t.quantized(i)))
                });
                let table = VectorTable::new(model, dim, kept.chain(carried).chain(fresh));
                match &path {
                    Some(p) => match table.save(p) {
                        Ok(()) => {
                            remove_format_1(&old_files);
                            // Mapped: the rows live in the page cache, not on the heap.
                            VectorTable::open(p).ok().flatten().unwrap_or(table)
                        }
                        Err(e) => {
                            tracing::warn!("{e}; vectors will be computed again next time");
                            table
                        }
                    },
                    None => table,
                }
            }
        };
        let table = Arc::new(table);
        let vectors = DocVectors::of_table(
            table.clone(),
            self.index
                .keys()
                .iter()
                .map(|key| hash_of.get(key.as_str()).and_then(|&h| table.find(h))),
        );
        let stats = EmbedStats {
            tools: vectors.with_vector(),
            embedded,
        };
        let learned = self
            .learned_vectors(&embedder, dim, store, None)
            .unwrap_or_else(|e| {
                tracing::warn!("learned queries not embedded, searched by their words only: {e}");
                LearnedVectors::default()
            });
        let _ = self.semantic.set(Semantic {
            embedder,
            vectors,
            learned,
        });
        Ok(Some(stats))
    }

    /// The vectors of `model` for the texts `wanted` (hashes, sorted) found in the format 1
    /// files of `servers` in `dir`, quantized, and the files read.
    fn carry_format_1(
        &self,
        dir: &Path,
        servers: &BTreeSet<&str>,
        wanted: &[u64],
        model: &str,
    ) -> (HashMap<u64, QuantizedRow>, Vec<PathBuf>) {
        let mut carried = HashMap::new();
        let mut files = Vec::new();
        for server in servers {
            // Built-in tools and skills have no catalog: their file was hidden.
            let name = if self.catalogs.contains_key(*server) {
                format!("{server}.vectors")
            } else {
                format!(".{server}.vectors")
            };
            let path = dir.join(name);
            let file = match VectorFile::load(&path) {
                Ok(Some(file)) => file,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!("{e}; its tools are embedded again");
                    files.push(path);
                    continue;
                }
            };
            if file.model == model {
                for (hash, v) in file.vectors.values() {
                    if wanted.binary_search(hash).is_ok() {
                        carried.entry(*hash).or_insert_with(|| QuantizedRow::of(v));
                    }
                }
            }
            files.push(path);
        }
        if !files.is_empty() {
            tracing::info!(
                files = files.len(),
                vectors = carried.len(),
                "vector files of format 1 carried into {TABLE_FILE}; they are removed once it is saved"
            );
        }
        (carried, files)
    }
}

/// Removes the format 1 files whose vectors the saved table now holds.
fn remove_format_1(files: &[PathBuf]) {
    for file in files {
        if let Err(e) = std::fs::remove_file(file) {
            tracing::warn!(file = %file.display(), "vector file of format 1 not removed: {e}");
        }
    }
}
