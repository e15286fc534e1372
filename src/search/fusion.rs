//! Fusion of the BM25 ranking with the vector ranking. Pure functions over document ordinals,
//! so they are tested without a model.

/// How BM25 and vector rankings are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion: the sum over rankings of `weight / (k + rank)` (rank from 1),
    /// with weight 1 for BM25 and `vector` for the vector ranking. Scale-free. With
    /// `coverage`, a BM25 hit's weight is its coverage (share of the query's IDF weight it
    /// matches), so a rank earned by one common word counts for little.
    Rrf { k: f32, vector: f32, coverage: bool },
    /// `alpha` × BM25 score / best BM25 score + (1 − `alpha`) × cosine.
    Weighted { alpha: f32 },
}

/// Reciprocal rank fusion of `rankings` (ordinals best first, each with its weight): one
/// (ordinal, score) per document found in any ranking, unordered.
pub fn rrf(rankings: &[(&[u32], f32)], k: f32) -> Vec<(u32, f32)> {
    let weighted: Vec<Vec<(u32, f32)>> = rankings
        .iter()
        .map(|(ranking, w)| ranking.iter().map(|&o| (o, *w)).collect())
        .collect();
    let refs: Vec<&[(u32, f32)]> = weighted.iter().map(Vec::as_slice).collect();
    rrf_each(&refs, k)
}

/// Like [`rrf`], with a weight per ranked item: (ordinal, weight) best first.
pub fn rrf_each(rankings: &[&[(u32, f32)]], k: f32) -> Vec<(u32, f32)> {
    let mut scores: std::collections::HashMap<u32, f32> = std::collections::HashMap::new();
    for ranking in rankings {
        for (rank, &(ord, weight)) in ranking.iter().enumerate() {
            *scores.entry(ord).or_default() += weight / (k + rank as f32 + 1.0);
        }
    }
    scores.into_iter().collect()
}

/// Weighted sum over `candidates`: BM25 scores (`bm25`, any order; absent means 0) divided by
/// the best one, and `cosine[ord]`. Unordered.
pub fn weighted(
    bm25: &[(u32, f32)],
    cosine: &[f32],
    candidates: &[u32],
    alpha: f32,
) -> Vec<(u32, f32)> {
    let best = bm25.iter().map(|&(_, s)| s).fold(0.0_f32, f32::max);
    let lexical: std::collections::HashMap<u32, f32> = bm25
        .iter()
        .map(|&(ord, s)| (ord, if best > 0.0 { s / best } else { 0.0 }))
        .collect();
    candidates
        .iter()
        .map(|&ord| {
            let l = lexical.get(&ord).copied().unwrap_or(0.0);
            let c = cosine.get(ord as usize).copied().unwrap_or(0.0);
            (ord, alpha * l + (1.0 - alpha) * c)
        })
        .collect()
}

/// Sorts (ordinal, score) best first; equal scores by ordinal, i.e. by key.
pub fn sort(scored: &mut [(u32, f32)]) {
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(mut scored: Vec<(u32, f32)>) -> Vec<u32> {
        sort(&mut scored);
        scored.into_iter().map(|(o, _)| o).collect()
    }

    #[test]
    fn rrf_rewards_agreement_between_rankings() {
        // 2 is second in both lists and beats 1 and 3, each first in one list only and absent
        // from the other.
        let bm25 = [1, 2, 4];
        let vector = [3, 2, 5];
        let fused = rrf(&[(&bm25, 1.0), (&vector, 1.0)], 60.0);
        assert_eq!(order(fused.clone())[0], 2);
        assert_eq!(fused.len(), 5);
        // Equal evidence ties, and ties fall back to ordinal order.
        assert_eq!(&order(fused)[1..3], [1, 3]);
    }

    #[test]
    fn rrf_weight_and_k_shift_the_balance() {
        let bm25 = [1, 2];
        let vector = [2, 1];
        // Symmetric lists tie; weighting the vector ranking breaks the tie towards it.
        let even = order(rrf(&[(&bm25, 1.0), (&vector, 1.0)], 60.0));
        assert_eq!(even, [1, 2]);
        assert_eq!(order(rrf(&[(&bm25, 1.0), (&vector, 1.5)], 60.0)), [2, 1]);
        // A small k lets one first place beat a fifth place in both lists; a large k does not.
        let a = [1, 10, 11, 12, 2];
        let b = [20, 21, 22, 23, 2];
        assert_eq!(order(rrf(&[(&a, 1.0), (&b, 1.0)], 1.0))[0], 1);
        assert_eq!(order(rrf(&[(&a, 1.0), (&b, 1.0)], 60.0))[0], 2);
    }

    #[test]
    fn per_item_weights_discount_weak_lexical_ranks() {
        // 1 is BM25's first on one common word (weight 0.1); 2 is the vectors' first.
        let lexical = [(1, 0.1), (3, 0.1)];
        let vector = [(2, 1.0), (1, 1.0), (3, 1.0)];
        assert_eq!(order(rrf_each(&[&lexical, &vector], 5.0))[0], 2);
        let full = [(1, 1.0), (3, 1.0)];
        assert_eq!(order(rrf_each(&[&full, &vector], 5.0))[0], 1);
    }

    #[test]
    fn weighted_sum_normalises_bm25_and_mixes_cosine() {
        let bm25 = [(0, 10.0), (1, 5.0)];
        let cosine = [0.1, 0.2, 0.9];
        let all = [0, 1, 2];
        // Lexical only, semantic only, and a mix in which the strong cosine of 2 wins.
        assert_eq!(order(weighted(&bm25, &cosine, &all, 1.0)), [0, 1, 2]);
        assert_eq!(order(weighted(&bm25, &cosine, &all, 0.0)), [2, 1, 0]);
        let mixed = weighted(&bm25, &cosine, &all, 0.5);
        let score = |o| mixed.iter().find(|(x, _)| *x == o).unwrap().1;
        assert!((score(0) - 0.55).abs() < 1e-6);
        assert!((score(1) - 0.35).abs() < 1e-6);
        assert!((score(2) - 0.45).abs() < 1e-6);
        // No BM25 match at all: cosine decides, no division by zero.
        assert_eq!(order(weighted(&[], &cosine, &all, 0.7)), [2, 1, 0]);
    }
}
