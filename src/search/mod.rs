//! Tool search: a tantivy BM25 index over names, titles, descriptions, parameters and server
//! text, with identifier splitting and English stemming, optionally fused with tool vectors.
//! Knows nothing of MCP transport.
//!
//! `schema.rs` builds the index, `query.rs` turns a query into weighted words and a tantivy
//! query, `rank.rs` ranks (BM25, names first, fusion), `names.rs` finds names a typo away,
//! `confidence.rs` says whether the best hit answers the query.

mod confidence;
pub mod embed;
mod feedback;
pub mod fusion;
mod learned;
pub mod metrics;
mod named;
mod names;
mod options;
mod query;
mod rank;
mod saved;
mod schema;
mod servers;
mod stats;
mod synonyms;
mod tables;
mod tokenizer;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Index, IndexReader, ReloadPolicy, Searcher, Term};

use schema::Fields;
use tables::Tables;

pub use confidence::{
    CONFIDENT_COVERAGE, CONFIDENT_SHARED_COVERAGE, CONFIDENT_SIMILARITY, confident,
};
pub use embed::DocVectors;
pub use learned::LearnedVectors;
pub use names::{close_qualified, closest};
pub use options::{Combine, Fusion, SearchOptions, ServerScore, StopWords};
pub use saved::SavedError;
pub use tokenizer::{split_words, words_of};

/// The server whose tools are meta-server's own (reading stored results, Code Mode).
use crate::config::RESERVED_SERVER as HELPER_SERVER;

/// Errors from the search engine (index build or query execution).
#[derive(Debug, thiserror::Error)]
#[error("search index: {0}")]
pub struct SearchError(#[from] tantivy::TantivyError);

/// One searchable tool. `key` is its unique (qualified) name.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDoc {
    pub key: String,
    pub server: String,
    pub name: String,
    pub title: String,
    pub description: String,
    /// Parameter names and their descriptions (the library cuts example values, see EVAL.md).
    pub params: String,
    /// Server name, display key and description.
    pub server_text: String,
    /// Queries that led to this tool before (search that learns from use), one per line;
    /// empty for most tools. Searched, never shown.
    pub learned: String,
}

/// A ranked result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub key: String,
    pub score: f32,
    /// Share (0..=1) of the query's weight this tool matches: the summed IDF of the query words
    /// found in any of its fields over the summed IDF of all query words, but argument values
    /// no tool has (a name, a number, a path: "Tokyo"). 1 for exact names.
    pub coverage: f32,
    /// How many distinct query words this tool has (in any field).
    pub words: usize,
    /// The query is this tool's name or qualified name.
    pub exact: bool,
    /// The query is one word and no tool's name (written like an identifier, or matching no
    /// tool's words well), but this tool's name is a typo away or the query names it on
    /// another server (did-you-mean). Such hits come first.
    pub close: bool,
    /// Cosine of the query's vector with this tool's, in hybrid search.
    pub similarity: Option<f32>,
}

/// An in-memory BM25 index over a set of tools. Immutable: [`Self::replace_server`] returns
/// a new version that shares the tantivy index, while searches on this one go on unchanged.
pub struct SearchIndex {
    index: Index,
    reader: IndexReader,
    /// This version's view of the index.
    searcher: Searcher,
    /// The newest version of this index; only that one may be updated.
    generation: Arc<AtomicU64>,
    version: u64,
    /// The documents' analyzer, reused for queries.
    analyzer: TextAnalyzer,
    /// The same without stemming, for the surface field (`Fields::surface`).
    surface: TextAnalyzer,
    /// Synonyms of query words, analyzed like them.
    synonyms: Arc<synonyms::Synonyms>,
    /// Ordinals of meta-server's own tools (server [`HELPER_SERVER`]), ranked down by
    /// [`SearchOptions::helpers`].
    helpers: Vec<u32>,
    fields: Fields,
    options: SearchOptions,
    tables: Tables,
    /// Each server's words, for [`SearchOptions::server_evidence`] (empty when that is 0).
    servers: Arc<servers::Servers>,
    /// Live tools with learned queries: without any, the learned field is not searched.
    learned_docs: usize,
    /// Each server's name as words, for [`SearchOptions::named_servers`].
    server_names: Arc<named::ServerNames>,
}

impl SearchIndex {
    /// Builds the index with the default options.
    pub fn build(docs: Vec<ToolDoc>) -> Result<Self, SearchError> {
        Self::build_with(docs, SearchOptions::default())
    }

    /// Builds the index; documents are added in key order so equal input gives equal output.
    pub fn build_with(mut docs: Vec<ToolDoc>, options: SearchOptions) -> Result<Self, SearchError> {
        docs.sort_by(|a, b| a.key.cmp(&b.key));
        let name_parts = if options.decompound {
            names::decompound_names(&docs)
        } else {
            vec![String::new(); docs.len()]
        };
        let (definition, fields) = schema::schema(&options);
        let index = Index::create_in_ram(definition);
        let (mut analyzer, surface) = schema::register_analyzers(&index, &options);
        let mut tables = Tables::default();
        schema::commit_docs(
            &index,
            Vec::new(),
            &fields,
            &mut analyzer,
            &mut tables,
            &docs,
            &name_parts,
        )?;
        Ok(Self::open(
            index,
            (analyzer, surface),
            fields,
            options,
            tables,
        )?)
    }

    /// The first version of an index whose documents are committed and described by `tables`.
    fn open(
        index: Index,
        (analyzer, surface): (TextAnalyzer, TextAnalyzer),
        fields: Fields,
        options: SearchOptions,
        tables: Tables,
    ) -> Result<Self, tantivy::TantivyError> {
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let searcher = reader.searcher();
        // Each server's words and names, one on another thread (10% of a 100k start's CPU).
        let (servers, server_names) = std::thread::scope(|scope| {
            let servers = scope.spawn(|| servers::Servers::of(&tables, &options));
            let names = named::ServerNames::of(&tables, &analyzer, options.named_servers);
            let servers = servers
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (servers, Arc::new(names))
        });
        Ok(Self {
            index,
            reader,
            searcher,
            generation: Arc::new(AtomicU64::new(0)),
            version: 0,
            synonyms: Arc::new(synonyms::Synonyms::new(&analyzer)),
            helpers: tables.ords_of(HELPER_SERVER),
            servers,
            learned_docs: tables.learned_live(),
            server_names,
            analyzer,
            surface,
            fields,
            options,
            tables,
        })
    }

    /// A new version in which `docs` replace the documents of `server`, updating that
    /// server's postings only. `None` when a full [`Self::build_with`] is due instead: removed
    /// documents would exceed a quarter of the ordinals (they still count in tantivy's BM25
    /// statistics until a rebuild drops them), names are decompounded over the whole catalog,
    /// or this is not the newest version.
    pub fn replace_server(
        &self,
        server: &str,
        docs: Vec<ToolDoc>,
    ) -> Result<Option<Self>, SearchError> {
        self.replace_servers(vec![(server.to_owned(), docs)])
    }

    /// [`Self::replace_server`] for several servers in one commit (an empty list of documents
    /// removes a server).
    pub fn replace_servers(
        &self,
        changes: Vec<(String, Vec<ToolDoc>)>,
    ) -> Result<Option<Self>, SearchError> {
        let removed: usize = changes
            .iter()
            .map(|(server, _)| self.tables.ords_of(server).len())
            .sum();
        let mut deletes = Vec::with_capacity(changes.len());
        let mut docs = Vec::new();
        let mut servers = Vec::with_capacity(changes.len());
        for (server, server_docs) in changes {
            deletes.push(Term::from_field_text(self.fields.server, &server));
            docs.extend(server_docs);
            servers.push(server);
        }
        self.replace(removed, deletes, docs, |tables| {
            for server in &servers {
                tables.remove_server(server);
            }
        })
    }

    /// A new version in which each of `docs` replaces the document with its key (if there is
    /// one): the tools whose learned queries changed are re-indexed alone. `None` when a full
    /// build is due instead (see [`Self::replace_server`]).
    pub fn replace_tools(&self, docs: Vec<ToolDoc>) -> Result<Option<Self>, SearchError> {
        let keys: Vec<String> = docs
            .iter()
            .filter(|d| self.tables.ord_of(&d.key).is_some())
            .map(|d| d.key.clone())
            .collect();
        let deletes = keys
            .iter()
            .map(|k| Term::from_field_text(self.fields.key, k))
            .collect();
        self.replace(keys.len(), deletes, docs, |tables| {
            tables.remove_keys(keys.iter().map(String::as_str));
        })
    }

    /// The new version where the documents matching `deletes` (`removed` of them, which
    /// `forget` drops from the tables) are replaced by `docs`; `None` when a full build is due.
    fn replace(
        &self,
        removed: usize,
        deletes: Vec<Term>,
        mut docs: Vec<ToolDoc>,
        forget: impl FnOnce(&mut Tables),
    ) -> Result<Option<Self>, SearchError> {
        let removed = self.tables.removed() + removed;
        let ordinals = self.tables.keys.len() + docs.len();
        if self.options.decompound
            || removed * 4 > ordinals
            || self
                .generation
                .compare_exchange(self.version, self.version + 1, SeqCst, SeqCst)
                .is_err()
        {
            return Ok(None);
        }
        let mut tables = self.tables.clone();
        forget(&mut tables);
        docs.sort_by(|a, b| a.key.cmp(&b.key));
        let mut analyzer = self.analyzer.clone();
        schema::commit_docs(
            &self.index,
            deletes,
            &self.fields,
            &mut analyzer,
            &mut tables,
            &docs,
            &vec![String::new(); docs.len()],
        )?;
        self.reader.reload()?;
        let server_names = Arc::new(named::ServerNames::of(
            &tables,
            &analyzer,
            self.options.named_servers,
        ));
        Ok(Some(Self {
            server_names,
            index: self.index.clone(),
            reader: self.reader.clone(),
            searcher: self.reader.searcher(),
            generation: self.generation.clone(),
            version: self.version + 1,
            analyzer,
            surface: self.surface.clone(),
            synonyms: self.synonyms.clone(),
            helpers: tables.ords_of(HELPER_SERVER),
            servers: servers::Servers::of(&tables, &self.options),
            learned_docs: tables.learned_live(),
            fields: self.fields.clone(),
            options: self.options.clone(),
            tables,
        }))
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.tables.live
    }

    pub fn is_empty(&self) -> bool {
        self.tables.live == 0
    }

    /// Top `limit` tools for `query`, optionally only from `server`. Ties are broken by key.
    ///
    /// A query that is exactly a tool name or qualified name puts those tools first.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        server: Option<&str>,
    ) -> Result<Vec<Hit>, SearchError> {
        self.rank(query, limit, server, None)
    }

    /// Like [`Self::search`], fusing the BM25 ranking with the cosine ranking of `vectors`
    /// (rows in document order, see [`Self::keys`]) against `query_vector`, as
    /// [`SearchOptions::fusion`] says; a tool's cosine is lifted toward the query's with the
    /// queries that led to it before (`learned`, [`SearchOptions::learned_vector`]). Exact
    /// names still come first.
    pub fn search_hybrid(
        &self,
        query: &str,
        query_vector: &[f32],
        vectors: &DocVectors,
        learned: Option<&LearnedVectors>,
        limit: usize,
        server: Option<&str>,
    ) -> Result<Vec<Hit>, SearchError> {
        self.rank(query, limit, server, Some((query_vector, vectors, learned)))
    }

    /// Tool keys by document ordinal; removed tools are empty strings.
    pub fn keys(&self) -> &[String] {
        &self.tables.keys
    }

    pub fn options(&self) -> &SearchOptions {
        &self.options
    }
}

#[cfg(test)]
mod tests;
