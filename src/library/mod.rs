//! The searchable set of upstream tools: catalogs of the configured servers, keyed by qualified
//! name, with the search index over them. Immutable: a changed catalog gives a new library
//! ([`Library::with_catalog`]) that the server swaps in.

mod entry;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, btree_map};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, OnceLock};

use crate::catalog::{Catalog, CatalogError, ToolDef};
use crate::checksum::{self, Checksum, hex};
use crate::config::{EMBEDDINGS_ENV, SKILL_SERVER, ServerConfig, Settings};
use crate::search::embed::{self, DocVectors, EmbedError, Embedder, VectorFile};
use crate::search::{Hit, SavedError, SearchError, SearchIndex, SearchOptions, ToolDoc};
use crate::skills::Skill;

pub use entry::{Entry, SEPARATOR, qualified_name};

/// Longest text compared with tool names for suggestions (MCP tool names have at most 128).
const MAX_SUGGESTED_LEN: usize = 256;

/// How the built-in tools' server is described to search.
const BUILTIN_ABOUT: &str = "meta-server built-in tools";

/// Where the search index is saved, inside the catalog dir.
pub const INDEX_DIR: &str = ".index";

/// The saved search index of the catalogs in `catalog_dir`.
pub fn index_dir(catalog_dir: &Path) -> PathBuf {
    catalog_dir.join(INDEX_DIR)
}

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
    let started = std::time::Instant::now();
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

/// What loading the catalogs found.
#[derive(Default)]
pub struct LoadReport {
    /// Servers with no usable catalog: to be indexed.
    pub missing: Vec<String>,
    /// Problems worth telling the user (corrupt or newer catalogs).
    pub warnings: Vec<String>,
}

/// All tools of the configured servers that have catalogs.
pub struct Library {
    pub entries: BTreeMap<String, Arc<Entry>>,
    pub catalogs: BTreeMap<String, Catalog>,
    pub skills: Vec<Arc<Skill>>,
    /// meta-server's own tools, indexed like a server's catalog (see [`Self::load`]).
    builtin: Option<Catalog>,
    pub index: SearchIndex,
    /// What the index was built from: per source (server, built-in tools, skills) a hash of
    /// its catalog file and the config that shapes its documents. Empty: not saved.
    sources: BTreeMap<String, String>,
    /// Whether the saved index is this library's.
    saved: AtomicBool,
    /// The model and the tool vectors once [`Self::embed`] has run; until then BM25 only.
    semantic: OnceLock<Semantic>,
}

struct Semantic {
    embedder: Arc<Embedder>,
    vectors: DocVectors,
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
    /// Loads the catalog of every configured server from the catalog dir, plus the skills and
    /// `builtin`, the catalog of tools meta-server serves itself (the server's `meta` tools).
    /// The search index is the one saved beside the catalogs when there is one, with the
    /// servers whose catalog or config changed since re-indexed; a saved index that cannot be
    /// used is a warning and a rebuild (see [`Self::save_index`]).
    pub fn load(
        settings: &Settings,
        builtin: Option<&Catalog>,
    ) -> Result<(Self, LoadReport), SearchError> {
        let mut report = LoadReport::default();
        let options = SearchOptions::default();
        // The saved index and the skills are read while the catalogs are.
        let (reads, (skills, saved)) = read_catalogs(settings, || {
            let skills = crate::skills::discover(&settings.skills_dirs);
            let saved = SearchIndex::open_saved(&index_dir(&settings.catalog_dir), &options);
            (skills, saved)
        });
        let mut catalogs = BTreeMap::new();
        let mut sources = BTreeMap::new();
        let mut defs = BTreeMap::new();
        for (server, read) in settings.servers.iter().zip(reads) {
            match read {
                Ok(Some((catalog, source, tools))) => {
                    catalogs.insert(server.name.clone(), catalog);
                    sources.insert(server.name.clone(), source);
                    defs.insert(server.name.clone(), tools);
                }
                Ok(None) => report.missing.push(server.name.clone()),
                Err(e @ CatalogError::NewerFormat { .. }) => report.warnings.push(e.to_string()),
                Err(e) => {
                    report
                        .warnings
                        .push(format!("{e}; it will be indexed again"));
                    report.missing.push(server.name.clone());
                }
            }
        }
        let (skills, warnings) = skills;
        report.warnings.extend(warnings);
        let skills: Vec<Arc<Skill>> = skills.into_iter().map(Arc::new).collect();
        let builtin = builtin.cloned();
        if let Some(builtin) = &builtin {
            sources.insert(builtin.server.clone(), builtin_source(builtin));
        }
        if !skills.is_empty() {
            sources.insert(SKILL_SERVER.to_owned(), skills_source(&skills));
        }
        let saved = saved.unwrap_or_else(|e| {
            report
                .warnings
                .push(format!("{e}; it is rebuilt from the catalogs"));
            None
        });
        // The saved index, with the sources that changed since re-indexed: (entries, index,
        // whether it is still the saved one). `None` when it cannot be used.
        let reused = saved.and_then(|(index, saved_sources)| {
            let changed: BTreeSet<String> = sources
                .keys()
                .chain(saved_sources.keys())
                .filter(|s| sources.get(*s) != saved_sources.get(*s))
                .cloned()
                .collect();
            let parts = Parts::assemble(
                &settings.servers,
                &catalogs,
                std::mem::take(&mut defs),
                builtin.as_ref(),
                &skills,
                |server| changed.contains(server),
            );
            if changed.is_empty() {
                return Some((parts.entries, index, true));
            }
            let mut by_server: BTreeMap<String, Vec<ToolDoc>> =
                changed.iter().map(|s| (s.clone(), Vec::new())).collect();
            for doc in parts.docs {
                if let Some(docs) = by_server.get_mut(&doc.server) {
                    docs.push(doc);
                }
            }
            tracing::info!(
                changed = changed.len(),
                "saved search index: re-indexing the servers whose catalog or config changed"
            );
            // Any failure here is the saved index's: build from the catalogs instead.
            let index = index
                .replace_servers(by_server.into_iter().collect())
                .unwrap_or_else(|e| {
                    report
                        .warnings
                        .push(format!("{e}; it is rebuilt from the catalogs"));
                    None
                })?;
            Some((parts.entries, index, false))
        });
        let library = match reused {
            Some((entries, index, saved)) => Self {
                entries,
                catalogs,
                skills,
                builtin,
                index,
                sources,
                saved: AtomicBool::new(saved),
                semantic: OnceLock::new(),
            },
            None => Self::build_from(&settings.servers, catalogs, defs, builtin, skills, options)?
                .with_sources(sources),
        };
        Ok((library, report))
    }

    /// This library with the hashes of its sources, so [`Self::save_index`] saves it.
    fn with_sources(self, sources: BTreeMap<String, String>) -> Self {
        Self {
            sources,
            saved: AtomicBool::new(false),
            ..self
        }
    }

    /// Saves the search index in the catalog dir (see [`index_dir`]) unless it is saved
    /// already, so the next start reads it instead of building it. Nothing to do for a library
    /// not loaded from a catalog dir or without catalogs, or when a newer version of the index
    /// exists.
    pub fn save_index(&self, catalog_dir: &Path) -> Result<(), SavedError> {
        if self.catalogs.is_empty() || self.sources.is_empty() || self.saved.load(SeqCst) {
            return Ok(());
        }
        let started = std::time::Instant::now();
        if self.index.save(&index_dir(catalog_dir), &self.sources)? {
            self.saved.store(true, SeqCst);
            tracing::debug!(took = ?started.elapsed(), "search index saved");
        }
        Ok(())
    }

    /// Builds entries and the index from `catalogs` (one per server name) alone, with the
    /// default ranking: what `eval` scores, so its numbers describe the catalogs alone.
    pub fn build(
        servers: &[ServerConfig],
        catalogs: BTreeMap<String, Catalog>,
    ) -> Result<Self, SearchError> {
        Self::build_with(
            servers,
            catalogs,
            None,
            Vec::new(),
            SearchOptions::default(),
        )
    }

    /// Like [`Self::build`], with the `builtin` catalog under its own server name, skills
    /// listed under the `skill` server, and the given ranking options.
    pub fn build_with(
        servers: &[ServerConfig],
        catalogs: BTreeMap<String, Catalog>,
        builtin: Option<Catalog>,
        skills: Vec<Arc<Skill>>,
        options: SearchOptions,
    ) -> Result<Self, SearchError> {
        Self::build_from(servers, catalogs, BTreeMap::new(), builtin, skills, options)
    }

    /// Like [`Self::build_with`], with the tools of some catalogs already read (`defs`, by
    /// server name).
    fn build_from(
        servers: &[ServerConfig],
        catalogs: BTreeMap<String, Catalog>,
        defs: BTreeMap<String, Vec<ToolDef>>,
        builtin: Option<Catalog>,
        skills: Vec<Arc<Skill>>,
        options: SearchOptions,
    ) -> Result<Self, SearchError> {
        let parts = Parts::assemble(servers, &catalogs, defs, builtin.as_ref(), &skills, |_| {
            true
        });
        Ok(Self {
            entries: parts.entries,
            catalogs,
            skills,
            builtin,
            index: SearchIndex::build_with(parts.docs, options)?,
            sources: BTreeMap::new(),
            saved: AtomicBool::new(false),
            semantic: OnceLock::new(),
        })
    }

    /// A new library in which `catalog` replaces its server's previous one. Only that server's
    /// search documents are re-indexed, unless the index says a full rebuild is due. Tool
    /// vectors are not carried over: run [`Self::embed`] on the result (unchanged tools come
    /// from the vector files).
    pub fn with_catalog(
        &self,
        servers: &[ServerConfig],
        catalog: Catalog,
    ) -> Result<Self, SearchError> {
        let name = catalog.server.clone();
        let mut sources = self.sources.clone();
        let mut catalogs = self.catalogs.clone();
        catalogs.insert(name.clone(), catalog);
        let Some(config) = servers.iter().find(|s| s.name == name) else {
            return self.rebuilt(servers, catalogs, sources);
        };
        if !sources.is_empty() {
            let text = catalogs[&name].text();
            sources.insert(
                name.clone(),
                server_source(config, &checksum::of(text.as_bytes())),
            );
        }
        let mut added = BTreeMap::new();
        let mut docs = Vec::new();
        add_catalog(
            &mut added,
            Some(&mut docs),
            config,
            catalogs[&name].tool_defs(),
        );
        let Some(index) = self.index.replace_server(&name, docs)? else {
            tracing::debug!(server = %name, "search index rebuilt");
            return self.rebuilt(servers, catalogs, sources);
        };
        tracing::debug!(server = %name, "search index updated for this server only");
        let mut entries = self.entries.clone();
        entries.retain(|_, e| e.server != name);
        entries.extend(added);
        Ok(Self {
            entries,
            catalogs,
            skills: self.skills.clone(),
            builtin: self.builtin.clone(),
            index,
            sources,
            saved: AtomicBool::new(false),
            semantic: OnceLock::new(),
        })
    }

    fn rebuilt(
        &self,
        servers: &[ServerConfig],
        catalogs: BTreeMap<String, Catalog>,
        sources: BTreeMap<String, String>,
    ) -> Result<Self, SearchError> {
        Ok(Self::build_with(
            servers,
            catalogs,
            self.builtin.clone(),
            self.skills.clone(),
            self.index.options().clone(),
        )?
        .with_sources(sources))
    }

    /// Ranked tools for `query`: hybrid (BM25 fused with vectors) once [`Self::embed`] has
    /// run and the options allow it, BM25 alone otherwise or if the query cannot be embedded.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        server: Option<&str>,
    ) -> Result<Vec<Hit>, SearchError> {
        if self.index.options().embeddings
            && let Some(semantic) = self.semantic.get()
        {
            match semantic.embedder.embed_query(query) {
                Ok(v) => {
                    return self
                        .index
                        .search_hybrid(query, &v, &semantic.vectors, limit, server);
                }
                Err(e) => tracing::warn!("query not embedded, BM25 only: {e}"),
            }
        }
        self.index.search(query, limit, server)
    }

    /// Whether searches use tool vectors.
    pub fn is_hybrid(&self) -> bool {
        self.index.options().embeddings && self.semantic.get().is_some()
    }

    /// Computes the tool vectors with `embedder`, reusing and updating the vector file of each
    /// catalog's server in `store` (`<store>/<server>.vectors`); built-in tools and skills are
    /// embedded each time. Blocking and slow for big catalogs: run it off the request path.
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
                embed::tool_text(&def.name, title, &def.description),
            ));
        }
        // The stored vectors of each server first, to count what is missing.
        let mut servers = Vec::with_capacity(by_server.len());
        let mut missing = 0;
        for (server, tools) in by_server {
            let path = store
                .filter(|_| self.catalogs.contains_key(server))
                .map(|dir| dir.join(format!("{server}.vectors")));
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
        let _ = self.semantic.set(Semantic { embedder, vectors });
        Ok(Some(stats))
    }

    /// Whether any entry belongs to `server`.
    pub fn has_server(&self, server: &str) -> bool {
        let prefix = format!("{server}{SEPARATOR}");
        self.entries
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(key, _)| key.starts_with(&prefix))
    }

    /// The tool with this qualified name.
    pub fn get(&self, qualified: &str) -> Option<&Arc<Entry>> {
        self.entries.get(qualified)
    }

    /// Qualified names close to `name` (edit distance or shared words), best first; none for
    /// a name far longer than any tool name (comparing it would take long for nothing).
    ///
    /// Only a one-word `name` is compared letter by letter with every tool name: a sentence
    /// is not a misspelt name, and its words are what the search that follows matches (at 10k
    /// tools the comparison took 10-15 ms).
    pub fn suggestions(&self, name: &str, max: usize) -> Vec<String> {
        if name.len() > MAX_SUGGESTED_LEN {
            return Vec::new();
        }
        let wanted = name.trim().to_lowercase();
        fn lower(s: &str) -> Cow<'_, str> {
            if s.chars().any(char::is_uppercase) {
                Cow::Owned(s.to_lowercase())
            } else {
                Cow::Borrowed(s)
            }
        }
        let mut scored: Vec<(f64, &String)> = if wanted.contains(char::is_whitespace) {
            Vec::new()
        } else {
            self.entries
                .keys()
                .map(|q| {
                    let tool = q.split_once(SEPARATOR).map_or(q.as_str(), |(_, t)| t);
                    let full = strsim::jaro_winkler(&wanted, &lower(q));
                    let tool = strsim::jaro_winkler(&wanted, &lower(tool));
                    (full.max(tool), q)
                })
                .filter(|(score, _)| *score >= 0.75)
                .collect()
        };
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let mut out: Vec<String> = scored
            .into_iter()
            .take(max)
            .map(|(_, q)| q.clone())
            .collect();
        if out.len() < max
            && let Ok(hits) = self.search(name, max, None)
        {
            for hit in hits {
                if out.len() < max && !out.contains(&hit.key) {
                    out.push(hit.key);
                }
            }
        }
        out
    }
}

/// A catalog file read, if there is one: the catalog, its source's hash (see
/// [`server_source`]) and its tools.
type CatalogRead = Result<Option<(Catalog, String, Vec<ToolDef>)>, CatalogError>;

/// Each configured server's catalog file with its source's hash and tools, in config order, read
/// on a few threads while the calling thread runs `meanwhile`: parsing is most of what
/// start-up does with a saved index.
fn read_catalogs<T>(settings: &Settings, meanwhile: impl FnOnce() -> T) -> (Vec<CatalogRead>, T) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let chunk = settings.servers.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let readers: Vec<_> = settings
            .servers
            .chunks(chunk)
            .map(|servers| {
                scope.spawn(|| {
                    servers
                        .iter()
                        .map(|s| {
                            let read = Catalog::read_server(&settings.catalog_dir, &s.name)?;
                            Ok(read.map(|(catalog, sum)| {
                                let tools = catalog.tool_defs();
                                (catalog, server_source(s, &sum), tools)
                            }))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let other = meanwhile();
        let reads = readers
            .into_iter()
            .flat_map(|reader| {
                reader
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect();
        (reads, other)
    })
}

/// Entries of all tools, and the search documents of the sources asked for.
struct Parts {
    entries: BTreeMap<String, Arc<Entry>>,
    docs: Vec<ToolDoc>,
}

impl Parts {
    /// The entries of the configured servers' catalogs, the built-in tools and the skills,
    /// with the search documents of the sources (server names) that `docs_of` accepts. A
    /// catalog's tools are taken from `defs` when they were read already.
    fn assemble(
        servers: &[ServerConfig],
        catalogs: &BTreeMap<String, Catalog>,
        mut defs: BTreeMap<String, Vec<ToolDef>>,
        builtin: Option<&Catalog>,
        skills: &[Arc<Skill>],
        docs_of: impl Fn(&str) -> bool,
    ) -> Self {
        let mut entries = BTreeMap::new();
        let mut docs = Vec::new();
        for server in servers {
            if let Some(catalog) = catalogs.get(&server.name) {
                let tools = defs
                    .remove(&server.name)
                    .unwrap_or_else(|| catalog.tool_defs());
                let docs = docs_of(&server.name).then_some(&mut docs);
                add_catalog(&mut entries, docs, server, tools);
            }
        }
        if let Some(builtin) = builtin {
            let tools = builtin.tool_defs().into_iter();
            let docs = docs_of(&builtin.server).then_some(&mut docs);
            add(&mut entries, docs, &builtin.server, BUILTIN_ABOUT, tools);
        }
        let with_docs = docs_of(SKILL_SERVER);
        for skill in skills {
            let def = serde_json::json!({"name": skill.name, "description": skill.description, "inputSchema": {"type": "object"}});
            let Ok(def) = ToolDef::from_json(&def.into()) else {
                continue;
            };
            let about = format!("agent skill instructions {}", skill.servers.join(" "));
            let docs = with_docs.then_some(&mut docs);
            let qualified = qualified_name(SKILL_SERVER, &def.name);
            let new = !entries.contains_key(&qualified);
            add(
                &mut entries,
                docs,
                SKILL_SERVER,
                &about,
                std::iter::once(def),
            );
            if new && let Some(entry) = entries.get_mut(&qualified).and_then(Arc::get_mut) {
                entry.skill = Some(skill.clone());
            }
        }
        Self { entries, docs }
    }
}

/// How a server's search documents are described: its key and description.
fn about(server: &ServerConfig) -> String {
    format!(
        "{} {}",
        server.key,
        server.description.as_deref().unwrap_or_default()
    )
}

/// The checksum of what a server's documents are made of: its catalog file (`file`), its
/// description and its allow and deny lists.
fn server_source(server: &ServerConfig, file: &Checksum) -> String {
    let (allow, deny) = server.tools.globs();
    let inputs = serde_json::json!([server.name, about(server), allow, deny, hex(file)]);
    hex(&checksum::of(inputs.to_string().as_bytes()))
}

/// The checksum of the built-in tools as search sees them.
fn builtin_source(builtin: &Catalog) -> String {
    let inputs = serde_json::json!([builtin.server, BUILTIN_ABOUT, builtin.tools]);
    hex(&checksum::of(inputs.to_string().as_bytes()))
}

/// The checksum of the skills as search sees them.
fn skills_source(skills: &[Arc<Skill>]) -> String {
    let inputs: Vec<_> = skills
        .iter()
        .map(|s| serde_json::json!([s.name, s.description, s.servers]))
        .collect();
    hex(&checksum::of(
        serde_json::Value::from(inputs).to_string().as_bytes(),
    ))
}

/// Adds the tools of `server`'s catalog (`tools`) that its allow and deny lists let through.
fn add_catalog(
    entries: &mut BTreeMap<String, Arc<Entry>>,
    docs: Option<&mut Vec<ToolDoc>>,
    server: &ServerConfig,
    tools: Vec<ToolDef>,
) {
    let tools = tools
        .into_iter()
        .filter(|def| server.tools.allows(&def.name));
    add(entries, docs, &server.name, &about(server), tools);
}

/// Adds one server's tools as entries, and as search documents to `docs` if given.
fn add(
    entries: &mut BTreeMap<String, Arc<Entry>>,
    mut docs: Option<&mut Vec<ToolDoc>>,
    server: &str,
    about: &str,
    tools: impl Iterator<Item = ToolDef>,
) {
    for def in tools {
        let qualified = qualified_name(server, &def.name);
        let slot = match entries.entry(qualified) {
            btree_map::Entry::Vacant(slot) => slot,
            btree_map::Entry::Occupied(taken) => {
                tracing::warn!(server, tool = %def.name, "two tools map to {}; keeping the first", taken.key());
                continue;
            }
        };
        let qualified = slot.key();
        if let Some(docs) = docs.as_deref_mut() {
            docs.push(ToolDoc {
                key: qualified.clone(),
                server: server.to_owned(),
                name: def.name.clone(),
                title: def.title.clone().unwrap_or_default(),
                description: def.description.clone(),
                // Example values are not what a tool does: "e.g. 'Asia/Tokyo'" in `convert_time`
                // made it the answer to "current time in Tokyo" (EVAL.md).
                params: def
                    .params()
                    .iter()
                    .map(|p| format!("{} {}", p.name, without_examples(&p.description)))
                    .collect::<Vec<_>>()
                    .join(" "),
                server_text: format!("{server} {about}"),
            });
        }
        let entry = Entry::new(qualified.clone(), server.to_owned(), def);
        slot.insert(Arc::new(entry));
    }
}

/// `text` without the example values it gives: a parenthesised part that starts with "e.g.",
/// "eg", "for example", "example" or "such as", and such a phrase outside parentheses up to the
/// end of its sentence.
fn without_examples(text: &str) -> String {
    let starts = |rest: &str| {
        let lower = rest.trim_start().to_lowercase();
        ["e.g", "eg.", "eg,", "for example", "example:", "such as"]
            .iter()
            .any(|p| lower.starts_with(p))
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(inner) = rest.strip_prefix('(')
            && starts(inner)
            && let Some(end) = inner.find(')')
        {
            rest = &inner[end + 1..];
            continue;
        }
        if (out.is_empty() || out.ends_with([' ', ',', ';', ':'])) && starts(rest) {
            // The marker itself may end in a dot ("e.g. main."): look past its first word.
            let skip = rest.trim_start().find(' ').map_or(rest.len(), |i| i + 1);
            let tail = &rest[skip.min(rest.len())..];
            rest = tail.find(". ").map_or("", |i| &tail[i + 1..]);
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::RawTool;

    fn catalog(server: &str, tools: &[&str]) -> Catalog {
        let tools = tools
            .iter()
            .map(|t| RawTool::from(serde_json::json!({"name": t, "description": format!("does {t}"), "inputSchema": {"type": "object"}})))
            .collect();
        Catalog::new(server, tools)
    }

    #[test]
    fn example_values_are_cut_from_parameter_text() {
        assert_eq!(
            without_examples("IANA timezone name (e.g., 'Asia/Tokyo', 'UTC'). Use 'UTC' if unsure"),
            "IANA timezone name . Use 'UTC' if unsure"
        );
        assert_eq!(
            without_examples("Branch name, e.g. main. Defaults to the default branch"),
            "Branch name, Defaults to the default branch"
        );
        assert_eq!(without_examples("First number"), "First number");
        assert_eq!(
            without_examples("an (optional) count"),
            "an (optional) count"
        );
    }

    #[test]
    fn a_new_catalog_gives_the_library_a_full_build_would() {
        let mut servers: Vec<ServerConfig> = ["a", "b", "c"]
            .into_iter()
            .map(ServerConfig::catalog_only)
            .collect();
        servers[0].tools = crate::config::ToolFilter::new(vec![], vec!["secret*".into()]).unwrap();
        let mut catalogs = BTreeMap::new();
        catalogs.insert("a".into(), catalog("a", &["alpha", "beta"]));
        catalogs.insert(
            "b".into(),
            catalog("b", &["bravo", "charlie", "delta", "echo"]),
        );
        catalogs.insert(
            "c".into(),
            catalog("c", &["x1", "x2", "x3", "x4", "x5", "x6"]),
        );
        let library = Library::build(&servers, catalogs.clone()).unwrap();

        let changed = catalog("a", &["alpha", "gamma", "secret_key"]);
        let updated = library.with_catalog(&servers, changed.clone()).unwrap();
        let removed = updated.index.keys().iter().filter(|k| k.is_empty()).count();
        assert_eq!(removed, 2, "only server a was re-indexed");
        catalogs.insert("a".into(), changed);
        let full = Library::build(&servers, catalogs).unwrap();

        let names = |l: &Library| l.entries.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&updated), names(&full));
        assert!(updated.get("a__gamma").is_some() && updated.get("a__beta").is_none());
        assert!(updated.get("a__secret_key").is_none(), "deny list applies");
        assert_eq!(updated.catalogs, full.catalogs);
        let top = |l: &Library, q: &str| l.search(q, 1, None).unwrap()[0].key.clone();
        assert_eq!(top(&updated, "does gamma"), "a__gamma");
        assert_eq!(top(&updated, "does bravo"), "b__bravo");
        assert_eq!(updated.index.len(), full.index.len());
    }
}
