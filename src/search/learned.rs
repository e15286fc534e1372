//! Learned queries in hybrid search: one vector per distinct query that led to tools before,
//! with the tools it led to. A new query's similarity to a tool's learned queries is its best
//! cosine with them; a tool without learned queries has none, so popularity alone ranks
//! nothing.

use std::collections::HashMap;

use super::DocVectors;

/// The learned queries' vectors, each with the documents (ordinals) it led to.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LearnedVectors {
    rows: DocVectors,
    /// Per row, its query.
    texts: Vec<String>,
    /// Per row, the ordinals of its tools.
    owners: Vec<Vec<u32>>,
}

impl LearnedVectors {
    /// From `queries` (a query's text, its vector if it has one, and the keys of the tools it
    /// led to), for an index whose keys by ordinal are `keys`. Queries without a vector or a
    /// live tool are left out.
    pub fn new<'a>(
        dim: usize,
        keys: &[String],
        queries: impl IntoIterator<Item = (&'a str, Option<&'a [f32]>, Vec<&'a str>)>,
    ) -> Self {
        let ord: HashMap<&str, u32> = keys
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.is_empty())
            .map(|(i, k)| (k.as_str(), i as u32))
            .collect();
        let mut vectors = Vec::new();
        let mut texts = Vec::new();
        let mut owners = Vec::new();
        for (text, vector, tools) in queries {
            let Some(vector) = vector.filter(|v| v.len() == dim) else {
                continue;
            };
            let mut of: Vec<u32> = tools.iter().filter_map(|t| ord.get(t).copied()).collect();
            of.sort_unstable();
            of.dedup();
            if !of.is_empty() {
                vectors.push(vector);
                texts.push(text.to_owned());
                owners.push(of);
            }
        }
        Self {
            rows: DocVectors::of_rows(dim, vectors.into_iter().map(Some)),
            texts,
            owners,
        }
    }

    /// The vector kept for the learned query `text`, if any (as kept: within a thousandth).
    pub fn vector(&self, text: &str) -> Option<Vec<f32>> {
        let row = self.texts.iter().position(|t| t == text)?;
        Some(self.rows.row(row).collect())
    }

    /// Each learned query with its vector as kept.
    pub fn vectors(&self) -> impl Iterator<Item = (&str, Vec<f32>)> {
        self.texts
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), self.rows.row(i).collect()))
    }

    /// Learned queries with a vector.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }

    /// Moves each tool's cosine in `cosine` (by ordinal) toward `query`'s best cosine with
    /// the tool's learned queries, by `weight` (0..=1) of the difference, where that is higher;
    /// only the tools whose learned queries are within `margin` of the nearest learned query
    /// (of any tool) move: past queries much like this one speak for their tools, and a
    /// sibling's query that merely shares the context ("in my key vault") less so.
    pub fn lift(&self, cosine: &mut [f32], query: &[f32], weight: f32, margin: f32) {
        if self.is_empty() || weight <= 0.0 {
            return;
        }
        let mut best: Vec<(u32, f32)> = Vec::new();
        for (similarity, owners) in self.rows.scores(query, &[]).into_iter().zip(&self.owners) {
            best.extend(owners.iter().map(|&o| (o, similarity)));
        }
        let nearest = best.iter().map(|&(_, s)| s).fold(f32::MIN, f32::max);
        best.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)));
        best.dedup_by_key(|(o, _)| *o);
        for (o, similarity) in best {
            if similarity < nearest - margin {
                continue;
            }
            if let Some(c) = cosine.get_mut(o as usize)
                && similarity > *c
            {
                *c += weight * (similarity - *c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_moves_toward_its_best_learned_query_and_only_when_closer() {
        let keys = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let near = [1.0, 0.0];
        let far = [0.0, 1.0];
        let learned = LearnedVectors::new(
            2,
            &keys,
            [
                ("near", Some(&near[..]), vec!["a"]),
                ("far", Some(&far[..]), vec!["a", "b"]),
                ("none", None, vec!["c"]),
                ("gone", Some(&near[..]), vec!["gone"]),
            ],
        );
        assert_eq!(learned.len(), 2, "no vector or no live tool: left out");
        assert_eq!(learned.vector("far").unwrap(), far);
        let mut cosine = [0.2, 0.5, 0.3];
        learned.lift(&mut cosine, &[1.0, 0.0], 0.5, 1.0);
        // a: best learned cosine 1.0, halfway from 0.2; b: 0.0 < 0.5, unchanged; c: none.
        assert!((cosine[0] - 0.6).abs() < 0.01, "{cosine:?}");
        assert_eq!(&cosine[1..], [0.5, 0.3]);
        let mut same = [0.2, 0.5, 0.3];
        learned.lift(&mut same, &[1.0, 0.0], 0.0, 1.0);
        assert_eq!(same, [0.2, 0.5, 0.3]);
        // Only the tools near the nearest learned query move.
        let mut near_only = [0.2, -0.5, 0.3];
        learned.lift(&mut near_only, &[1.0, 0.0], 1.0, 0.1);
        assert!((near_only[0] - 1.0).abs() < 0.01, "{near_only:?}");
        assert_eq!(
            near_only[1], -0.5,
            "b's best learned cosine, 0, is far from a's 1"
        );
        let mut every = [0.2, -0.5, 0.3];
        learned.lift(&mut every, &[1.0, 0.0], 1.0, 1.0);
        assert!(every[1].abs() < 0.01, "{every:?}");
    }
}
