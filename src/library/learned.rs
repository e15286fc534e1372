//! The queries tools learned from use, in a library: a new snapshot re-indexes only the tools
//! whose learned queries changed and keeps the tool vectors; in hybrid search each learned
//! query has a vector, computed once and kept beside the tool vectors.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use super::documents::{add_catalog, server_source};
use super::vectors::Semantic;
use super::{Library, SEPARATOR};
use crate::checksum;
use crate::config::ServerConfig;
use crate::learning::{self, Learned};
use crate::search::embed::{EmbedError, Embedder, VectorFile, update_vectors};
use crate::search::{LearnedVectors, SearchError};

impl Library {
    /// The queries tools learned, as this library searches them.
    pub fn learned(&self) -> &Arc<Learned> {
        &self.learned
    }

    /// A new library that searches `learned` queries; `None` when they are this library's.
    /// Only the tools whose learned queries changed are re-indexed (the whole index when a
    /// rebuild is due); tool vectors are kept, and only new learned queries are embedded
    /// (their vectors kept in `store`, see [`learning::vectors_path`]). Blocking when a query
    /// is embedded: run it off the request path.
    pub fn with_learned(
        &self,
        servers: &[ServerConfig],
        learned: Arc<Learned>,
        store: Option<&Path>,
    ) -> Result<Option<Self>, SearchError> {
        let changed = self.learned.changed(&learned);
        if changed.is_empty() {
            return Ok(None);
        }
        let touched: BTreeSet<&str> = changed
            .iter()
            .filter_map(|tool| tool.split_once(SEPARATOR).map(|(server, _)| server))
            .collect();
        let mut sources = self.sources.clone();
        let mut docs = Vec::new();
        for server in touched {
            let (Some(config), Some(catalog)) = (
                servers.iter().find(|s| s.name == server),
                self.catalogs.get(server),
            ) else {
                continue;
            };
            let mut entries = BTreeMap::new();
            let mut server_docs = Vec::new();
            let tools = catalog.tool_defs();
            add_catalog(
                &mut entries,
                Some(&mut server_docs),
                config,
                tools,
                &learned,
            );
            docs.extend(server_docs.into_iter().filter(|d| changed.contains(&d.key)));
            if let Some(source) = sources.get_mut(server) {
                let file = checksum::of(catalog.text().as_bytes());
                *source = server_source(config, &file, &learned);
            }
        }
        let library = match self.index.replace_tools(docs)? {
            Some(index) => Self {
                entries: self.entries.clone(),
                catalogs: self.catalogs.clone(),
                skills: self.skills.clone(),
                builtin: self.builtin.clone(),
                index,
                sources,
                saved: AtomicBool::new(false),
                records: Default::default(),
                learned,
                semantic: OnceLock::new(),
            },
            None => self.rebuilt(servers, self.catalogs.clone(), sources, learned)?,
        };
        if let Some(semantic) = self.semantic.get() {
            library.carry(semantic, self.index.keys(), store);
        }
        Ok(Some(library))
    }

    /// Takes `old`'s model and tool vectors (rows reordered from `old_keys` to this index's),
    /// with vectors for this library's learned queries.
    fn carry(&self, old: &Semantic, old_keys: &[String], store: Option<&Path>) {
        let vectors = old.vectors.reordered(old_keys, self.index.keys());
        let learned = self
            .learned_vectors(&old.embedder, vectors.dim, store, Some(&old.learned))
            .unwrap_or_else(|e| {
                tracing::warn!("learned queries not embedded, searched by their words only: {e}");
                LearnedVectors::default()
            });
        let _ = self.semantic.set(Semantic {
            embedder: old.embedder.clone(),
            vectors,
            learned,
        });
    }

    /// The vectors of this library's learned queries: taken from `previous` or the vector
    /// file in `store` where they are there, embedded otherwise (and the file updated).
    pub(super) fn learned_vectors(
        &self,
        embedder: &Embedder,
        dim: usize,
        store: Option<&Path>,
        previous: Option<&LearnedVectors>,
    ) -> Result<LearnedVectors, EmbedError> {
        // Each learned query with the tools it led to.
        let mut tools_of: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (tool, learned) in self.learned.tools() {
            for query in &learned.queries {
                tools_of.entry(query).or_default().push(tool);
            }
        }
        if tools_of.is_empty() {
            return Ok(LearnedVectors::default());
        }
        let path = store.map(learning::vectors_path);
        let file = match &path {
            Some(p) => VectorFile::load(p)
                .inspect_err(|e| tracing::warn!("{e}; learned queries are embedded again"))
                .ok()
                .flatten(),
            None => None,
        };
        let mut old = file.clone().unwrap_or_default();
        if let Some(previous) = previous {
            let model = embedder.model_id();
            if old.model.is_empty() {
                old.model = model.to_owned();
            }
            for (text, vector) in previous.vectors() {
                if old.model == model && !old.vectors.contains_key(text) {
                    let hash = crate::search::embed::text_hash(text);
                    old.dim = vector.len();
                    old.vectors.insert(text.to_owned(), (hash, vector));
                }
            }
        }
        let texts: Vec<(String, String)> = tools_of
            .keys()
            .map(|t| ((*t).to_owned(), (*t).to_owned()))
            .collect();
        let (fresh, embedded) = update_vectors(Some(old), &texts, embedder.model_id(), |t| {
            embedder.embed_documents(t)
        })?;
        if let Some(p) = &path
            && (embedded > 0 || file.as_ref().map(|f| f.vectors.len()) != Some(fresh.vectors.len()))
            && let Err(e) = fresh.save(p)
        {
            tracing::warn!("{e}; learned queries will be embedded again next time");
        }
        let by_text: HashMap<&str, &[f32]> = fresh
            .vectors
            .iter()
            .map(|(text, (_, v))| (text.as_str(), v.as_slice()))
            .collect();
        Ok(LearnedVectors::new(
            dim,
            self.index.keys(),
            tools_of
                .into_iter()
                .map(|(text, tools)| (text, by_text.get(text).copied(), tools)),
        ))
    }
}
