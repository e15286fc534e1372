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
    /// `alpha` × normalised BM25 + (1 − `alpha`) × normalised cosine, both normalised over the
    /// candidates (BM25 hits and nearest tools) by `norm`.
    Normalized { alpha: f32, norm: Norm },
    /// Cosine + `beta` × coverage (the share of the query's IDF weight a tool matches, 0..=1):
    /// both are bounded, so no per-query normalisation is needed.
    Coverage { beta: f32 },
}

/// Server evidence added to each tool's cosine before fusion: `weight` × a score of its
/// server's tools' cosines with the query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Context {
    /// The mean cosine of the server's tools: the query's cosine with the sum of their vectors
    /// (a server vector), over the number of tools.
    Mean { weight: f32 },
    /// The best cosine among the server's tools.
    Max { weight: f32 },
}

/// Adds [`Context`] to `cosine` (by ordinal), the server of ordinal `i` being `servers[i]`.
pub fn server_context(cosine: &mut [f32], servers: &[String], context: Context) {
    // A server's ordinals are mostly consecutive: one map update per run of them.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for i in 0..servers.len().min(cosine.len()) {
        match runs.last_mut() {
            Some((_, end)) if servers[*end - 1] == servers[i] => *end = i + 1,
            _ => runs.push((i, i + 1)),
        }
    }
    let mut by_server: std::collections::HashMap<&str, (f32, f32, u32)> =
        std::collections::HashMap::new();
    for &(start, end) in &runs {
        let (sum, max, n) = by_server
            .entry(&servers[start])
            .or_insert((0.0, f32::NEG_INFINITY, 0));
        for &c in &cosine[start..end] {
            *sum += c;
            *max = max.max(c);
        }
        *n += (end - start) as u32;
    }
    for &(start, end) in &runs {
        let (sum, max, n) = by_server[servers[start].as_str()];
        let lift = match context {
            Context::Mean { weight } => weight * sum / n as f32,
            Context::Max { weight } => weight * max,
        };
        for c in &mut cosine[start..end] {
            *c += lift;
        }
    }
}

/// Per-query normalisation of one score list for [`Fusion::Normalized`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Norm {
    /// (s − min) / (max − min).
    MinMax,
    /// (s − mean) / standard deviation.
    ZScore,
}

impl Norm {
    /// Normalises `scores` in place; a constant list becomes all zeros.
    pub fn apply(self, scores: &mut [f32]) {
        if scores.is_empty() {
            return;
        }
        let (shift, scale) = match self {
            Norm::MinMax => {
                let min = scores.iter().copied().fold(f32::INFINITY, f32::min);
                let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                (min, max - min)
            }
            Norm::ZScore => {
                let n = scores.len() as f32;
                let mean = scores.iter().sum::<f32>() / n;
                let var = scores.iter().map(|s| (s - mean) * (s - mean)).sum::<f32>() / n;
                (mean, var.sqrt())
            }
        };
        for s in scores.iter_mut() {
            *s = if scale > 0.0 {
                (*s - shift) / scale
            } else {
                0.0
            };
        }
    }
}

/// [`Fusion::Normalized`] over `candidates`: BM25 scores (`bm25`, any order; absent means 0)
/// and `cosine[ord]`, each normalised by `norm` over the candidates. Unordered.
pub fn normalized(
    bm25: &[(u32, f32)],
    cosine: &[f32],
    candidates: &[u32],
    alpha: f32,
    norm: Norm,
) -> Vec<(u32, f32)> {
    let lexical: std::collections::HashMap<u32, f32> = bm25.iter().copied().collect();
    let mut l: Vec<f32> = candidates
        .iter()
        .map(|o| lexical.get(o).copied().unwrap_or(0.0))
        .collect();
    let mut c: Vec<f32> = candidates
        .iter()
        .map(|&o| cosine.get(o as usize).copied().unwrap_or(0.0))
        .collect();
    norm.apply(&mut l);
    norm.apply(&mut c);
    candidates
        .iter()
        .zip(l.iter().zip(&c))
        .map(|(&o, (l, c))| (o, alpha * l + (1.0 - alpha) * c))
        .collect()
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
    fn server_context_lifts_the_tools_of_a_server_near_the_query() {
        // Server b has the two nearest tools (1, 2), server a one near tool (0) and one far
        // (3). Alone, 0 is second; with server evidence b's second tool passes it.
        let servers = ["a", "b", "b", "a"].map(String::from);
        let cosine = [0.50, 0.55, 0.48, 0.0];
        let ranked = |c: &[f32]| order(c.iter().enumerate().map(|(i, &c)| (i as u32, c)).collect());
        assert_eq!(ranked(&cosine)[..3], [1, 0, 2]);
        for context in [Context::Mean { weight: 0.5 }, Context::Max { weight: 0.5 }] {
            let mut c = cosine;
            server_context(&mut c, &servers, context);
            assert_eq!(ranked(&c)[..3], [1, 2, 0], "{context:?}");
        }
        let mut c = cosine;
        server_context(&mut c, &servers, Context::Mean { weight: 1.0 });
        assert!((c[0] - 0.75).abs() < 1e-6 && (c[2] - 0.995).abs() < 1e-6);
    }

    #[test]
    fn norms_map_scores_to_a_common_scale() {
        let mut m = [2.0, 4.0, 6.0];
        Norm::MinMax.apply(&mut m);
        assert_eq!(m, [0.0, 0.5, 1.0]);
        let mut z = [2.0, 4.0, 6.0];
        Norm::ZScore.apply(&mut z);
        assert!((z[0] + z[2]).abs() < 1e-6 && z[1].abs() < 1e-6 && z[2] > 1.0);
        // No spread, no signal: zeros rather than a division by zero.
        let mut flat = [3.0, 3.0];
        Norm::ZScore.apply(&mut flat);
        assert_eq!(flat, [0.0, 0.0]);
    }

    #[test]
    fn normalized_fusion_lets_either_list_win_on_its_spread() {
        // Cosines are close together (0.50-0.56); BM25 separates 0 clearly. After
        // normalisation both lists count on the same scale, so 0 wins at alpha 0.6 although
        // its raw cosine is the lowest; cosine alone picks 1.
        let bm25 = [(0, 12.0), (1, 1.0), (2, 1.0)];
        let cosine = [0.50, 0.56, 0.55];
        let all = [0, 1, 2];
        for norm in [Norm::MinMax, Norm::ZScore] {
            assert_eq!(order(normalized(&bm25, &cosine, &all, 0.6, norm))[0], 0);
            assert_eq!(order(normalized(&bm25, &cosine, &all, 0.0, norm))[0], 1);
        }
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
