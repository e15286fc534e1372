//! Pseudo-relevance feedback for short queries ([`super::SearchOptions::feedback`]): the best
//! hits are taken as relevant, and what they share lifts the other hits that have it too. In
//! BM25 search, the words of the best hits (RM3's idea, over the side tables); in hybrid
//! search, the mean of the nearest tools' vectors added to the query's (Rocchio's).

use super::{DocVectors, SearchIndex};

/// How many of the best hits are taken as relevant.
const DOCS: usize = 3;
/// How many of their words expand the query.
const WORDS: usize = 8;

impl SearchIndex {
    /// Adds to each BM25 hit (ordinal, score) w × the best score × the share of the
    /// expansion words' weight it has, w [`super::SearchOptions::feedback`]. Expansion words:
    /// the [`WORDS`] words of the [`DOCS`] best hits, not in the query (`query_ids`) and found
    /// in more than one tool, weighted by IDF × the summed relative scores of the hits having
    /// them.
    pub(super) fn word_feedback(&self, bm25: &mut [(u32, f32)], query_ids: &[u32]) {
        let w = self.options.feedback;
        if w == 0.0 || bm25.is_empty() {
            return;
        }
        let mut top: Vec<(u32, f32)> = bm25.to_vec();
        top.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        top.truncate(DOCS);
        let best = top[0].1;
        if best <= 0.0 {
            return;
        }
        let mut words: Vec<(u32, f32)> = Vec::new();
        for &(i, score) in &top {
            for &id in &self.tables.doc_terms[i as usize] {
                if query_ids.contains(&id) || self.tables.df[id as usize] < 2 {
                    continue;
                }
                let weight = score / best * self.idf(Some(id));
                match words.iter_mut().find(|(t, _)| *t == id) {
                    Some((_, total)) => *total += weight,
                    None => words.push((id, weight)),
                }
            }
        }
        words.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        words.truncate(WORDS);
        let total: f32 = words.iter().map(|(_, w)| w).sum();
        if total <= 0.0 {
            return;
        }
        for hit in bm25.iter_mut() {
            let terms = &self.tables.doc_terms[hit.0 as usize];
            let shared: f32 = words
                .iter()
                .filter(|(id, _)| terms.binary_search(id).is_ok())
                .map(|(_, w)| w)
                .sum();
            hit.1 += w * best * shared / total;
        }
    }

    /// `cosine` (the query's with every tool) plus w × the cosine of every tool with the mean
    /// vector of the [`DOCS`] nearest live tools, w [`super::SearchOptions::feedback`]: the
    /// query vector moved towards its neighbourhood (unnormalised; fusion normalises).
    pub(super) fn vector_feedback(&self, cosine: &mut [f32], vectors: &DocVectors) {
        let w = self.options.feedback;
        if w == 0.0 {
            return;
        }
        let mut nearest: Vec<(usize, f32)> = cosine
            .iter()
            .enumerate()
            .filter(|&(i, _)| self.tables.is_live(i as u32))
            .map(|(i, &c)| (i, c))
            .collect();
        let k = DOCS.min(nearest.len());
        if k == 0 {
            return;
        }
        let best_first =
            |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if nearest.len() > k {
            nearest.select_nth_unstable_by(k, best_first);
        }
        let mut mean = vec![0.0_f32; vectors.dim];
        for &(i, _) in &nearest[..k] {
            for (m, x) in mean.iter_mut().zip(vectors.row(i)) {
                *m += x / k as f32;
            }
        }
        for (c, f) in cosine.iter_mut().zip(vectors.scores(&mean, &[])) {
            *c += w * f;
        }
    }
}
