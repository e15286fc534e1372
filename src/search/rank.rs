//! Ranking: BM25 hits (with each tool's coverage of the query), exact and close names first,
//! and in hybrid search the fusion with the vector ranking ([`super::fusion`]).

use tantivy::collector::{Count, TopDocs};

use super::confidence::strong_words;
use super::names::identifier_like;
use super::stats::Stats;
use super::{DocVectors, Fusion, Hit, LearnedVectors, SearchError, SearchIndex, fusion};

/// A query's vector with the tools' vectors and learned queries, in hybrid search.
pub(super) type Dense<'a> = Option<(&'a [f32], &'a DocVectors, Option<&'a LearnedVectors>)>;

/// The least share of a query's weight one of meta-server's own tools must match to be a hit.
const HELPER_COVERAGE: f32 = 0.5;

impl SearchIndex {
    pub(super) fn rank(
        &self,
        query: &str,
        limit: usize,
        server: Option<&str>,
        dense: Dense,
    ) -> Result<Vec<Hit>, SearchError> {
        let words = self.words(query);
        let surface = self.surface_words(query, &words);
        let hits = self.rank_words(query, &words, &surface, limit, server, dense)?;
        // A long task names servers in passing, and spans several.
        let coverage_words = self.options.coverage_words;
        if server.is_some() || (coverage_words > 0 && words.len() > coverage_words) {
            return Ok(hits);
        }
        self.named_first(query, &words, &surface, hits, limit, dense)
    }

    /// Ranks the tools for `query` analyzed as `words` (and `surface`, see
    /// [`Self::surface_words`]).
    pub(super) fn rank_words(
        &self,
        query: &str,
        words: &[String],
        surface: &[String],
        limit: usize,
        server: Option<&str>,
        dense: Dense,
    ) -> Result<Vec<Hit>, SearchError> {
        let words = words.to_vec();
        let names = self.options.names;
        let exact: Vec<u32> = self
            .tables
            .names
            .get(query.trim().to_lowercase().as_str())
            .filter(|_| names)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| server.is_none_or(|s| self.tables.servers[i as usize] == s))
            .collect();
        // Fetch more than asked: coverage and fusion may reorder, and ties at the cut are
        // resolved by key. The pool does not depend on `limit` (up to 50), so a longer list
        // extends a shorter one.
        let pool = limit.max(50) * 2 + 32;
        let weights = self.weights(&words);
        // Synonyms stand in for the vectors' sense of meaning when there are none; with
        // vectors they add nothing but noise (EVAL.md, round 5).
        let synonyms = self.expansions(&words, dense.is_none());
        let total: f32 = weights.iter().map(|(_, w, _)| w).sum();
        // What a tool's words must cover to answer the query: all its words but the argument
        // values no tool has ("Tokyo" in "what time is it in Tokyo").
        let values = self.argument_values(query, &words);
        let asked: f32 = weights
            .iter()
            .zip(&values)
            .filter(|((id, _, _), value)| !(**value && id.is_none()))
            .map(|((_, w, _), _)| w)
            .sum();
        // The query words (term id, weight, counts as a word) a tool has in any field.
        let matched = |i: u32| {
            let terms = &self.tables.doc_terms[i as usize];
            weights
                .iter()
                .filter(|(id, _, _)| id.is_some_and(|id| terms.binary_search(&id).is_ok()))
        };
        // (coverage, words) of a tool: see `Hit::coverage` and `Hit::words`.
        let shared = |i: u32| {
            let (matched, words) = matched(i).fold((0.0, 0), |(weight, words), (_, w, counts)| {
                (weight + w, words + usize::from(*counts))
            });
            (if asked > 0.0 { matched / asked } else { 0.0 }, words)
        };
        // Coverage for ranking: a word the tool has only a synonym of covers the synonym
        // weight's share of it (else a short query scores such a tool 0). `Hit::coverage`, and
        // with it `confident`, counts the query's own words only.
        let coverage = |i: u32| {
            let terms = &self.tables.doc_terms[i as usize];
            let has = |id: u32| terms.binary_search(&id).is_ok();
            let covered: f32 = weights
                .iter()
                .zip(&synonyms)
                .map(|((id, w, _), synonyms)| {
                    if id.is_some_and(has) {
                        *w
                    } else if synonyms.iter().any(|s| has(s.id)) {
                        w * self.options.synonyms
                    } else {
                        0.0
                    }
                })
                .sum();
            if total > 0.0 { covered / total } else { 0.0 }
        };
        let short = self.options.coverage_words == 0 || words.len() <= self.options.coverage_words;
        // meta-server's own tools count less in a long request (`SearchOptions::helpers`).
        let demote = !short && self.options.helpers != 1.0 && !self.helpers.is_empty();
        let mut bm25: Vec<(u32, f32)> = Vec::new();
        if let Some(q) = self.query(&words, surface, server, &synonyms) {
            let searcher = &self.searcher;
            // Paired with `Count`, TopDocs scores every match instead of pruning with
            // block-WAND: a question's many words over five fields give dozens of posting
            // lists, where pruning spends more keeping them ordered than it skips (p99 at 10k
            // tools 2.2 ms -> 0.8 ms, BENCHMARKS.md).
            let exhaustive = (TopDocs::with_limit(pool).order_by_score(), Count);
            let o = &self.options;
            let f = &self.fields;
            // A tool's learned queries are measured against the tools that have some, not
            // against all of them: most have none.
            let learned_len = self.tables.live as f32 / self.learned_docs.max(1) as f32;
            let lengths = [
                (f.name, o.name_len),
                (f.description, o.description_len),
                (f.params, o.params_len),
                (f.server_text, o.server_len),
                (f.learned, learned_len),
            ];
            let stats = Stats {
                searcher,
                tables: &self.tables,
                global_idf: o.global_idf,
                lengths: &lengths,
            };
            let (top, _) = searcher.search_with_statistics_provider(&q, &exhaustive, &stats)?;
            let mut ords = Vec::with_capacity(searcher.segment_readers().len());
            for segment in searcher.segment_readers() {
                ords.push(segment.fast_fields().u64("ord")?);
            }
            for (score, addr) in top {
                if let Some(i) = ords[addr.segment_ord as usize].first(addr.doc_id) {
                    let i = i as u32;
                    let score = if self.options.coverage == 0.0 || !short {
                        score
                    } else {
                        score * coverage(i).powf(self.options.coverage)
                    };
                    let score = if demote && self.helpers.contains(&i) {
                        score * self.options.helpers
                    } else {
                        score
                    };
                    bm25.push((i, score));
                }
            }
        }
        // In hybrid search the vectors already rank by sense; server evidence moved no set
        // there beyond noise (EVAL.md, round 7a).
        if short && dense.is_none() {
            self.server_evidence(&mut bm25, &weights, &synonyms);
            let ids: Vec<u32> = weights.iter().filter_map(|(id, _, _)| *id).collect();
            self.word_feedback(&mut bm25, &ids);
        }
        // Did-you-mean for what looks like an identifier, and for a plain word only when no
        // tool matches the query's words well: "email" is one letter from a tool called
        // `mail`, and must not push `send_email` down.
        let close = if names
            && exact.is_empty()
            && (identifier_like(query)
                || bm25
                    .iter()
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .is_none_or(|&(i, _)| {
                        let (coverage, words) = shared(i);
                        !strong_words(coverage, words)
                    })) {
            self.close_names(query, server)
        } else {
            Vec::new()
        };
        // The tools BM25 or the names found are scored exactly, wherever their vectors rank.
        let cosine = dense.map(|(query_vector, vectors, _)| {
            let found: Vec<u32> = bm25
                .iter()
                .map(|&(i, _)| i)
                .chain(exact.iter().chain(&close).copied())
                .collect();
            vectors.scores(query_vector, &found)
        });
        let mut scored = match (&cosine, dense) {
            (Some(cosine), Some((query_vector, vectors, learned))) => {
                // Hits report the query's own cosine; feedback only moves the ranking.
                let mut expanded;
                let cosine = if short && self.options.feedback > 0.0 {
                    expanded = cosine.clone();
                    self.vector_feedback(&mut expanded, vectors);
                    &expanded
                } else {
                    cosine
                };
                if self.options.even_ties {
                    even_ties(&mut bm25, |i| {
                        matched(i).filter_map(|(id, _, _)| *id).collect()
                    });
                }
                let mut cosine = cosine.clone();
                if let Some(learned) = learned {
                    let o = &self.options;
                    learned.lift(
                        &mut cosine,
                        query_vector,
                        o.learned_vector,
                        o.learned_margin,
                    );
                }
                if let Some(context) = self.options.context {
                    fusion::server_context(&mut cosine, &self.tables.servers, context);
                }
                // BM25's weight in fusion (`SearchOptions::lexical_coverage`).
                let full = self.options.lexical_coverage;
                let lexical = if full > 0.0 && short {
                    let best = bm25.iter().map(|&(i, _)| coverage(i)).fold(0.0, f32::max);
                    (best / full).min(1.0)
                } else {
                    1.0
                };
                if demote {
                    for &i in &self.helpers {
                        let c = &mut cosine[i as usize];
                        *c = c.min(*c * self.options.helpers);
                    }
                }
                self.fuse(bm25, &cosine, pool, server, &coverage, lexical)
            }
            _ => bm25,
        };
        // An exact or close name outside the pool (its words are common) still comes first.
        for &i in exact.iter().chain(&close) {
            if !scored.iter().any(|&(j, _)| j == i) {
                scored.push((i, 0.0));
            }
        }
        let first = |i: u32| exact.contains(&i) || close.contains(&i);

        // meta-server's own tools serve narrow needs (a stored result, Code Mode): they are
        // hits for a query they mostly cover, never for one that merely shares a word or a
        // sense with them ("repeat back the message" is not about reading results back).
        scored.retain(|&(i, _)| {
            !self.helpers.contains(&i) || first(i) || shared(i).0 >= HELPER_COVERAGE
        });
        let ranked = |&(i, score): &(u32, f32)| (first(i), score, i);
        scored.sort_by(|a, b| {
            let (a_exact, a_score, a) = ranked(a);
            let (b_exact, b_score, b) = ranked(b);
            b_exact
                .cmp(&a_exact)
                .then(b_score.total_cmp(&a_score))
                .then_with(|| self.tables.keys[a as usize].cmp(&self.tables.keys[b as usize]))
        });
        scored.truncate(limit);
        Ok(scored
            .into_iter()
            .map(|(i, score)| {
                let exact = exact.contains(&i);
                let (coverage, words) = shared(i);
                Hit {
                    key: self.tables.keys[i as usize].clone(),
                    score,
                    coverage: if exact { 1.0 } else { coverage },
                    words,
                    exact,
                    close: close.contains(&i),
                    similarity: cosine.as_ref().map(|c| c[i as usize]),
                }
            })
            .collect())
    }

    /// Fuses BM25 (ordinal, score) with the `pool` tools nearest by `cosine` (the query's cosine
    /// with every document, by ordinal), BM25's weight scaled by `lexical` (0..=1).
    fn fuse(
        &self,
        mut bm25: Vec<(u32, f32)>,
        cosine: &[f32],
        pool: usize,
        server: Option<&str>,
        coverage: &dyn Fn(u32) -> f32,
        lexical: f32,
    ) -> Vec<(u32, f32)> {
        let mut nearest: Vec<(u32, f32)> = cosine
            .iter()
            .enumerate()
            .filter(|&(i, _)| {
                self.tables.is_live(i as u32) && server.is_none_or(|s| self.tables.servers[i] == s)
            })
            .map(|(i, &c)| (i as u32, c))
            .collect();
        let best_first = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if nearest.len() > pool {
            nearest.select_nth_unstable_by(pool, best_first);
            nearest.truncate(pool);
        }
        nearest.sort_by(best_first);
        let candidates = |bm25: &[(u32, f32)], nearest: &[(u32, f32)]| {
            let mut all: Vec<u32> = bm25.iter().chain(nearest).map(|&(i, _)| i).collect();
            all.sort_unstable();
            all.dedup();
            all
        };
        match self.options.fusion {
            Fusion::Rrf {
                k,
                vector,
                coverage: by_coverage,
            } => {
                bm25.sort_by(best_first);
                let ranks: Vec<(u32, f32)> = bm25
                    .iter()
                    .map(|&(i, _)| (i, lexical * if by_coverage { coverage(i) } else { 1.0 }))
                    .collect();
                let semantic: Vec<(u32, f32)> = nearest.iter().map(|&(i, _)| (i, vector)).collect();
                fusion::rrf_each(&[&ranks, &semantic], k)
            }
            Fusion::Weighted { alpha } => {
                fusion::weighted(&bm25, cosine, &candidates(&bm25, &nearest), alpha * lexical)
            }
            Fusion::Normalized { alpha, norm } => fusion::normalized(
                &bm25,
                cosine,
                &candidates(&bm25, &nearest),
                alpha * lexical,
                norm,
            ),
            Fusion::Coverage { beta } => candidates(&bm25, &nearest)
                .into_iter()
                .map(|i| (i, cosine[i as usize] + beta * coverage(i)))
                .collect(),
        }
    }
}

/// Gives every hit the best score among the hits that match the same query words (`matched`).
fn even_ties(bm25: &mut [(u32, f32)], matched: impl Fn(u32) -> Vec<u32>) {
    let mut best: std::collections::HashMap<Vec<u32>, f32> = std::collections::HashMap::new();
    let keys: Vec<Vec<u32>> = bm25.iter().map(|&(i, _)| matched(i)).collect();
    for (key, &(_, score)) in keys.iter().zip(bm25.iter()) {
        let b = best.entry(key.clone()).or_insert(score);
        *b = b.max(score);
    }
    for (key, hit) in keys.iter().zip(bm25.iter_mut()) {
        hit.1 = best[key];
    }
}

#[cfg(test)]
mod tests {
    use super::even_ties;

    #[test]
    fn hits_matching_the_same_words_get_the_best_score_among_them() {
        // 1 and 2 match word 7 only, 3 matches 7 and 8: 2 rises to 1's score, 3 keeps its own.
        let mut bm25 = vec![(1, 5.0), (2, 3.0), (3, 4.0)];
        even_ties(&mut bm25, |i| if i == 3 { vec![7, 8] } else { vec![7] });
        assert_eq!(bm25, [(1, 5.0), (2, 5.0), (3, 4.0)]);
    }
}
