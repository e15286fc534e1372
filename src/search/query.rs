//! Query building: the query's analyzed words (minus words too common to tell tools apart),
//! their IDF weights and synonyms, and the tantivy query of one boosted term clause per (word,
//! field).

use tantivy::Term;
use tantivy::query::{
    BooleanQuery, BoostQuery, DisjunctionMaxQuery, Occur, PhraseQuery, Query, TermQuery,
};
use tantivy::schema::IndexRecordOption;

use super::{Combine, SearchIndex, tokenizer};

/// Bytes of a query that are read; the rest is ignored.
const MAX_QUERY_BYTES: usize = 4096;
/// Query words that are searched; the rest are ignored.
const MAX_QUERY_WORDS: usize = 64;
/// What opens or closes quoted text in a query.
const QUOTES: [char; 5] = ['"', '\'', '`', '“', '”'];

/// A query word's synonym that some tool has.
pub(super) struct Synonym<'a> {
    /// Its analyzed text.
    text: &'a str,
    pub(super) id: u32,
    /// Its clauses' weight relative to the word's.
    pub(super) scale: f32,
}

impl SearchIndex {
    /// The query's analyzed words, without those found in
    /// more than `max_df` of the tools when some rarer word that a tool has remains.
    pub(super) fn words(&self, query: &str) -> Vec<String> {
        // A query is a sentence or two; a megabyte of it must not cost a megabyte of work.
        let end = query.floor_char_boundary(MAX_QUERY_BYTES);
        let mut analyzer = self.analyzer.clone();
        let mut words = Vec::new();
        let mut stream = analyzer.token_stream(&query[..end]);
        while let Some(token) = stream.next() {
            if words.len() == MAX_QUERY_WORDS {
                break;
            }
            // A word also given in parts (`MySQL`: `my`, `sql`) is searched whole only when
            // some tool has it: otherwise its parts stand for it, and it would only count as
            // a word no tool matches.
            if token.position_length >= tokenizer::JOINED
                && !self.tables.vocab.contains_key(&token.text)
            {
                continue;
            }
            words.push(token.text.clone());
        }
        let n = self.len();
        if self.options.max_df < 1.0 && n >= 20 {
            let common = |w: &String| {
                self.tables.vocab.get(w).is_some_and(|&id| {
                    self.tables.df[id as usize] as f32 > self.options.max_df * n as f32
                })
            };
            let rare = |w: &String| self.tables.vocab.contains_key(w) && !common(w);
            if words.iter().any(rare) {
                words.retain(|w| !common(w));
            }
        }
        words
    }

    /// The query's words as written that stemming changes (`papers` of `papers`, `paper`),
    /// for the surface field; none unless [`super::SearchOptions::surface`] is set.
    pub(super) fn surface_words(&self, query: &str, words: &[String]) -> Vec<String> {
        if self.options.surface == 0.0 || !self.options.stem {
            return Vec::new();
        }
        let end = query.floor_char_boundary(MAX_QUERY_BYTES);
        let mut analyzer = self.surface.clone();
        let mut surface = Vec::new();
        let mut stream = analyzer.token_stream(&query[..end]);
        while let Some(token) = stream.next() {
            if surface.len() == MAX_QUERY_WORDS {
                break;
            }
            if !words.contains(&token.text) && !surface.contains(&token.text) {
                surface.push(token.text.clone());
            }
        }
        surface
    }

    /// For each distinct query word (in the order of [`Self::weights`]), whether it is written
    /// as an argument value: a name (capitalised, not opening the query or a sentence), a
    /// number or id (it has a digit), a path, URL or address (`/`, `\\`, `@`, `:`, or a `.`
    /// inside it), or quoted text. Such a word says what to act on, not what to do: when no
    /// tool has it, it does not count against a tool that covers the rest (`Hit::coverage`).
    pub(super) fn argument_values(&self, query: &str, words: &[String]) -> Vec<bool> {
        let end = query.floor_char_boundary(MAX_QUERY_BYTES);
        let mut analyzer = self.analyzer.clone();
        let mut values: Vec<String> = Vec::new();
        let (mut quoted, mut sentence_start) = (false, true);
        for raw in query[..end].split_whitespace() {
            let opens = raw.starts_with(QUOTES);
            let word = raw.trim_matches(|c: char| !c.is_alphanumeric());
            let mut letters = word.chars();
            let capitalised =
                letters.next().is_some_and(char::is_uppercase) && letters.any(char::is_lowercase);
            let value = quoted
                || opens
                || (capitalised && !sentence_start)
                || word.chars().any(|c| c.is_ascii_digit())
                || word.contains(['/', '\\', '@', ':', '.']);
            let after_open = raw.char_indices().nth(1).map_or("", |(i, _)| &raw[i..]);
            if opens && !after_open.ends_with(QUOTES) {
                quoted = true;
            } else if quoted && raw.ends_with(QUOTES) {
                quoted = false;
            }
            sentence_start = raw.ends_with(['.', '?', '!', ':']);
            if value {
                let mut stream = analyzer.token_stream(word);
                while let Some(token) = stream.next() {
                    values.push(token.text.clone());
                }
            }
        }
        distinct(words).map(|w| values.contains(w)).collect()
    }

    /// Distinct query words with their term id (if any tool has the word), IDF weight, and
    /// whether it counts as a word of its own in [`Hit::words`] (a lone CJK character of a
    /// longer CJK word does not: `文件` gives `文`, `文件`, `件`, one word).
    pub(super) fn weights(&self, words: &[String]) -> Vec<(Option<u32>, f32, bool)> {
        distinct(words)
            .map(|w| {
                let id = self.tables.vocab.get(w).copied();
                (id, self.idf(id), !tokenizer::is_cjk_char(w))
            })
            .collect()
    }

    /// For each distinct query word (in the order of [`Self::weights`]), its synonyms that
    /// are in the vocabulary and not query words themselves; all empty unless `expand`.
    pub(super) fn expansions<'a>(
        &'a self,
        words: &[String],
        expand: bool,
    ) -> Vec<Vec<Synonym<'a>>> {
        let expand = expand && self.options.synonyms > 0.0;
        distinct(words)
            .map(|w| {
                if !expand {
                    return Vec::new();
                }
                let word_idf = self.idf(self.tables.vocab.get(w).copied());
                let synonyms = self.synonyms.of(w).iter();
                synonyms
                    .filter(|s| !words.contains(s))
                    .filter_map(|s| {
                        let id = *self.tables.vocab.get(s)?;
                        // A synonym weighs at most what the word itself does: a rare synonym
                        // of a common word ("fetch" for "get") must not outrank the tools that
                        // have it.
                        let rarity = (word_idf / self.idf(Some(id))).min(1.0);
                        Some(Synonym {
                            text: s,
                            id,
                            scale: self.options.synonyms * rarity,
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// BM25's IDF of the term `id` (of a word no tool has, when `None`).
    pub(super) fn idf(&self, id: Option<u32>) -> f32 {
        let df = id.map_or(0.0, |id| self.tables.df[id as usize] as f32);
        idf(self.len() as f32, df)
    }

    /// One term clause per searched field for `word`, boosted by the field's weight × `scale`.
    fn per_field(&self, word: &str, scale: f32) -> Vec<Box<dyn Query>> {
        self.fields
            .text
            .iter()
            // Without learned queries the field is not looked up: search is as without it.
            .filter(|&&(field, boost)| {
                boost > 0.0 && (field != self.fields.learned || self.learned_docs > 0)
            })
            .map(|&(field, boost)| {
                let tq = TermQuery::new(
                    Term::from_field_text(field, word),
                    IndexRecordOption::WithFreqs,
                );
                Box::new(BoostQuery::new(Box::new(tq), boost * scale)) as Box<dyn Query>
            })
            .collect()
    }

    /// Adds one term's per-field clauses to `clauses`, summed or DisMax as
    /// [`super::SearchOptions::combine`] says.
    fn add_fields(
        &self,
        clauses: &mut Vec<(Occur, Box<dyn Query>)>,
        per_field: Vec<Box<dyn Query>>,
    ) {
        if per_field.is_empty() {
            return;
        }
        match self.options.combine {
            Combine::Sum => clauses.extend(per_field.into_iter().map(|q| (Occur::Should, q))),
            Combine::DisMax { tie } => clauses.push((
                Occur::Should,
                Box::new(DisjunctionMaxQuery::with_tie_breaker(per_field, tie)),
            )),
        }
    }

    /// One clause per distinct query word over all fields (summed or DisMax), its
    /// `synonyms`' clauses (see [`Self::expansions`]), one per `surface` word in the surface
    /// field, plus phrase clauses for adjacent words.
    pub(super) fn query(
        &self,
        words: &[String],
        surface: &[String],
        server: Option<&str>,
        synonyms: &[Vec<Synonym>],
    ) -> Option<Box<dyn Query>> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for word in surface {
            let tq = TermQuery::new(
                Term::from_field_text(self.fields.surface, word),
                IndexRecordOption::WithFreqs,
            );
            let boosted = BoostQuery::new(Box::new(tq), self.options.surface);
            clauses.push((Occur::Should, Box::new(boosted)));
        }
        for word in distinct(words) {
            if !self.tables.vocab.contains_key(word) {
                continue; // no tool has it: nothing to look up
            }
            self.add_fields(&mut clauses, self.per_field(word, 1.0));
        }
        let mut expanded: Vec<u32> = Vec::new();
        for word_synonyms in synonyms {
            // Per field, one clause per synonym of this word.
            let mut by_field: Vec<Vec<Box<dyn Query>>> = Vec::new();
            for synonym in word_synonyms {
                if expanded.contains(&synonym.id) {
                    continue;
                }
                expanded.push(synonym.id);
                let per_field = self.per_field(synonym.text, synonym.scale);
                by_field.resize_with(per_field.len(), Vec::new);
                for (field, q) in by_field.iter_mut().zip(per_field) {
                    field.push(q);
                }
            }
            // In each field the best of a word's synonyms counts, not their sum: a tool with
            // "fetch", "retrieve" and "obtain" does not outweigh one with "get".
            let per_field = by_field
                .into_iter()
                .map(|mut alternatives| match alternatives.len() {
                    1 => alternatives.pop().expect("one"),
                    _ => Box::new(DisjunctionMaxQuery::new(alternatives)) as Box<dyn Query>,
                })
                .collect();
            self.add_fields(&mut clauses, per_field);
        }
        if self.options.phrase > 0.0 {
            for pair in words.windows(2).filter(|p| p[0] != p[1]) {
                for (field, boost) in [
                    (self.fields.name, self.options.name),
                    (self.fields.description, self.options.description),
                ] {
                    let mut pq = PhraseQuery::new(vec![
                        Term::from_field_text(field, &pair[0]),
                        Term::from_field_text(field, &pair[1]),
                    ]);
                    pq.set_slop(1);
                    clauses.push((
                        Occur::Should,
                        Box::new(BoostQuery::new(Box::new(pq), boost * self.options.phrase)),
                    ));
                }
            }
        }
        if clauses.is_empty() {
            return None;
        }
        let words: Box<dyn Query> = Box::new(BooleanQuery::new(clauses));
        Some(match server {
            None => words,
            Some(server) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, words),
                (
                    Occur::Must,
                    Box::new(TermQuery::new(
                        Term::from_field_text(self.fields.server, server),
                        IndexRecordOption::Basic,
                    )),
                ),
            ])),
        })
    }
}

/// Each word of `words` once, in order of first appearance.
pub(super) fn distinct(words: &[String]) -> impl Iterator<Item = &String> + Clone {
    words
        .iter()
        .enumerate()
        .filter(|&(i, w)| !words[..i].contains(w))
        .map(|(_, w)| w)
}

/// BM25's inverse document frequency of a word found in `df` of `n` tools.
fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}
