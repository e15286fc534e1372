//! Tool search: a tantivy BM25 index over names, titles, descriptions, parameters and server
//! text, with identifier splitting and English stemming. Knows nothing of MCP transport.

pub mod embed;
pub mod fusion;
pub mod metrics;
mod options;
mod tables;
mod tokenizer;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

use tantivy::collector::{Count, TopDocs};
use tantivy::indexer::NoMergePolicy;
use tantivy::query::{
    BooleanQuery, BoostQuery, DisjunctionMaxQuery, Occur, PhraseQuery, Query, TermQuery,
};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, Term, doc};

use tables::Tables;

pub use embed::DocVectors;
pub use options::{Combine, Fusion, SearchOptions, StopWords};
pub use tokenizer::{split_words, words_of};

const ANALYZER: &str = "ident";

/// From this [`Hit::coverage`] the best hit is strong: it has at least half of what the query
/// asks for; see [`confident`].
pub const CONFIDENT_COVERAGE: f32 = 0.5;
/// From this [`Hit::coverage`] the best hit is strong if it shares two or more query words.
pub const CONFIDENT_SHARED_COVERAGE: f32 = 0.2;
/// From this cosine with the query (all-MiniLM-L6-v2) the best hit is strong whatever its
/// words; see [`confident`].
pub const CONFIDENT_SIMILARITY: f32 = 0.4;

/// Errors from the search engine (index build or query execution).
#[derive(Debug, thiserror::Error)]
#[error("search index: {0}")]
pub struct SearchError(#[from] tantivy::TantivyError);

/// One searchable tool. `key` is its unique (qualified) name.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDoc {
    pub key: String,
    pub server: String,
    pub name: String,
    pub title: String,
    pub description: String,
    /// Parameter names and their descriptions.
    pub params: String,
    /// Server name, display key and description.
    pub server_text: String,
}

/// A ranked result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub key: String,
    pub score: f32,
    /// Share (0..=1) of the query's weight this tool matches: the summed IDF of the query words
    /// found in any of its fields over the summed IDF of all query words. 1 for exact names.
    pub coverage: f32,
    /// How many distinct query words this tool has (in any field).
    pub words: usize,
    /// The query is this tool's name or qualified name.
    pub exact: bool,
    /// The query is one word and no tool's name (written like an identifier, or matching no
    /// tool's words well), but this tool's name is a typo away or the query names it on
    /// another server (did-you-mean). Such hits come first.
    pub close: bool,
    /// Cosine of the query's vector with this tool's, in hybrid search.
    pub similarity: Option<f32>,
}

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

/// Whether `query` is written like an identifier: one word with `_`, `-`, `.` or a lower-case
/// letter followed by a capital (`get_time`, `getTime`).
fn identifier_like(query: &str) -> bool {
    let query = query.trim();
    !query.contains(char::is_whitespace)
        && (query.contains(['_', '-', '.'])
            || query
                .chars()
                .zip(query.chars().skip(1))
                .any(|(a, b)| a.is_lowercase() && b.is_uppercase()))
}

/// The word part of [`confident`]: half the query's weight, or a fifth with two words.
fn strong_words(coverage: f32, words: usize) -> bool {
    coverage >= CONFIDENT_COVERAGE || (coverage >= CONFIDENT_SHARED_COVERAGE && words >= 2)
}

#[derive(Clone)]
struct Fields {
    ord: Field,
    server: Field,
    name: Field,
    title: Field,
    description: Field,
    params: Field,
    server_text: Field,
    /// (field, boost) pairs searched by every query word.
    text: Vec<(Field, f32)>,
}

/// Bytes of a query that are read; the rest is ignored.
const MAX_QUERY_BYTES: usize = 4096;
/// Query words that are searched; the rest are ignored.
const MAX_QUERY_WORDS: usize = 64;
/// Indexing memory of tantivy's writer (its minimum).
const WRITER_BYTES: usize = 15_000_000;

/// An in-memory BM25 index over a set of tools. Immutable: [`Self::replace_server`] returns
/// a new version that shares the tantivy index, while searches on this one go on unchanged.
pub struct SearchIndex {
    index: Index,
    reader: IndexReader,
    /// This version's view of the index.
    searcher: Searcher,
    /// The newest version of this index; only that one may be updated.
    generation: Arc<AtomicU64>,
    version: u64,
    /// The documents' analyzer, reused for queries.
    analyzer: TextAnalyzer,
    fields: Fields,
    options: SearchOptions,
    tables: Tables,
}

impl SearchIndex {
    /// Builds the index with the default options.
    pub fn build(docs: Vec<ToolDoc>) -> Result<Self, SearchError> {
        Self::build_with(docs, SearchOptions::default())
    }

    /// Builds the index; documents are added in key order so equal input gives equal output.
    pub fn build_with(mut docs: Vec<ToolDoc>, options: SearchOptions) -> Result<Self, SearchError> {
        docs.sort_by(|a, b| a.key.cmp(&b.key));
        let name_parts = if options.decompound {
            decompound_names(&docs)
        } else {
            vec![String::new(); docs.len()]
        };
        let mut sb = Schema::builder();
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let ord = sb.add_u64_field("ord", FAST);
        let server = sb.add_text_field("server_raw", STRING);
        let name = sb.add_text_field("name", text.clone());
        let title = sb.add_text_field("title", text.clone());
        let description = sb.add_text_field("description", text.clone());
        let params = sb.add_text_field("params", text.clone());
        let server_text = sb.add_text_field("server", text);
        let fields = Fields {
            ord,
            server,
            name,
            title,
            description,
            params,
            server_text,
            text: vec![
                (name, options.name),
                (title, options.title),
                (description, options.description),
                (params, options.params),
                (server_text, options.server),
            ],
        };
        let index = Index::create_in_ram(sb.build());
        let mut analyzer = analyzer(&options);
        index.tokenizers().register(ANALYZER, analyzer.clone());
        let mut tables = Tables::default();
        commit_docs(
            &index,
            None,
            &fields,
            &mut analyzer,
            &mut tables,
            &docs,
            &name_parts,
        )?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let searcher = reader.searcher();
        Ok(Self {
            index,
            reader,
            searcher,
            generation: Arc::new(AtomicU64::new(0)),
            version: 0,
            analyzer,
            fields,
            options,
            tables,
        })
    }

    /// A new version in which `docs` replace the documents of `server`, updating that
    /// server's postings only. `None` when a full [`Self::build_with`] is due instead: removed
    /// documents would exceed a quarter of the ordinals (they still count in tantivy's BM25
    /// statistics until a rebuild drops them), names are decompounded over the whole catalog,
    /// or this is not the newest version.
    pub fn replace_server(
        &self,
        server: &str,
        mut docs: Vec<ToolDoc>,
    ) -> Result<Option<Self>, SearchError> {
        let removed = self.tables.removed() + self.tables.ords_of(server).len();
        let ordinals = self.tables.keys.len() + docs.len();
        if self.options.decompound
            || removed * 4 > ordinals
            || self
                .generation
                .compare_exchange(self.version, self.version + 1, SeqCst, SeqCst)
                .is_err()
        {
            return Ok(None);
        }
        docs.sort_by(|a, b| a.key.cmp(&b.key));
        let mut tables = self.tables.clone();
        tables.remove_server(server);
        let mut analyzer = self.analyzer.clone();
        commit_docs(
            &self.index,
            Some(Term::from_field_text(self.fields.server, server)),
            &self.fields,
            &mut analyzer,
            &mut tables,
            &docs,
            &vec![String::new(); docs.len()],
        )?;
        self.reader.reload()?;
        Ok(Some(Self {
            index: self.index.clone(),
            reader: self.reader.clone(),
            searcher: self.reader.searcher(),
            generation: self.generation.clone(),
            version: self.version + 1,
            analyzer,
            fields: self.fields.clone(),
            options: self.options.clone(),
            tables,
        }))
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.tables.live
    }

    pub fn is_empty(&self) -> bool {
        self.tables.live == 0
    }

    /// Top `limit` tools for `query`, optionally only from `server`. Ties are broken by key.
    ///
    /// A query that is exactly a tool name or qualified name puts those tools first.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        server: Option<&str>,
    ) -> Result<Vec<Hit>, SearchError> {
        self.rank(query, limit, server, None)
    }

    /// Like [`Self::search`], fusing the BM25 ranking with the cosine ranking of `vectors`
    /// (rows in document order, see [`Self::keys`]) against `query_vector`, as
    /// [`SearchOptions::fusion`] says. Exact names still come first.
    pub fn search_hybrid(
        &self,
        query: &str,
        query_vector: &[f32],
        vectors: &DocVectors,
        limit: usize,
        server: Option<&str>,
    ) -> Result<Vec<Hit>, SearchError> {
        self.rank(query, limit, server, Some((query_vector, vectors)))
    }

    /// Tool keys by document ordinal; removed tools are empty strings.
    pub fn keys(&self) -> &[String] {
        &self.tables.keys
    }

    pub fn options(&self) -> &SearchOptions {
        &self.options
    }

    fn rank(
        &self,
        query: &str,
        limit: usize,
        server: Option<&str>,
        dense: Option<(&[f32], &DocVectors)>,
    ) -> Result<Vec<Hit>, SearchError> {
        let words = self.words(query);
        let exact: Vec<u32> = self
            .tables
            .names
            .get(query.trim().to_lowercase().as_str())
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
        let total: f32 = weights.iter().map(|(_, w, _)| w).sum();
        // (coverage, words) of a tool: see `Hit::coverage` and `Hit::words`.
        let shared = |i: u32| {
            let terms = &self.tables.doc_terms[i as usize];
            let (matched, words) = weights
                .iter()
                .filter(|(id, _, _)| id.is_some_and(|id| terms.binary_search(&id).is_ok()))
                .fold((0.0, 0), |(weight, words), (_, w, counts)| {
                    (weight + w, words + usize::from(*counts))
                });
            (if total > 0.0 { matched / total } else { 0.0 }, words)
        };
        let coverage = |i: u32| shared(i).0;
        let mut bm25: Vec<(u32, f32)> = Vec::new();
        if let Some(q) = self.query(&words, server) {
            let searcher = &self.searcher;
            // Paired with `Count`, TopDocs scores every match instead of pruning with
            // block-WAND: a question's many words over five fields give dozens of posting
            // lists, where pruning spends more keeping them ordered than it skips (p99 at 10k
            // tools 2.2 ms -> 0.8 ms, BENCHMARKS.md).
            let exhaustive = (TopDocs::with_limit(pool).order_by_score(), Count);
            let (top, _) = searcher.search(&q, &exhaustive)?;
            let mut ords = Vec::with_capacity(searcher.segment_readers().len());
            for segment in searcher.segment_readers() {
                ords.push(segment.fast_fields().u64("ord")?);
            }
            for (score, addr) in top {
                if let Some(i) = ords[addr.segment_ord as usize].first(addr.doc_id) {
                    let i = i as u32;
                    let score = if self.options.coverage == 0.0 {
                        score
                    } else {
                        score * coverage(i).powf(self.options.coverage)
                    };
                    bm25.push((i, score));
                }
            }
        }
        // Did-you-mean for what looks like an identifier, and for a plain word only when no
        // tool matches the query's words well: "email" is one letter from a tool called
        // `mail`, and must not push `send_email` down.
        let close = if exact.is_empty()
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
        let cosine = dense.map(|(query_vector, vectors)| vectors.scores(query_vector));
        let mut scored = match &cosine {
            None => bm25,
            Some(cosine) => self.fuse(bm25, cosine, pool, server, &coverage),
        };
        // An exact or close name outside the pool (its words are common) still comes first.
        for &i in exact.iter().chain(&close) {
            if !scored.iter().any(|&(j, _)| j == i) {
                scored.push((i, 0.0));
            }
        }
        let first = |i: u32| exact.contains(&i) || close.contains(&i);
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
    /// with every document, by ordinal).
    fn fuse(
        &self,
        mut bm25: Vec<(u32, f32)>,
        cosine: &[f32],
        pool: usize,
        server: Option<&str>,
        coverage: &dyn Fn(u32) -> f32,
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
                let lexical: Vec<(u32, f32)> = bm25
                    .iter()
                    .map(|&(i, _)| (i, if by_coverage { coverage(i) } else { 1.0 }))
                    .collect();
                let semantic: Vec<(u32, f32)> = nearest.iter().map(|&(i, _)| (i, vector)).collect();
                fusion::rrf_each(&[&lexical, &semantic], k)
            }
            Fusion::Weighted { alpha } => {
                fusion::weighted(&bm25, cosine, &candidates(&bm25, &nearest), alpha)
            }
            Fusion::Normalized { alpha, norm } => {
                fusion::normalized(&bm25, cosine, &candidates(&bm25, &nearest), alpha, norm)
            }
            Fusion::Coverage { beta } => candidates(&bm25, &nearest)
                .into_iter()
                .map(|i| (i, cosine[i as usize] + beta * coverage(i)))
                .collect(),
        }
    }

    /// For a one-word query that is no tool's name: the tools whose name or qualified name is
    /// within a typo of it, compared [`tables::squash`]ed (1 edit from 4 letters, 2 from 9),
    /// or whose name is the tool part of a qualified query on another server.
    fn close_names(&self, query: &str, server: Option<&str>) -> Vec<u32> {
        let query = query.trim();
        if query.is_empty() || query.contains(char::is_whitespace) || query.len() > 200 {
            return Vec::new();
        }
        let wanted = tables::squash(query);
        let length = wanted.chars().count();
        let typos = match length {
            0..4 => 0,
            4..=8 => 1,
            _ => 2,
        };
        let mut close: Vec<u32> = Vec::new();
        // Qualified names are `<server>__<tool>`; server names have no `__` of their own.
        if let Some((prefix, tool)) = query.split_once("__")
            && prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            && let Some(ords) = self.tables.names.get(tool.to_lowercase().as_str())
        {
            close.extend(ords);
        }
        if typos > 0 {
            let letters = tables::letters(&wanted);
            let differ = |a: u64, b: u64| (a & !b).count_ones() as usize;
            for (name, (name_letters, ords)) in &self.tables.squashed {
                if differ(letters, *name_letters) <= typos
                    && differ(*name_letters, letters) <= typos
                    && name.chars().count().abs_diff(length) <= typos
                    && strsim::osa_distance(name, &wanted) <= typos
                {
                    close.extend(ords);
                }
            }
        }
        close.retain(|&i| server.is_none_or(|s| self.tables.servers[i as usize] == s));
        close.sort_unstable();
        close.dedup();
        close
    }

    /// The query's analyzed words in order (duplicates kept for phrases), minus words found in
    /// more than `max_df` of the tools when some rarer word that a tool has remains.
    fn words(&self, query: &str) -> Vec<String> {
        // A query is a sentence or two; a megabyte of it must not cost a megabyte of work.
        let end = query.floor_char_boundary(MAX_QUERY_BYTES);
        let mut analyzer = self.analyzer.clone();
        let mut words = Vec::new();
        let mut stream = analyzer.token_stream(&query[..end]);
        while let Some(token) = stream.next() {
            if words.len() == MAX_QUERY_WORDS {
                break;
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

    /// Distinct query words with their term id (if any tool has the word), IDF weight, and
    /// whether it counts as a word of its own in [`Hit::words`] (a lone CJK character of a
    /// longer CJK word does not: `文件` gives `文`, `文件`, `件`, one word).
    fn weights(&self, words: &[String]) -> Vec<(Option<u32>, f32, bool)> {
        let n = self.len() as f32;
        let mut seen: Vec<&String> = Vec::new();
        let mut out = Vec::new();
        for w in words {
            if seen.contains(&w) {
                continue;
            }
            seen.push(w);
            let id = self.tables.vocab.get(w).copied();
            let df = id.map_or(0.0, |id| self.tables.df[id as usize] as f32);
            out.push((id, idf(n, df), !tokenizer::is_cjk_char(w)));
        }
        out
    }

    /// One clause per distinct query word over all fields (summed or DisMax), plus phrase
    /// clauses for adjacent words.
    fn query(&self, words: &[String], server: Option<&str>) -> Option<Box<dyn Query>> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut seen: Vec<&String> = Vec::new();
        for word in words {
            if seen.contains(&word) {
                continue;
            }
            seen.push(word);
            if !self.tables.vocab.contains_key(word) {
                continue; // no tool has it: nothing to look up
            }
            let per_field: Vec<Box<dyn Query>> = self
                .fields
                .text
                .iter()
                .filter(|(_, boost)| *boost > 0.0)
                .map(|&(field, boost)| {
                    let tq = TermQuery::new(
                        Term::from_field_text(field, word),
                        IndexRecordOption::WithFreqs,
                    );
                    Box::new(BoostQuery::new(Box::new(tq), boost)) as Box<dyn Query>
                })
                .collect();
            if per_field.is_empty() {
                continue;
            }
            match self.options.combine {
                Combine::Sum => clauses.extend(per_field.into_iter().map(|q| (Occur::Should, q))),
                Combine::DisMax { tie } => clauses.push((
                    Occur::Should,
                    Box::new(DisjunctionMaxQuery::with_tie_breaker(per_field, tie)),
                )),
            }
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

/// Deletes the documents matching `delete`, adds `docs` (each with the next ordinal of
/// `tables`, which records them too) and commits. The writer is single-threaded and never
/// merges: every commit adds one segment, and a segment whose documents are all deleted is
/// dropped at the next commit.
fn commit_docs(
    index: &Index,
    delete: Option<Term>,
    fields: &Fields,
    analyzer: &mut TextAnalyzer,
    tables: &mut Tables,
    docs: &[ToolDoc],
    name_parts: &[String],
) -> Result<(), SearchError> {
    let mut writer: IndexWriter = index.writer_with_num_threads(1, WRITER_BYTES)?;
    writer.set_merge_policy(Box::new(NoMergePolicy));
    if let Some(term) = delete {
        writer.delete_term(term);
    }
    for (d, parts) in docs.iter().zip(name_parts) {
        let texts = [
            &d.name,
            parts,
            &d.title,
            &d.description,
            &d.params,
            &d.server_text,
        ];
        let mut terms = Vec::new();
        for text in texts {
            let mut stream = analyzer.token_stream(text);
            while let Some(token) = stream.next() {
                terms.push(token.text.clone());
            }
        }
        let ord = tables.add(&d.key, &d.server, [d.name.as_str(), d.key.as_str()], terms);
        writer.add_document(doc!(
            fields.ord => u64::from(ord),
            fields.server => d.server.as_str(),
            fields.name => format!("{} {parts}", d.name),
            fields.title => d.title.as_str(),
            fields.description => d.description.as_str(),
            fields.params => d.params.as_str(),
            fields.server_text => d.server_text.as_str(),
        ))?;
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    Ok(())
}

/// Per tool, its run-together name words split into words of at least 3 letters that the
/// catalog's texts use as words of their own: `keywordexplorer` gives `keyword explorer`.
fn decompound_names(docs: &[ToolDoc]) -> Vec<String> {
    let mut vocab = std::collections::HashSet::new();
    for d in docs.iter() {
        for text in [&d.name, &d.title, &d.description, &d.params] {
            for (s, e) in split_words(text) {
                let w = text[s..e].to_lowercase();
                if w.len() >= 3 && w.chars().all(|c| c.is_ascii_alphabetic()) {
                    vocab.insert(w);
                }
            }
        }
    }
    let mut out = Vec::with_capacity(docs.len());
    for d in docs {
        let mut extra = Vec::new();
        for (s, e) in split_words(&d.name) {
            let w = d.name[s..e].to_lowercase();
            if w.len() >= 6
                && w.chars().all(|c| c.is_ascii_alphabetic())
                && let Some(parts) = segment(&w, &vocab)
            {
                extra.extend(parts);
            }
        }
        out.push(extra.join(" "));
    }
    out
}

/// The split of `word` into the fewest `vocab` words (at least two), if there is one.
fn segment(word: &str, vocab: &std::collections::HashSet<String>) -> Option<Vec<String>> {
    let n = word.len();
    // best[i]: fewest parts covering word[..i], with the start of the last part.
    let mut best: Vec<Option<(usize, usize)>> = vec![None; n + 1];
    best[0] = Some((0, 0));
    for end in 3..=n {
        for start in 0..=end - 3 {
            if let Some((parts, _)) = best[start]
                && (start, end) != (0, n)
                && vocab.contains(&word[start..end])
                && best[end].is_none_or(|(p, _)| parts + 1 < p)
            {
                best[end] = Some((parts + 1, start));
            }
        }
    }
    let (parts, _) = best[n]?;
    let mut out = Vec::with_capacity(parts);
    let mut end = n;
    while end > 0 {
        let (_, start) = best[end]?;
        out.push(word[start..end].to_owned());
        end = start;
    }
    out.reverse();
    Some(out)
}

/// BM25's inverse document frequency of a word found in `df` of `n` tools.
fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

fn analyzer(options: &SearchOptions) -> TextAnalyzer {
    let tokenizer = tokenizer::IdentTokenizer {
        split_case: options.split_case,
    };
    let mut builder = TextAnalyzer::builder(tokenizer)
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .dynamic();
    match options.stopwords {
        StopWords::None => {}
        StopWords::Lucene => {
            builder = builder.filter_dynamic(
                StopWordFilter::new(Language::English).expect("tantivy has English stop words"),
            );
        }
        StopWords::Snowball => {
            builder = builder.filter_dynamic(StopWordFilter::remove(
                tokenizer::SNOWBALL_ENGLISH
                    .split_whitespace()
                    .map(str::to_owned),
            ));
        }
    }
    if options.stem {
        builder = builder.filter_dynamic(Stemmer::new(Language::English));
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(server: &str, name: &str, description: &str, params: &str) -> ToolDoc {
        ToolDoc {
            key: format!("{server}__{name}"),
            server: server.into(),
            name: name.into(),
            title: String::new(),
            description: description.into(),
            params: params.into(),
            server_text: server.into(),
        }
    }

    fn index() -> SearchIndex {
        SearchIndex::build(index_docs()).unwrap()
    }

    fn index_docs() -> Vec<ToolDoc> {
        vec![
            doc(
                "fs",
                "read_text_file",
                "Read the complete contents of a file as text",
                "path head tail",
            ),
            doc(
                "fs",
                "write_file",
                "Create a new file or overwrite a file",
                "path content",
            ),
            doc(
                "fs",
                "list_directory",
                "List files and directories in a path",
                "path",
            ),
            doc("everything", "echo", "Echoes back the input", "message"),
            doc(
                "everything",
                "get-sum",
                "Returns the sum of two numbers",
                "a b",
            ),
            doc(
                "time",
                "get_current_time",
                "Get current time in a specific timezone",
                "timezone",
            ),
            doc(
                "time",
                "convert_time",
                "Convert time between timezones",
                "source_timezone time target_timezone",
            ),
            doc(
                "gh",
                "getIssue",
                "Fetch one issue of a repository",
                "owner repo issue_number",
            ),
        ]
    }

    fn keys(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.key.as_str()).collect()
    }

    #[test]
    fn replacing_a_server_reindexes_it_alone_and_leaves_the_old_version_intact() {
        let before = index();
        let everything = vec![
            doc("everything", "echo", "Echoes back the input", "message"),
            doc("everything", "add", "Adds two numbers together", "a b"),
        ];
        let after = before
            .replace_server("everything", everything.clone())
            .unwrap()
            .expect("a small change is incremental");
        assert_eq!(after.len(), 8);
        assert_eq!(after.keys().iter().filter(|k| k.is_empty()).count(), 2);

        // The new tool is found, the removed one is not, even by its exact name.
        let top = |idx: &SearchIndex, q: &str| idx.search(q, 1, None).unwrap();
        assert_eq!(top(&after, "add numbers")[0].key, "everything__add");
        assert!(
            top(&after, "get-sum")
                .iter()
                .all(|h| h.key != "everything__get-sum")
        );
        assert!(!top(&after, "get-sum").first().is_some_and(|h| h.exact));
        // Hybrid search never returns the removed documents' (zero) vector rows.
        let n = after.keys().len();
        let map = after
            .keys()
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.is_empty())
            .map(|(i, k)| {
                let mut v = vec![0.0; n];
                v[i] = 1.0;
                (k.clone(), v)
            })
            .collect();
        let vectors = DocVectors::new(n, after.keys(), &map);
        let hits = after
            .search_hybrid("zzz", &vec![0.0; n], &vectors, 20, None)
            .unwrap();
        assert_eq!(hits.len(), 8);
        assert!(hits.iter().all(|h| !h.key.is_empty()));
        // Searches on the old version still see the old tools.
        assert_eq!(top(&before, "get-sum")[0].key, "everything__get-sum");
        assert_eq!(top(&before, "add numbers")[0].key, "everything__get-sum");

        // Every tool ranks as it does in a fresh build of the same documents.
        let mut docs = index_docs();
        docs.retain(|d| d.server != "everything");
        docs.extend(everything);
        let fresh = SearchIndex::build(docs.clone()).unwrap();
        for d in &docs {
            let q = format!("{} {}", d.description, d.params);
            assert_eq!(
                keys(&after.search(&q, 3, None).unwrap()),
                keys(&fresh.search(&q, 3, None).unwrap()),
                "{q}"
            );
        }

        // Only the newest version can be updated; churn past a quarter means a rebuild.
        assert!(before.replace_server("time", vec![]).unwrap().is_none());
        assert!(after.replace_server("fs", vec![]).unwrap().is_none());
        let cleared = index().replace_server("gh", vec![]).unwrap().unwrap();
        assert!(cleared.search("issue", 3, None).unwrap().is_empty());
        assert_eq!(cleared.len(), 7);
    }

    #[test]
    fn finds_by_description_words_with_stemming() {
        let idx = index();
        let hits = idx.search("reading files", 3, None).unwrap();
        assert_eq!(hits[0].key, "fs__read_text_file");
        let hits = idx.search("current time in Tokyo", 2, None).unwrap();
        assert_eq!(hits[0].key, "time__get_current_time", "{hits:?}");
    }

    #[test]
    fn camel_case_queries_match_snake_case_names() {
        let idx = index();
        assert_eq!(
            idx.search("readTextFile", 1, None).unwrap()[0].key,
            "fs__read_text_file"
        );
        assert_eq!(
            idx.search("get issue", 1, None).unwrap()[0].key,
            "gh__getIssue"
        );
    }

    #[test]
    fn a_misspelt_or_misqualified_name_puts_the_close_tool_first() {
        let idx = SearchIndex::build(vec![
            doc(
                "time",
                "convert_time",
                "Convert a time between time zones",
                "",
            ),
            doc(
                "time",
                "get_current_time",
                "Get the current time in a time zone",
                "",
            ),
            doc(
                "fs",
                "read_multiple_files",
                "Read several files at once",
                "",
            ),
            doc("fs", "read_file", "Read a file", ""),
            doc("fs", "list_directory", "List a directory", ""),
        ])
        .unwrap();
        let first = |q: &str| {
            let hits = idx.search(q, 3, None).unwrap();
            (
                hits[0].key.clone(),
                hits[0].close,
                hits.iter().filter(|h| h.close).count(),
            )
        };
        // One letter missing, two letters swapped, no separators, another server.
        assert_eq!(
            first("get_curent_time"),
            ("time__get_current_time".into(), true, 1)
        );
        assert_eq!(
            first("getCurrnetTime"),
            ("time__get_current_time".into(), true, 1)
        );
        assert_eq!(
            first("listdirectory"),
            ("fs__list_directory".into(), true, 1)
        );
        assert_eq!(
            first("memory__read_file"),
            ("fs__read_file".into(), true, 1)
        );
        // Exact names are not "close"; sentences and short words are not name-shaped.
        assert_eq!(first("read_file"), ("fs__read_file".into(), false, 0));
        assert_eq!(
            idx.search("get the curent time", 3, None)
                .unwrap()
                .iter()
                .filter(|h| h.close)
                .count(),
            0
        );
        assert_eq!(
            idx.search("read_fil", 3, Some("time"))
                .unwrap()
                .iter()
                .filter(|h| h.close)
                .count(),
            0
        );
    }

    #[test]
    fn a_word_that_tools_have_is_not_taken_for_a_misspelt_name() {
        let idx = SearchIndex::build(vec![
            doc("s", "send_email", "Send an email message", ""),
            doc("s", "mail", "Check the mailbox", ""),
            doc("s", "café_menu", "Dishes of the day", ""),
        ])
        .unwrap();
        // "email" is one letter from `mail`, but send_email has the word: no did-you-mean.
        let hits = idx.search("email", 3, None).unwrap();
        assert_eq!(hits[0].key, "s__send_email", "{hits:?}");
        assert!(
            hits.iter().all(|h| !h.close) && confident(&hits),
            "{hits:?}"
        );
        // Typos are counted in characters, not bytes: ü is two bytes.
        let hits = idx.search("cafémenüü", 3, None).unwrap();
        assert!(hits[0].close && hits[0].key == "s__café_menu", "{hits:?}");
    }

    #[test]
    fn exact_names_come_first() {
        let idx = index();
        assert_eq!(
            idx.search("echo", 3, None).unwrap()[0].key,
            "everything__echo"
        );
        assert_eq!(
            idx.search("time__convert_time", 3, None).unwrap()[0].key,
            "time__convert_time"
        );
        assert_eq!(
            idx.search("GET-SUM", 3, None).unwrap()[0].key,
            "everything__get-sum"
        );
    }

    #[test]
    fn server_filter_and_empty_queries() {
        let idx = index();
        let hits = idx.search("file path time", 10, Some("time")).unwrap();
        assert!(
            !hits.is_empty() && hits.iter().all(|h| h.key.starts_with("time__")),
            "{hits:?}"
        );
        assert!(idx.search("  ?! ", 5, None).unwrap().is_empty());
        assert!(idx.search("zebra quantum", 5, None).unwrap().is_empty());
    }

    #[test]
    fn equal_input_gives_equal_output_with_ties_by_key() {
        let a = index().search("file", 10, None).unwrap();
        let b = index().search("file", 10, None).unwrap();
        assert_eq!(a, b);
        let tied = SearchIndex::build(vec![
            doc("b", "x", "identical words", ""),
            doc("a", "x", "identical words", ""),
        ])
        .unwrap();
        assert_eq!(
            keys(&tied.search("identical", 2, None).unwrap()),
            ["a__x", "b__x"]
        );
    }

    #[test]
    fn weak_matches_are_not_confident() {
        let idx = index();
        let hits = idx.search("current time in a timezone", 3, None).unwrap();
        assert_eq!(hits[0].key, "time__get_current_time");
        assert!(confident(&hits), "{hits:?}");
        // Only the common word "file" matches; the distinctive words match nothing.
        let hits = idx.search("zebra stripes file", 3, None).unwrap();
        assert!(!hits.is_empty(), "near misses are still returned");
        assert!(hits[0].coverage < CONFIDENT_COVERAGE, "{hits:?}");
        assert!(!confident(&hits));
        assert!(!confident(&[]));
        // An exact name is confident whatever its words.
        let hits = idx.search("Echo", 3, None).unwrap();
        assert!(hits[0].exact && confident(&hits));
        // In hybrid search, meaning counts too: a close vector is confident without the words.
        let weak = |similarity| Hit {
            key: "s__t".into(),
            score: 1.0,
            coverage: 0.05,
            words: 1,
            exact: false,
            close: false,
            similarity,
        };
        assert!(confident(&[weak(Some(0.45))]));
        assert!(!confident(&[weak(Some(0.25))]));
        assert!(!confident(&[weak(None)]));
        // One word in common is noise unless it is half the query; two make a fifth enough.
        let shares = |coverage, words| Hit {
            coverage,
            words,
            ..weak(None)
        };
        assert!(!confident(&[shares(0.45, 1)]));
        assert!(confident(&[shares(0.5, 1)]));
        assert!(confident(&[shares(0.2, 2)]));
        assert!(!confident(&[shares(0.15, 3)]));
    }

    #[test]
    fn exact_names_made_of_stop_words_are_still_found() {
        let options = SearchOptions {
            stopwords: StopWords::Lucene,
            ..SearchOptions::default()
        };
        let idx = SearchIndex::build_with(
            vec![
                doc("x", "it", "Information technology helpdesk", ""),
                doc("y", "it", "Other", ""),
            ],
            options,
        )
        .unwrap();
        assert_eq!(
            keys(&idx.search("it", 5, None).unwrap()),
            ["x__it", "y__it"]
        );
        assert_eq!(keys(&idx.search("it", 5, Some("y")).unwrap()), ["y__it"]);
    }

    #[test]
    fn run_together_names_are_split_by_the_catalog_vocabulary() {
        let docs = vec![
            doc("s", "keywordexplorer", "Explore keyword ideas", ""),
            doc("s", "other", "A keyword explorer for ads", ""),
            doc("s", "tira", "Beauty shop", ""),
        ];
        let parts = decompound_names(&docs);
        assert_eq!(parts, ["keyword explorer", "", ""]);
        let options = SearchOptions {
            decompound: true,
            ..SearchOptions::default()
        };
        let idx = SearchIndex::build_with(docs, options).unwrap();
        assert_eq!(
            idx.search("keyword explorer", 1, None).unwrap()[0].key,
            "s__keywordexplorer"
        );
        assert_eq!(
            idx.search("keywordexplorer", 1, None).unwrap()[0].key,
            "s__keywordexplorer"
        );
    }

    /// Hand-made unit vectors: tool `i` of [`index`] points along axis `i`.
    fn axis_vectors(idx: &SearchIndex) -> DocVectors {
        let n = idx.len();
        let map = idx
            .keys()
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let mut v = vec![0.0; n];
                v[i] = 1.0;
                (k.clone(), v)
            })
            .collect();
        DocVectors::new(n, idx.keys(), &map)
    }

    fn towards(idx: &SearchIndex, key: &str) -> Vec<f32> {
        let mut v = vec![0.0; idx.len()];
        v[idx.keys().iter().position(|k| k == key).unwrap()] = 1.0;
        v
    }

    #[test]
    fn hybrid_search_finds_what_the_vectors_say_when_no_word_matches() {
        for fusion in [
            Fusion::Rrf {
                k: 60.0,
                vector: 1.0,
                coverage: false,
            },
            SearchOptions::default().fusion,
            Fusion::Weighted { alpha: 0.5 },
        ] {
            let idx = SearchIndex::build_with(
                index_docs(),
                SearchOptions {
                    fusion,
                    ..SearchOptions::default()
                },
            )
            .unwrap();
            let vectors = axis_vectors(&idx);
            let q = towards(&idx, "time__convert_time");
            // No word of the query is in any tool: BM25 finds nothing, the vectors decide.
            assert!(idx.search("alter an hour", 3, None).unwrap().is_empty());
            let hits = idx
                .search_hybrid("alter an hour", &q, &vectors, 3, None)
                .unwrap();
            assert_eq!(hits[0].key, "time__convert_time", "{fusion:?}");
            // The server filter applies to vector hits too.
            let hits = idx
                .search_hybrid("alter an hour", &q, &vectors, 3, Some("fs"))
                .unwrap();
            assert!(hits.iter().all(|h| h.key.starts_with("fs__")), "{hits:?}");
            // Exact names still come first, whatever the vectors say.
            let hits = idx.search_hybrid("echo", &q, &vectors, 3, None).unwrap();
            assert_eq!(hits[0].key, "everything__echo");
            assert!(hits[0].exact);
        }
    }

    #[test]
    fn hybrid_search_agreement_beats_either_signal_alone() {
        let idx = index();
        let vectors = axis_vectors(&idx);
        // BM25 alone ranks list_directory below the tools with "file" in their names; vectors
        // pointing at it move it up, and BM25 keeps the other file tools above unrelated ones.
        let bm25 = idx.search("file", 5, None).unwrap();
        assert_ne!(bm25[0].key, "fs__list_directory");
        let q = towards(&idx, "fs__list_directory");
        let hits = idx.search_hybrid("file", &q, &vectors, 5, None).unwrap();
        assert_eq!(hits[0].key, "fs__list_directory", "{hits:?}");
        assert!(
            hits[..3].iter().all(|h| h.key.starts_with("fs__")),
            "{hits:?}"
        );
    }

    #[test]
    fn cjk_descriptions_are_searchable_by_their_words() {
        let idx = SearchIndex::build(vec![
            doc("zh", "read", "读取文件内容", ""),
            doc("zh", "send", "发送电子邮件", ""),
        ])
        .unwrap();
        assert_eq!(idx.search("文件", 1, None).unwrap()[0].key, "zh__read");
    }

    #[test]
    fn a_cjk_word_ranks_the_tool_that_has_it_above_one_with_its_characters_apart() {
        // Both descriptions have 文 and 件 once and are equally long; only the first has 文件.
        let idx = SearchIndex::build(vec![
            doc("zh", "count", "文本件数统计分析", ""),
            doc("zh", "upload", "上传文件到服务器", ""),
        ])
        .unwrap();
        let hits = idx.search("文件", 2, None).unwrap();
        assert_eq!(hits[0].key, "zh__upload", "{hits:?}");
        assert!(hits[0].score > hits[1].score, "{hits:?}");
        assert!(confident(&hits) && hits[0].words == 1, "{hits:?}");
        // "Write a tweet" shares two lone characters with "write a file": one word, weak.
        let idx = SearchIndex::build(vec![
            doc("zh", "write", "写入文件", ""),
            doc("zh", "read", "读取目录", ""),
        ])
        .unwrap();
        let hits = idx.search("写推文", 2, None).unwrap();
        assert_eq!(hits[0].key, "zh__write");
        assert!(!confident(&hits), "{hits:?}");
    }
}
