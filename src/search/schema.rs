//! The index schema: one text field per part of a tool, the analyzer shared by documents and
//! queries, and how documents are written.

use tantivy::indexer::NoMergePolicy;
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexWriter, Term, doc};

use super::tables::Tables;
use super::{SearchError, SearchOptions, StopWords, ToolDoc, tokenizer};

/// Name of the analyzer registered with the index.
pub(super) const ANALYZER: &str = "ident";
/// Name of the analyzer of the surface field: [`ANALYZER`] without stemming.
pub(super) const SURFACE_ANALYZER: &str = "surface";
/// Indexing memory of tantivy's writer (its minimum).
const WRITER_BYTES: usize = 15_000_000;

/// The index's fields.
#[derive(Clone)]
pub(super) struct Fields {
    pub ord: Field,
    pub server: Field,
    /// The raw key (qualified name), to delete one tool's document.
    pub key: Field,
    pub name: Field,
    pub title: Field,
    pub description: Field,
    pub params: Field,
    pub server_text: Field,
    /// Name, title and description with their words as written (not stemmed), searched by
    /// the query words that stemming changes ([`SearchOptions::surface`]).
    pub surface: Field,
    /// The queries that led to the tool ([`ToolDoc::learned`]).
    pub learned: Field,
    /// Only the learned words the tool's own text lacks are indexed
    /// ([`SearchOptions::learned_new`]).
    pub learned_new: bool,
    /// (field, boost) pairs searched by every query word.
    pub text: Vec<(Field, f32)>,
}

/// The schema of an index with these options: an ordinal, the raw server name (for filters
/// and deletes) and one analyzed field per part of a tool, with the field boosts.
pub(super) fn schema(options: &SearchOptions) -> (Schema, Fields) {
    let mut sb = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let ord = sb.add_u64_field("ord", FAST);
    let server = sb.add_text_field("server_raw", STRING);
    let key = sb.add_text_field("key_raw", STRING);
    let name = sb.add_text_field("name", text.clone());
    let title = sb.add_text_field("title", text.clone());
    let description = sb.add_text_field("description", text.clone());
    let params = sb.add_text_field("params", text.clone());
    let server_text = sb.add_text_field("server", text);
    let surface = sb.add_text_field(
        "surface",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(SURFACE_ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        ),
    );
    let learned = sb.add_text_field(
        "learned",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        ),
    );
    let fields = Fields {
        ord,
        server,
        key,
        name,
        title,
        description,
        params,
        server_text,
        surface,
        learned,
        learned_new: options.learned_new,
        text: vec![
            (name, options.name),
            (title, options.title),
            (description, options.description),
            (params, options.params),
            (server_text, options.server),
            (learned, options.learned),
        ],
    };
    (sb.build(), fields)
}

/// Deletes the documents matching any of `delete`, adds `docs` (each with the next ordinal of
/// `tables`, which records them too) and commits. The writer is single-threaded and never
/// merges: every commit adds one segment, and a segment whose documents are all deleted is
/// dropped at the next commit.
pub(super) fn commit_docs(
    index: &Index,
    delete: Vec<Term>,
    fields: &Fields,
    analyzer: &mut TextAnalyzer,
    tables: &mut Tables,
    docs: &[ToolDoc],
    name_parts: &[String],
) -> Result<(), SearchError> {
    let mut writer: IndexWriter = index.writer_with_num_threads(1, WRITER_BYTES)?;
    writer.set_merge_policy(Box::new(NoMergePolicy));
    for term in delete {
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
        let learned_text = if fields.learned_new {
            new_words(analyzer, &d.learned, &terms)
        } else {
            d.learned.clone()
        };
        let mut stream = analyzer.token_stream(&learned_text);
        while let Some(token) = stream.next() {
            terms.push(token.text.clone());
        }
        let learned = !learned_text.is_empty();
        let names = [d.name.as_str(), d.key.as_str()];
        let ord = tables.add(&d.key, &d.server, names, terms, learned);
        writer.add_document(doc!(
            fields.ord => u64::from(ord),
            fields.server => d.server.as_str(),
            fields.key => d.key.as_str(),
            fields.learned => learned_text.as_str(),
            fields.name => format!("{} {parts}", d.name),
            fields.title => d.title.as_str(),
            fields.description => d.description.as_str(),
            fields.params => d.params.as_str(),
            fields.server_text => d.server_text.as_str(),
            fields.surface => format!("{} {parts} {} {}", d.name, d.title, d.description),
        ))?;
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    Ok(())
}

/// The words of `learned` (queries, one per line) whose analyzed terms are not among `own`
/// (the tool's own terms), as written, one line per query that has any: what the queries
/// add to what the tool says of itself.
fn new_words(analyzer: &mut TextAnalyzer, learned: &str, own: &[String]) -> String {
    let mut lines = Vec::new();
    for query in learned.lines() {
        let mut spans: Vec<(usize, usize)> = Vec::new();
        let mut stream = analyzer.token_stream(query);
        while let Some(token) = stream.next() {
            let span = (token.offset_from, token.offset_to);
            if !own.contains(&token.text) && !spans.contains(&span) {
                spans.push(span);
            }
        }
        // A word also indexed in parts (`MySQL`: `my`, `sql`, `mysql`) is kept once, whole.
        let words: Vec<&str> = spans
            .iter()
            .filter(|&&(from, to)| {
                !spans
                    .iter()
                    .any(|&(f, t)| f <= from && to <= t && (f, t) != (from, to))
            })
            .filter_map(|&(from, to)| query.get(from..to))
            .collect();
        if !words.is_empty() {
            lines.push(words.join(" "));
        }
    }
    lines.join("\n")
}

/// The analyzers of documents and queries ([`ANALYZER`]) and of the surface field
/// ([`SURFACE_ANALYZER`]), registered with `index`.
pub(super) fn register_analyzers(
    index: &Index,
    options: &SearchOptions,
) -> (TextAnalyzer, TextAnalyzer) {
    let words = analyzer(options);
    let surface = analyzer(&SearchOptions {
        stem: false,
        ..options.clone()
    });
    index.tokenizers().register(ANALYZER, words.clone());
    index
        .tokenizers()
        .register(SURFACE_ANALYZER, surface.clone());
    (words, surface)
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
