//! Loading a library from the catalog dir: the catalog files read in parallel, the saved search
//! index reused with the changed servers re-indexed, and saving that index again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use super::documents::{Parts, builtin_source, server_source, skills_source};
use super::{Library, Records};
use crate::catalog::{Catalog, CatalogError, FiledRead, Known, Record};
use crate::config::{SKILL_SERVER, Settings};
use crate::learning::{Evidence, Learned};
use crate::search::{SavedError, SearchError, SearchIndex, SearchOptions, ToolDoc};
use crate::skills::Skill;

/// Where the search index is saved, inside the catalog dir.
pub const INDEX_DIR: &str = ".index";

/// The saved search index of the catalogs in `catalog_dir`.
pub fn index_dir(catalog_dir: &Path) -> PathBuf {
    catalog_dir.join(INDEX_DIR)
}

#[derive(Default)]
pub struct LoadReport {
    /// Servers with no usable catalog: to be indexed.
    pub missing: Vec<String>,
    /// Problems worth telling the user (corrupt or newer catalogs).
    pub warnings: Vec<String>,
}

impl Library {
    /// Loads the catalog of every configured server from the catalog dir, plus the skills and
    /// `builtin`, the catalog of tools meta-server serves itself (the server's `meta` tools).
    /// The search index is the one saved beside the catalogs when there is one, with the
    /// servers whose catalog or config changed since re-indexed; a saved index that cannot be
    /// used is a warning and a rebuild (see [`Self::save_index`]). Tools' documents hold the
    /// queries they learned from use (unless `metaServer.learning` is off).
    pub fn load(
        settings: &Settings,
        builtin: Option<&Catalog>,
    ) -> Result<(Self, LoadReport), SearchError> {
        let mut report = LoadReport::default();
        let options = SearchOptions::default();
        let learned = Arc::new(if settings.learning {
            match Evidence::load(&settings.catalog_dir) {
                Ok(evidence) => Learned::of(&evidence),
                Err(e) => {
                    report
                        .warnings
                        .push(format!("{e}; search does not use what it learned"));
                    Learned::default()
                }
            }
        } else {
            Learned::default()
        });
        let known = Known::load(&settings.catalog_dir);
        // The saved index and the skills are read while the catalogs are.
        let (reads, (skills, saved)) = read_catalogs(settings, &learned, &known, || {
            let skills = crate::skills::discover(&settings.skills_dirs);
            let saved = SearchIndex::open_saved(&index_dir(&settings.catalog_dir), &options);
            (skills, saved)
        });
        let mut catalogs = BTreeMap::new();
        let mut sources = BTreeMap::new();
        let mut defs = BTreeMap::new();
        let mut records = BTreeMap::new();
        for (server, read) in settings.servers.iter().zip(reads) {
            match read {
                Ok(Some((read, source))) => {
                    let FiledRead {
                        catalog,
                        tools,
                        record,
                        ..
                    } = read;
                    if let Some(record) = record {
                        records.insert(server.name.clone(), record);
                    }
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
        // Saved with the index unless they are the records read.
        let unchanged = records.len() == known.len() && records.values().all(Record::is_saved);
        let records = Mutex::new((!unchanged).then_some(records));
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
                &learned,
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
                records,
                learned,
                semantic: OnceLock::new(),
            },
            None => Self::build_from(
                &settings.servers,
                catalogs,
                defs,
                builtin,
                skills,
                options,
                learned,
            )?
            .with_sources(sources, records),
        };
        Ok((library, report))
    }

    /// This library with the hashes of its sources, so [`Self::save_index`] saves it, and
    /// the records of its catalog files to save with it.
    pub(super) fn with_sources(self, sources: BTreeMap<String, String>, records: Records) -> Self {
        Self {
            sources,
            saved: AtomicBool::new(false),
            records,
            ..self
        }
    }

    /// Saves the search index in the catalog dir (see [`index_dir`]) unless it is saved
    /// already, so the next start reads it instead of building it. Nothing to do for a library
    /// not loaded from a catalog dir or without catalogs, or when a newer version of the index
    /// exists.
    pub fn save_index(&self, catalog_dir: &Path) -> Result<(), SavedError> {
        let records = self.records.lock().expect("not poisoned").take();
        if let Some(records) = records
            && let Err(e) = Known::save(catalog_dir, &records)
        {
            let path = Known::path(catalog_dir);
            tracing::warn!(
                "cannot save {}: {e}; the next start reads every catalog",
                path.display()
            );
        }
        if self.catalogs.is_empty() || self.sources.is_empty() || self.saved.load(SeqCst) {
            return Ok(());
        }
        let started = crate::clock::Instant::now();
        if self.index.save(&index_dir(catalog_dir), &self.sources)? {
            self.saved.store(true, SeqCst);
            tracing::debug!(took = ?started.elapsed(), "search index saved");
        }
        Ok(())
    }
}

/// A catalog file read, if there is one, and its source's hash (see [`server_source`]).
type CatalogRead = Result<Option<(FiledRead, String)>, CatalogError>;

/// Each configured server's catalog file with its source's hash (its tools' `learned` queries
/// included), in config order, read on a few threads while the calling thread runs
/// `meanwhile`: reading and parsing is most of what start-up does with a saved index. A file
/// unchanged since the last start is taken from its record in `known`.
fn read_catalogs<T>(
    settings: &Settings,
    learned: &Learned,
    known: &Known,
    meanwhile: impl FnOnce() -> T,
) -> (Vec<CatalogRead>, T) {
    let now = SystemTime::now();
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
                            let dir = &settings.catalog_dir;
                            let read =
                                Catalog::read_server_filed(dir, &s.name, known.get(&s.name), now)?;
                            Ok(read.map(|read| {
                                let source = server_source(s, &read.sum, learned);
                                (read, source)
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
