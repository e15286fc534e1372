//! The statistics BM25 scores with. tantivy's own give each field its own document
//! frequencies, so a word common in names and descriptions but rare among parameters ("time"
//! of `convert_time`) gets a parameter IDF far above its weight anywhere else; here a word has
//! one document frequency over all of a tool's fields, as in BM25F. Field lengths can also be
//! scaled per field, which softens (factor > 1) that field's length normalisation.

use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::Field;
use tantivy::{Searcher, Term};

use super::tables::Tables;

/// BM25 statistics of a [`super::SearchIndex`] version.
pub(super) struct Stats<'a> {
    pub searcher: &'a Searcher,
    pub tables: &'a Tables,
    /// One document frequency per word over all fields (from `tables`), or tantivy's per field.
    pub global_idf: bool,
    /// (field, factor): the field's total length is reported times the factor.
    pub lengths: &'a [(Field, f32)],
}

impl Bm25StatisticsProvider for Stats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let tokens = Bm25StatisticsProvider::total_num_tokens(self.searcher, field)?;
        let factor = self
            .lengths
            .iter()
            .find(|(f, _)| *f == field)
            .map_or(1.0, |&(_, factor)| f64::from(factor));
        Ok((tokens as f64 * factor).round() as u64)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Bm25StatisticsProvider::total_num_docs(self.searcher)
    }

    /// The live tools that have the word in any field; removed tools no longer count (tantivy
    /// counts them until their segment is dropped).
    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        if self.global_idf
            && let Some(id) = term.value().as_str().and_then(|w| self.tables.vocab.get(w))
        {
            return Ok(u64::from(self.tables.df[*id as usize]));
        }
        self.searcher.doc_freq(term)
    }
}
