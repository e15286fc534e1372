//! Tool vectors for hybrid search: the embedding model the settings ask for, and the vectors
//! of a library's tools, reused from and saved to vector files beside the catalogs.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use super::Library;
use crate::config::{EMBEDDINGS_ENV, Settings};
use crate::search::LearnedVectors;
use crate::search::embed::{self, DocVectors, EmbedError, Embedder, VectorFile};

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
    /// Of those, tools embedded now (the rest came from vector files).
    pub embedded: usize,
}

impl Library {
    /// Whether searches use tool vectors.
    pub fn is_hybrid(&self) -> bool {
        self.index.options().embeddings && self.semantic.get().is_some()
    }

    /// Computes the tool vectors with `embedder`, reusing and updating the vector file of each
    /// catalog's server in `store` (`<store>/<server>.vectors`; built-in tools and skills in
    /// `<store>/.<server>.vectors`), so a tool is embedded again only when its text changes,
    /// and the vectors of the learned queries (`<store>/.learned/queries.vectors`). Blocking
    /// and slow for big catalogs: run it off the request path.
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

    /// Like [`Self::embed`], unless more than `most` tools lack a stored vector: then nothing is
    /// done (`None`) and the caller embeds them elsewhere. With `most` small this is cheap (the
    /// vector files are read, a few tools embedded), so a server can be hybrid from its first
    /// search when `index` wrote the vectors.
    pub fn embed_within(
        &self,
        embedder: Arc<Embedder>,
        store: Option<&Path>,
        most: usize,
    ) -> Result<Option<EmbedStats>, EmbedError> {
        let mut by_server: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
        for entry in self.entries.values() {
            let def = &entry.def;
            let title = def.title.as_deref().unwrap_or_default();
            by_server.entry(entry.server.as_str()).or_default().push((
                entry.qualified.clone(),
                embed::tool_text(&def.name, title, &def.description()),
            ));
        }
        // The stored vectors of each server first, to count what is missing.
        let mut servers = Vec::with_capacity(by_server.len());
        let mut missing = 0;
        for (server, tools) in by_server {
            // Built-in tools and skills have no catalog: their file is hidden, so it cannot
            // be a server's.
            let file = if self.catalogs.contains_key(server) {
                format!("{server}.vectors")
            } else {
                format!(".{server}.vectors")
            };
            let path = store.map(|dir| dir.join(file));
            let old = path.as_deref().and_then(|p| {
                VectorFile::load(p)
                    .inspect_err(|e| tracing::warn!("{e}; its tools are embedded again"))
                    .ok()
                    .flatten()
            });
            missing += embed::missing(old.as_ref(), &tools, embedder.model_id());
            servers.push((path, old, tools));
        }
        if missing > most {
            return Ok(None);
        }
        let mut stats = EmbedStats::default();
        let mut all: HashMap<String, Vec<f32>> = HashMap::with_capacity(self.entries.len());
        let mut dim = 0;
        for (path, old, tools) in servers {
            let old_len = old.as_ref().map(|f| f.vectors.len());
            let (file, embedded) =
                embed::update_vectors(old, &tools, embedder.model_id(), |texts| {
                    embedder.embed_documents(texts)
                })?;
            if let Some(p) = &path
                && (embedded > 0 || old_len != Some(file.vectors.len()))
                && let Err(e) = file.save(p)
            {
                tracing::warn!("{e}; vectors will be computed again next time");
            }
            stats.embedded += embedded;
            stats.tools += file.vectors.len();
            dim = dim.max(file.dim);
            all.extend(file.vectors.into_iter().map(|(k, (_, v))| (k, v)));
        }
        let vectors = DocVectors::new(dim, self.index.keys(), &all);
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
}
