//! `eval --replay`: search that learns from use, measured. A set's queries are split by a
//! seeded hash; the training half is searched (10 results) and each gold tool a search showed
//! is selected, through the learning the server does (`learning::Sessions`, `Evidence`); what
//! was learned is written beside a catalog dir and read back as a restart reads it, and the
//! test half is scored before and after.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use sha2::Digest;

use super::input::Query;
use super::report::Report;
use super::{Args, Set, embed_tools, score};
use crate::catalog::Catalog;
use crate::config::ServerConfig;
use crate::learning::{self, Contribution, Evidence, Learned, SHOWN, Sessions, Teaching, Weight};
use crate::library::Library;
use crate::search::SearchOptions;
use crate::search::embed::Embedder;

/// The principal the replayed sessions belong to: one user.
const PRINCIPAL: &str = "replay";

/// What a library of the set is built from.
pub(super) struct Built<'a> {
    pub(super) servers: &'a [ServerConfig],
    pub(super) catalogs: BTreeMap<String, Catalog>,
    pub(super) builtin: Option<Catalog>,
    pub(super) options: &'a SearchOptions,
    pub(super) embedder: &'a Option<Arc<Embedder>>,
    pub(super) store: Option<&'a Path>,
}

impl Built<'_> {
    /// The library, searching `learned` queries, with its vectors when there is a model.
    fn library(&self, learned: Arc<Learned>) -> anyhow::Result<Library> {
        let library = Library::build_learned(
            self.servers,
            self.catalogs.clone(),
            self.builtin.clone(),
            self.options.clone(),
            learned,
        )?;
        if let Some(embedder) = self.embedder {
            embed_tools(&library, embedder.clone(), self.store);
        }
        Ok(library)
    }
}

/// Whether the query with this id is in the training half for `seed`.
fn trains(seed: u64, id: &str) -> bool {
    sha2::Sha256::digest(format!("{seed}:{id}").as_bytes())[0] & 1 == 0
}

/// The test half of `queries` scored without and with what the training half taught.
#[allow(clippy::print_stderr)]
pub(super) fn run(
    set: &Set,
    queries: Vec<Query>,
    built: Built,
    seed: u64,
    args: &Args,
) -> anyhow::Result<Vec<Report>> {
    let (train, test): (Vec<Query>, Vec<Query>) =
        queries.into_iter().partition(|q| trains(seed, &q.id));
    if test.is_empty() || train.is_empty() {
        anyhow::bail!(
            "{}: too few queries to split into a training and a test half",
            set.name
        );
    }
    let plain = built.library(Arc::default())?;
    let mut before = score(set, &test, &plain, args)?;
    before.set = format!("{} (test half, plain)", set.name);
    let (evidence, calls) = teach(&plain, &train)?;
    drop(plain);
    // What the server keeps, written and read back as a restart reads it.
    let dir = tempfile::tempdir().context("cannot make a directory for the learned evidence")?;
    evidence.save(dir.path())?;
    let kept = Evidence::load(dir.path())?;
    let learned = Arc::new(Learned::of(&kept));
    eprintln!(
        "{}: {} training queries, {} test; {} gold tools shown and called, {} queries kept for {} tools",
        set.name,
        train.len(),
        test.len(),
        calls,
        kept.len(),
        kept.tools.len()
    );
    let library = built.library(learned)?;
    let mut after = score(set, &test, &library, args)?;
    after.set = format!("{} (test half, learned)", set.name);
    Ok(vec![before, after])
}

/// Replays `train` over `library` as the server sees a session: a search (its first
/// [`SHOWN`] hits), then a successful call of each gold tool it showed. Returns the evidence
/// (bounded) and how many calls taught something.
fn teach(library: &Library, train: &[Query]) -> anyhow::Result<(Evidence, usize)> {
    let mut sessions = Sessions::default();
    let mut evidence = Evidence::default();
    let now = crate::clock::Instant::now();
    let at = learning::now_secs();
    let principal = learning::digest(PRINCIPAL);
    let mut calls = 0;
    for (i, query) in train.iter().enumerate() {
        let session = format!("replay-{i}");
        let hits = library.search(&query.text, SHOWN, None)?;
        let shown: Vec<String> = hits.into_iter().map(|h| h.key).collect();
        sessions.searched(&session, &query.text, &shown, now);
        for keys in &query.gold {
            // The gold tool (or its equivalent) that the search showed is the one called.
            let Some(entry) = keys
                .iter()
                .find(|k| shown.contains(k))
                .and_then(|k| library.get(k))
            else {
                continue;
            };
            let Some(text) = sessions.query_for(&session, &entry.qualified, now) else {
                continue;
            };
            let taught = evidence.teach(Teaching {
                tool: entry.qualified.clone(),
                fingerprint: learning::fingerprint(&entry.def),
                query: text.to_owned(),
                by: Contribution {
                    principal: principal.clone(),
                    session: learning::digest(&session),
                    weight: Weight::Call.value(),
                    at,
                },
            });
            calls += usize::from(taught);
        }
    }
    evidence.bound(at);
    Ok((evidence, calls))
}
