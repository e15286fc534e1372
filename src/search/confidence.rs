//! Whether the best hit answers the query: the rule behind `search_tools`'s `confident`.

use super::Hit;

/// From this [`Hit::coverage`] the best hit is strong: it has at least half of what the query
/// asks for; see [`confident`].
pub const CONFIDENT_COVERAGE: f32 = 0.5;
/// From this [`Hit::coverage`] the best hit is strong if it shares two or more query words.
pub const CONFIDENT_SHARED_COVERAGE: f32 = 0.2;
/// From this cosine with the query (all-MiniLM-L6-v2) the best hit is strong whatever its
/// words; see [`confident`].
pub const CONFIDENT_SIMILARITY: f32 = 0.4;

/// Whether `hits` (best first) answer the query well: the best hit is an exact name; or its
/// [`Hit::coverage`] is at least [`CONFIDENT_COVERAGE`] (half the query's IDF weight), or at
/// least [`CONFIDENT_SHARED_COVERAGE`] (a fifth) with two or more query words in common; or
/// (hybrid search) its [`Hit::similarity`] is at least [`CONFIDENT_SIMILARITY`]. Words no tool
/// has count with the highest IDF, so a query whose distinctive words match nothing is weak
/// however high the raw BM25 score of its common words, unless the model says it means what
/// the tool does. One shared word is what noise looks like ("write a tweet" and `write_file`),
/// unless it is most of the query.
///
/// A share of the query's own weight means the same in any catalog, whatever its size or
/// score scale; a cosine means the same for one model. On the MetaTool data, R@1 rises steadily
/// with both; the rule is measured on questions with and without an answer in EVAL.md.
pub fn confident(hits: &[Hit]) -> bool {
    hits.first().is_some_and(|h| {
        h.exact
            || strong_words(h.coverage, h.words)
            || h.similarity.is_some_and(|s| s >= CONFIDENT_SIMILARITY)
    })
}

/// The word part of [`confident`]: half the query's weight, or a fifth with two words.
pub(super) fn strong_words(coverage: f32, words: usize) -> bool {
    coverage >= CONFIDENT_COVERAGE || (coverage >= CONFIDENT_SHARED_COVERAGE && words >= 2)
}
