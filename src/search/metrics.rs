//! Retrieval metrics for one ranked list against gold items, and their means over many queries.
//!
//! A gold item is a list of acceptable keys (the item, then its alternatives); it counts as found
//! at the first rank holding any of them, and each result can find at most one gold item.

use serde::Serialize;

/// Scores of one query. Recall is the share of gold items found in the top k.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Scores {
    #[serde(rename = "recall@1")]
    pub recall_1: f64,
    /// Share of the gold items in the top 3: what a model reading the first hits gets.
    #[serde(rename = "recall@3")]
    pub recall_3: f64,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    pub mrr: f64,
    #[serde(rename = "ndcg@10")]
    pub ndcg_10: f64,
}

/// Scores `ranked` (best first) against `gold`; a query without gold items scores 0.
pub fn score(ranked: &[&str], gold: &[Vec<String>]) -> Scores {
    if gold.is_empty() {
        return Scores::default();
    }
    let mut found = vec![false; gold.len()];
    // 1-based ranks at which a new gold item was found.
    let mut hits = Vec::new();
    for (i, key) in ranked.iter().enumerate() {
        if let Some(g) = (0..gold.len()).find(|&g| !found[g] && gold[g].iter().any(|k| k == key)) {
            found[g] = true;
            hits.push(i + 1);
        }
    }
    let recall = |k: usize| hits.iter().filter(|&&r| r <= k).count() as f64 / gold.len() as f64;
    let gain = |rank: usize| 1.0 / (rank as f64 + 1.0).log2();
    let dcg: f64 = hits.iter().filter(|&&r| r <= 10).map(|&r| gain(r)).sum();
    let ideal: f64 = (1..=gold.len().min(10)).map(gain).sum();
    Scores {
        recall_1: recall(1),
        recall_3: recall(3),
        recall_5: recall(5),
        recall_10: recall(10),
        mrr: hits.first().map_or(0.0, |&r| 1.0 / r as f64),
        ndcg_10: dcg / ideal,
    }
}

/// Running means of [`Scores`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Mean {
    sum: Scores,
    pub count: usize,
}

impl Mean {
    pub fn add(&mut self, s: Scores) {
        self.sum.recall_1 += s.recall_1;
        self.sum.recall_3 += s.recall_3;
        self.sum.recall_5 += s.recall_5;
        self.sum.recall_10 += s.recall_10;
        self.sum.mrr += s.mrr;
        self.sum.ndcg_10 += s.ndcg_10;
        self.count += 1;
    }

    /// The means; all 0 when nothing was added.
    pub fn get(&self) -> Scores {
        let n = self.count.max(1) as f64;
        Scores {
            recall_1: self.sum.recall_1 / n,
            recall_3: self.sum.recall_3 / n,
            recall_5: self.sum.recall_5 / n,
            recall_10: self.sum.recall_10 / n,
            mrr: self.sum.mrr / n,
            ndcg_10: self.sum.ndcg_10 / n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gold(items: &[&[&str]]) -> Vec<Vec<String>> {
        items
            .iter()
            .map(|keys| keys.iter().map(|k| k.to_string()).collect())
            .collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn single_gold_item_at_each_rank() {
        let g = gold(&[&["b"]]);
        let s = score(&["b", "x"], &g);
        assert_eq!(
            (s.recall_1, s.recall_5, s.mrr, s.ndcg_10),
            (1.0, 1.0, 1.0, 1.0)
        );
        let s = score(&["x", "y", "b"], &g);
        assert_eq!(
            (s.recall_1, s.recall_3, s.recall_5, s.recall_10),
            (0.0, 1.0, 1.0, 1.0)
        );
        assert!(close(s.mrr, 1.0 / 3.0));
        assert!(close(s.ndcg_10, 0.5), "1/log2(4) = 0.5, got {}", s.ndcg_10);
        let ranked: Vec<String> = (0..6).map(|i| format!("x{i}")).collect();
        let mut ranked: Vec<&str> = ranked.iter().map(String::as_str).collect();
        ranked.push("b");
        let s = score(&ranked, &g);
        assert_eq!((s.recall_5, s.recall_10), (0.0, 1.0));
        assert_eq!(score(&["x"], &g), Scores::default());
    }

    #[test]
    fn alternatives_count_and_each_result_finds_one_item() {
        let g = gold(&[&["a", "a2"], &["b"]]);
        let s = score(&["a2", "z", "b"], &g);
        assert_eq!(s.recall_1, 0.5);
        assert_eq!(s.recall_3, 1.0);
        assert_eq!(s.recall_5, 1.0);
        assert_eq!(s.mrr, 1.0);
        let ideal = 1.0 + 1.0 / 3f64.log2();
        assert!(close(s.ndcg_10, (1.0 + 0.5) / ideal));
        // "a" and its alternative "a2" are one item: finding both counts once.
        let s = score(&["a", "a2"], &g);
        assert_eq!(s.recall_5, 0.5);
    }

    #[test]
    fn means_average_queries() {
        let mut m = Mean::default();
        assert_eq!(m.get(), Scores::default());
        m.add(score(&["a"], &gold(&[&["a"]])));
        m.add(score(&["x", "a"], &gold(&[&["a"]])));
        let s = m.get();
        assert_eq!(m.count, 2);
        assert_eq!((s.recall_1, s.recall_5), (0.5, 1.0));
        assert!(close(s.mrr, 0.75));
    }
}
