//! The searchable set of upstream tools: catalogs of the configured servers, keyed by qualified
//! name, with the search index over them. Immutable: a changed catalog gives a new library
//! ([`Library::with_catalog`]) that the server swaps in.

mod entry;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::catalog::{Catalog, CatalogError, ToolDef};
use crate::config::{EMBEDDINGS_ENV, SKILL_SERVER, ServerConfig, Settings};
use crate::search::embed::{self, DocVectors, EmbedError, Embedder, VectorFile};
use crate::search::{Hit, SearchError, SearchIndex, SearchOptions, ToolDoc};
use crate::skills::Skill;

pub use entry::{Entry, SEPARATOR, qualified_name};

/// Longest text compared with tool names for suggestions (MCP tool names have at most 128).
const MAX_SUGGESTED_LEN: usize = 256;

/// How the built-in tools' server is described to search.
const BUILTIN_ABOUT: &str = "meta-server built-in tools";

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
    /// (key, server, embedded text) of every tool, for [`Self::embed`].
    texts: Vec<(String, String, String)>,
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
    pub fn load(
        settings: &Settings,
        builtin: Option<&Catalog>,
    ) -> Result<(Self, LoadReport), SearchError> {
        let mut report = LoadReport::default();
        let mut catalogs = BTreeMap::new();
        for server in &settings.servers {
            match Catalog::load_server(&settings.catalog_dir, &server.name) {
                Ok(Some(catalog)) => {
                    catalogs.insert(server.name.clone(), catalog);
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
        let (skills, warnings) = crate::skills::discover(&settings.skills_dirs);
        report.warnings.extend(warnings);
        let skills = skills.into_iter().map(Arc::new).collect();
        Ok((
            Self::build_with(
                &settings.servers,
                catalogs,
                builtin.cloned(),
                skills,
                SearchOptions::default(),
            )?,
            report,
        ))
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
        let mut entries = BTreeMap::new();
        let mut docs = Vec::new();
        for server in servers {
            if let Some(catalog) = catalogs.get(&server.name) {
                add_catalog(&mut entries, &mut docs, server, catalog);
            }
        }
        if let Some(builtin) = &builtin {
            let tools = builtin.tool_defs().into_iter();
            add(
                &mut entries,
                &mut docs,
                &builtin.server,
                BUILTIN_ABOUT,
                tools,
            );
        }
        for skill in &skills {
            let def = serde_json::json!({"name": skill.name, "description": skill.description, "inputSchema": {"type": "object"}});
            let Ok(def) = ToolDef::from_json(&Arc::new(def)) else {
                continue;
            };
            let about = format!("agent skill instructions {}", skill.servers.join(" "));
            for qualified in add(
                &mut entries,
                &mut docs,
                SKILL_SERVER,
                &about,
                std::iter::once(def),
            ) {
                if let Some(entry) = entries.get_mut(&qualified).and_then(Arc::get_mut) {
                    entry.skill = Some(skill.clone());
                }
            }
        }
        let texts = docs.iter().map(embed_text).collect();
        Ok(Self {
            entries,
            catalogs,
            skills,
            builtin,
            index: SearchIndex::build_with(docs, options)?,
            texts,
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
        let mut catalogs = self.catalogs.clone();
        catalogs.insert(name.clone(), catalog);
        let Some(config) = servers.iter().find(|s| s.name == name) else {
            return self.rebuilt(servers, catalogs);
        };
        let mut added = BTreeMap::new();
        let mut docs = Vec::new();
        add_catalog(&mut added, &mut docs, config, &catalogs[&name]);
        let new_texts: Vec<_> = docs.iter().map(embed_text).collect();
        let Some(index) = self.index.replace_server(&name, docs)? else {
            tracing::debug!(server = %name, "search index rebuilt");
            return self.rebuilt(servers, catalogs);
        };
        tracing::debug!(server = %name, "search index updated for this server only");
        let mut entries = self.entries.clone();
        entries.retain(|_, e| e.server != name);
        entries.extend(added);
        let mut texts = self.texts.clone();
        texts.retain(|(_, server, _)| *server != name);
        texts.extend(new_texts);
        Ok(Self {
            entries,
            catalogs,
            skills: self.skills.clone(),
            builtin: self.builtin.clone(),
            index,
            texts,
            semantic: OnceLock::new(),
        })
    }

    fn rebuilt(
        &self,
        servers: &[ServerConfig],
        catalogs: BTreeMap<String, Catalog>,
    ) -> Result<Self, SearchError> {
        Self::build_with(
            servers,
            catalogs,
            self.builtin.clone(),
            self.skills.clone(),
            self.index.options().clone(),
        )
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
        for (key, server, text) in &self.texts {
            by_server
                .entry(server.as_str())
                .or_default()
                .push((key.clone(), text.clone()));
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
        let mut all: HashMap<String, Vec<f32>> = HashMap::with_capacity(self.texts.len());
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
    pub fn suggestions(&self, name: &str, max: usize) -> Vec<String> {
        if name.len() > MAX_SUGGESTED_LEN {
            return Vec::new();
        }
        let wanted = name.to_lowercase();
        let tool_part = |q: &str| q.split_once(SEPARATOR).map_or(q, |(_, t)| t).to_lowercase();
        let mut scored: Vec<(f64, &String)> = self
            .entries
            .keys()
            .map(|q| {
                let full = strsim::jaro_winkler(&wanted, &q.to_lowercase());
                let tool = strsim::jaro_winkler(&wanted, &tool_part(q));
                (full.max(tool), q)
            })
            .filter(|(score, _)| *score >= 0.75)
            .collect();
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

/// Adds the tools of `server`'s catalog that its allow and deny lists let through.
fn add_catalog(
    entries: &mut BTreeMap<String, Arc<Entry>>,
    docs: &mut Vec<ToolDoc>,
    server: &ServerConfig,
    catalog: &Catalog,
) {
    let about = format!(
        "{} {}",
        server.key,
        server.description.as_deref().unwrap_or_default()
    );
    let tools = catalog
        .tool_defs()
        .into_iter()
        .filter(|def| server.tools.allows(&def.name));
    add(entries, docs, &server.name, &about, tools);
}

/// (key, server, embedded text) of a search document.
fn embed_text(doc: &ToolDoc) -> (String, String, String) {
    (doc.key.clone(), doc.server.clone(), embed::tool_text(doc))
}

/// Adds one server's tools as entries and search documents; returns the names added.
fn add(
    entries: &mut BTreeMap<String, Arc<Entry>>,
    docs: &mut Vec<ToolDoc>,
    server: &str,
    about: &str,
    tools: impl Iterator<Item = ToolDef>,
) -> Vec<String> {
    let mut added = Vec::new();
    for def in tools {
        let qualified = qualified_name(server, &def.name);
        if entries.contains_key(&qualified) {
            tracing::warn!(server, tool = %def.name, "two tools map to {qualified}; keeping the first");
            continue;
        }
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
        let entry = Entry::new(qualified.clone(), server.to_owned(), def);
        entries.insert(qualified.clone(), Arc::new(entry));
        added.push(qualified);
    }
    added
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

    fn catalog(server: &str, tools: &[&str]) -> Catalog {
        let tools = tools
            .iter()
            .map(|t| Arc::new(serde_json::json!({"name": t, "description": format!("does {t}"), "inputSchema": {"type": "object"}})))
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
        let texts = |l: &Library| {
            let mut t = l.texts.clone();
            t.sort();
            t
        };
        assert_eq!(texts(&updated), texts(&full));
        let top = |l: &Library, q: &str| l.search(q, 1, None).unwrap()[0].key.clone();
        assert_eq!(top(&updated, "does gamma"), "a__gamma");
        assert_eq!(top(&updated, "does bravo"), "b__bravo");
        assert_eq!(updated.index.len(), full.index.len());
    }
}
