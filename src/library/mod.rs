//! The searchable set of upstream tools: catalogs of the configured servers, keyed by qualified
//! name, with the search index over them. Immutable: a changed catalog gives a new library
//! ([`Library::with_catalog`]) that the server swaps in.
//!
//! `load` reads it from the catalog dir, `documents` turns catalogs into entries and search
//! documents, `vectors` adds the tool vectors of hybrid search, `learned` the queries tools
//! learned from use, `lookups` answers searches.

mod documents;
mod entry;
mod learned;
mod load;
mod lookups;
mod vectors;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

use crate::catalog::{Catalog, Record, ToolDef};
use crate::checksum;
use crate::config::ServerConfig;
use crate::learning::Learned;
use crate::search::{SearchError, SearchIndex, SearchOptions, ToolDoc};
use crate::skills::Skill;
use documents::{Parts, add_catalog, server_source};
use vectors::Semantic;

pub use entry::{Entry, SEPARATOR, qualified_name};
pub use load::{INDEX_DIR, LoadReport, index_dir};
pub use vectors::{EmbedStats, TABLE_FILE, embedder};

/// The records of catalog files to save (by server), if any.
type Records = Mutex<Option<BTreeMap<String, Record>>>;

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
    /// The records of the catalog files read (see [`crate::catalog::Known`]), until they are
    /// saved with the index; `None` when the saved ones are these.
    records: Records,
    /// The queries tools learned from use, searched in their documents (empty when learning
    /// is off).
    learned: Arc<Learned>,
    /// The model and the tool vectors once [`Self::embed`] has run; until then BM25 only.
    semantic: OnceLock<Semantic>,
}

impl Library {
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
        let learned = Arc::default();
        Self::build_from(
            servers,
            catalogs,
            BTreeMap::new(),
            builtin,
            skills,
            options,
            learned,
        )
    }

    /// Like [`Self::build_with`], with the queries tools `learned` from use in their
    /// documents.
    pub fn build_learned(
        servers: &[ServerConfig],
        catalogs: BTreeMap<String, Catalog>,
        builtin: Option<Catalog>,
        options: SearchOptions,
        learned: Arc<Learned>,
    ) -> Result<Self, SearchError> {
        let none = BTreeMap::new();
        Self::build_from(
            servers,
            catalogs,
            none,
            builtin,
            Vec::new(),
            options,
            learned,
        )
    }

    /// Like [`Self::build_learned`], with skills and the tools of some catalogs already read
    /// (`defs`, by server name).
    fn build_from(
        servers: &[ServerConfig],
        catalogs: BTreeMap<String, Catalog>,
        defs: BTreeMap<String, Vec<ToolDef>>,
        builtin: Option<Catalog>,
        skills: Vec<Arc<Skill>>,
        options: SearchOptions,
        learned: Arc<Learned>,
    ) -> Result<Self, SearchError> {
        let builtin_ref = builtin.as_ref();
        let parts = Parts::assemble(
            servers,
            &catalogs,
            defs,
            builtin_ref,
            &skills,
            &learned,
            |_| true,
        );
        Ok(Self {
            entries: parts.entries,
            catalogs,
            skills,
            builtin,
            index: SearchIndex::build_with(parts.docs, options)?,
            sources: BTreeMap::new(),
            saved: AtomicBool::new(false),
            records: Records::default(),
            learned,
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
            return self.rebuilt(servers, catalogs, sources, self.learned.clone());
        };
        if !sources.is_empty() {
            let text = catalogs[&name].text();
            let file = checksum::of(text.as_bytes());
            sources.insert(name.clone(), server_source(config, &file, &self.learned));
        }
        let mut added = BTreeMap::new();
        let mut docs = Vec::new();
        let tools = catalogs[&name].tool_defs();
        add_catalog(&mut added, Some(&mut docs), config, tools, &self.learned);
        let Some(index) = self.index.replace_server(&name, docs)? else {
            tracing::debug!(server = %name, "search index rebuilt");
            return self.rebuilt(servers, catalogs, sources, self.learned.clone());
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
            records: Records::default(),
            learned: self.learned.clone(),
            semantic: OnceLock::new(),
        })
    }

    /// A new library for a changed config (`servers`): the catalogs of servers no longer
    /// configured go, and those of `changed` are indexed again as their new config shapes them
    /// (allow/deny globs, description); `None` when neither touches a catalog. Vectors are not
    /// carried over, as with [`Self::with_catalog`].
    pub fn reconfigured(
        &self,
        servers: &[ServerConfig],
        changed: &[String],
    ) -> Result<Option<Self>, SearchError> {
        let by_name: HashMap<&str, &ServerConfig> =
            servers.iter().map(|s| (s.name.as_str(), s)).collect();
        let configured = |name: &str| by_name.get(name).copied();
        let gone: Vec<String> = (self.catalogs.keys())
            .filter(|name| configured(name).is_none())
            .cloned()
            .collect();
        let mut catalogs = self.catalogs.clone();
        let mut sources = self.sources.clone();
        for name in &gone {
            catalogs.remove(name);
            sources.remove(name);
        }
        let mut entries = self.entries.clone();
        let redone: HashSet<&str> = gone.iter().chain(changed).map(String::as_str).collect();
        entries.retain(|_, e| !redone.contains(e.server.as_str()));
        let mut replaced: Vec<(String, Vec<ToolDoc>)> =
            gone.iter().map(|name| (name.clone(), Vec::new())).collect();
        for name in changed {
            let (Some(config), Some(catalog)) = (configured(name), catalogs.get(name)) else {
                continue;
            };
            let mut docs = Vec::new();
            add_catalog(
                &mut entries,
                Some(&mut docs),
                config,
                catalog.tool_defs(),
                &self.learned,
            );
            if !sources.is_empty() {
                let file = checksum::of(catalog.text().as_bytes());
                sources.insert(name.clone(), server_source(config, &file, &self.learned));
            }
            replaced.push((name.clone(), docs));
        }
        if replaced.is_empty() {
            return Ok(None);
        }
        let Some(index) = self.index.replace_servers(replaced)? else {
            return self
                .rebuilt(servers, catalogs, sources, self.learned.clone())
                .map(Some);
        };
        Ok(Some(Self {
            entries,
            catalogs,
            skills: self.skills.clone(),
            builtin: self.builtin.clone(),
            index,
            sources,
            saved: AtomicBool::new(false),
            records: Records::default(),
            learned: self.learned.clone(),
            semantic: OnceLock::new(),
        }))
    }

    /// This library's catalogs built again whole, with `learned` queries.
    fn rebuilt(
        &self,
        servers: &[ServerConfig],
        catalogs: BTreeMap<String, Catalog>,
        sources: BTreeMap<String, String>,
        learned: Arc<Learned>,
    ) -> Result<Self, SearchError> {
        Ok(Self::build_from(
            servers,
            catalogs,
            BTreeMap::new(),
            self.builtin.clone(),
            self.skills.clone(),
            self.index.options().clone(),
            learned,
        )?
        .with_sources(sources, Records::default()))
    }
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
    fn a_changed_config_gives_the_library_a_full_build_would() {
        let mut servers: Vec<ServerConfig> = ["a", "b", "c"]
            .into_iter()
            .map(ServerConfig::catalog_only)
            .collect();
        let mut catalogs = BTreeMap::new();
        catalogs.insert("a".into(), catalog("a", &["alpha", "beta"]));
        catalogs.insert("b".into(), catalog("b", &["bravo", "charlie"]));
        catalogs.insert("c".into(), catalog("c", &["x1", "x2", "x3", "x4", "x5"]));
        let library = Library::build(&servers, catalogs.clone()).unwrap();
        assert!(library.reconfigured(&servers, &[]).unwrap().is_none());

        // b goes; a now denies beta; d comes (no catalog yet).
        servers.remove(1);
        servers[0].tools = crate::config::ToolFilter::new(vec![], vec!["beta".into()]).unwrap();
        servers.push(ServerConfig::catalog_only("d"));
        let updated = library
            .reconfigured(&servers, &["a".into()])
            .unwrap()
            .unwrap();
        catalogs.remove("b");
        let full = Library::build(&servers, catalogs).unwrap();
        let names = |l: &Library| l.entries.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&updated), names(&full));
        assert_eq!(
            names(&updated),
            ["a__alpha", "c__x1", "c__x2", "c__x3", "c__x4", "c__x5"]
        );
        assert_eq!(updated.catalogs, full.catalogs);
        assert!(
            updated
                .search("does bravo", 5, None)
                .unwrap()
                .iter()
                .all(|h| !h.key.starts_with("b__"))
        );
        assert_eq!(updated.index.len(), full.index.len());
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
