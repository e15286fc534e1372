//! Server-level evidence: how well a server as a whole answers a query, from all its tools'
//! words together, blended into its tools' scores ([`super::SearchOptions::server_evidence`]).
//! An agent's query often names a guessed kind of server next to the action ("time tracking
//! my workspaces"): the server whose tools together have those words lifts its best tool.

use std::collections::HashMap;
use std::sync::Arc;

use super::query::Synonym;
use super::tables::Tables;
use super::{SearchIndex, SearchOptions};

/// How a server's score is computed, see [`super::SearchOptions::server_score`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ServerScore {
    /// The share of the query's IDF weight found in any of the server's tools (0..=1).
    Cover,
    /// BM25 of the server as one document (its tools' words, each counted once per tool that
    /// has it), over the servers' document frequencies; divided by the best server's.
    Doc,
    /// The sum of the server's three best tool scores in the BM25 pool, divided by the best
    /// server's.
    Mass,
}

/// BM25's k1 and b for server documents.
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// The words of each server's tools, derived from a [`Tables`].
#[derive(Default)]
pub(super) struct Servers {
    /// Server name -> its position in the lists below.
    index: HashMap<String, usize>,
    /// Per server: (term id, number of its tools that have the term), by term id.
    terms: Vec<Box<[(u32, u32)]>>,
    /// Per server: its tools' distinct words summed, the length of its document.
    lengths: Vec<f32>,
    /// Per term id: how many servers have it.
    df: Vec<u32>,
}

impl Servers {
    /// The servers of `tables` when `options` use server evidence, else none.
    pub fn of(tables: &Tables, options: &SearchOptions) -> Arc<Self> {
        Arc::new(if options.server_evidence > 0.0 {
            Self::new(tables)
        } else {
            Self::default()
        })
    }

    /// Groups the live documents of `tables` by server, one server at a time: all servers'
    /// term lists at once were 70 MB at the peak of a 100k start, the counts 30.
    pub fn new(tables: &Tables) -> Self {
        let mut servers = Self::default();
        let mut docs: Vec<Vec<u32>> = Vec::new();
        for i in 0..tables.doc_terms.len() as u32 {
            if !tables.is_live(i) {
                continue;
            }
            let name = &tables.servers[i as usize];
            let s = match servers.index.get(name) {
                Some(&s) => s,
                None => {
                    servers.index.insert(name.clone(), docs.len());
                    docs.push(Vec::new());
                    docs.len() - 1
                }
            };
            docs[s].push(i);
        }
        servers.df = vec![0; tables.df.len()];
        let mut ids: Vec<u32> = Vec::new();
        for docs in docs {
            ids.clear();
            for &doc in &docs {
                ids.extend_from_slice(&tables.doc_terms[doc as usize]);
            }
            servers.lengths.push(ids.len() as f32);
            ids.sort_unstable();
            let terms: Box<[(u32, u32)]> = ids
                .chunk_by(|a, b| a == b)
                .map(|run| (run[0], run.len() as u32))
                .collect();
            for &(id, _) in &terms {
                servers.df[id as usize] += 1;
            }
            servers.terms.push(terms);
        }
        servers
    }

    /// How many of `server`'s tools have term `id`.
    fn count(&self, server: usize, id: u32) -> u32 {
        let terms = &self.terms[server];
        terms
            .binary_search_by_key(&id, |&(t, _)| t)
            .map_or(0, |at| terms[at].1)
    }

    /// How many of `server`'s tools have a query word (`id`), or else its best synonym
    /// (term id, weight relative to the word) scaled by its weight.
    fn matches(&self, server: usize, id: Option<u32>, synonyms: &[(u32, f32)]) -> f32 {
        match id.map_or(0, |id| self.count(server, id)) {
            0 => synonyms
                .iter()
                .map(|&(id, scale)| self.count(server, id) as f32 * scale)
                .fold(0.0, f32::max),
            n => n as f32,
        }
    }

    /// Scores (0..=1) by server position of the servers in `hits` ((server, tool score) of the
    /// BM25 pool), for query words `weights` (term id, IDF weight) with their `synonyms` (by
    /// word: term id, weight relative to the word), as `how` says.
    pub fn scores(
        &self,
        how: ServerScore,
        hits: &[(&str, f32)],
        weights: &[(Option<u32>, f32)],
        synonyms: &[Vec<(u32, f32)>],
    ) -> HashMap<usize, f32> {
        let none = Vec::new();
        let synonyms_of = |i: usize| synonyms.get(i).unwrap_or(&none);
        let mut scores: HashMap<usize, f32> = HashMap::new();
        let candidates = hits.iter().filter_map(|(s, _)| self.index.get(*s).copied());
        match how {
            ServerScore::Cover => {
                let total: f32 = weights.iter().map(|(_, w)| w).sum();
                for s in candidates {
                    scores.entry(s).or_insert_with(|| {
                        let covered: f32 = weights
                            .iter()
                            .enumerate()
                            .map(|(i, &(id, w))| w * self.matches(s, id, synonyms_of(i)).min(1.0))
                            .sum();
                        if total > 0.0 { covered / total } else { 0.0 }
                    });
                }
            }
            ServerScore::Doc => {
                let n = self.terms.len() as f32;
                let avg = self.lengths.iter().sum::<f32>() / n.max(1.0);
                let idf: Vec<f32> = weights
                    .iter()
                    .map(|(id, _)| {
                        let df = id.map_or(0, |id| self.df[id as usize]) as f32;
                        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
                    })
                    .collect();
                for s in candidates {
                    scores.entry(s).or_insert_with(|| {
                        let norm = K1 * (1.0 - B + B * self.lengths[s] / avg.max(1.0));
                        weights
                            .iter()
                            .zip(&idf)
                            .enumerate()
                            .map(|(i, (&(id, _), idf))| {
                                let tf = self.matches(s, id, synonyms_of(i));
                                idf * tf * (K1 + 1.0) / (tf + norm)
                            })
                            .sum()
                    });
                }
            }
            ServerScore::Mass => {
                let mut best: HashMap<usize, Vec<f32>> = HashMap::new();
                for (s, score) in hits {
                    if let Some(&s) = self.index.get(*s) {
                        best.entry(s).or_default().push(*score);
                    }
                }
                for (s, mut top) in best {
                    top.sort_by(|a, b| b.total_cmp(a));
                    scores.insert(s, top.iter().take(3).sum());
                }
            }
        }
        if how != ServerScore::Cover {
            let max = scores.values().copied().fold(0.0_f32, f32::max);
            for v in scores.values_mut() {
                *v = if max > 0.0 { *v / max } else { 0.0 };
            }
        }
        scores
    }
}

impl SearchIndex {
    /// Blends each BM25 hit's score `t` (ordinal, score) with its server's score `S` (0..=1):
    /// (1 − w) × t + w × S × the best hit's score, with w [`SearchOptions::server_evidence`].
    /// `weights` are the query words' (term id, IDF weight, counts as a word), `synonyms`
    /// their synonyms (a word's tools count with its synonyms' when they lack it).
    pub(super) fn server_evidence(
        &self,
        bm25: &mut [(u32, f32)],
        weights: &[(Option<u32>, f32, bool)],
        synonyms: &[Vec<Synonym>],
    ) {
        let w = self.options.server_evidence;
        if w == 0.0 || bm25.is_empty() {
            return;
        }
        let servers = &self.servers;
        let hits: Vec<(&str, f32)> = bm25
            .iter()
            .map(|&(i, score)| (self.tables.servers[i as usize].as_str(), score))
            .collect();
        let words: Vec<(Option<u32>, f32)> = weights.iter().map(|&(id, w, _)| (id, w)).collect();
        let synonyms: Vec<Vec<(u32, f32)>> = synonyms
            .iter()
            .map(|word| word.iter().map(|s| (s.id, s.scale)).collect())
            .collect();
        let scores = servers.scores(self.options.server_score, &hits, &words, &synonyms);
        let best = bm25.iter().map(|&(_, s)| s).fold(0.0_f32, f32::max);
        for (hit, (server, _)) in bm25.iter_mut().zip(&hits) {
            let s = servers
                .index
                .get(*server)
                .and_then(|p| scores.get(p))
                .copied()
                .unwrap_or(0.0);
            hit.1 = (1.0 - w) * hit.1 + w * s * best;
        }
    }
}
