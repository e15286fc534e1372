//! Tool search: a tantivy BM25 index over names, titles, descriptions, parameters and server
//! text, with identifier splitting and English stemming. Knows nothing of MCP transport.

mod tokenizer;

use std::collections::HashMap;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::tokenizer::{Language, LowerCaser, RemoveLongFilter, Stemmer, TextAnalyzer};
use tantivy::{Index, IndexReader, TantivyDocument, Term, doc};

pub use tokenizer::{split_words, words_of};

const ANALYZER: &str = "ident";

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
}

struct Fields {
    key: Field,
    server: Field,
    /// (field, boost) pairs searched by every query word.
    text: Vec<(Field, f32)>,
}

/// An in-memory BM25 index over a set of tools.
pub struct SearchIndex {
    reader: IndexReader,
    fields: Fields,
    /// Lower-cased tool name and qualified name -> keys, for exact-name lookups.
    names: HashMap<String, Vec<String>>,
    len: usize,
}

impl SearchIndex {
    /// Builds the index; documents are added in key order so equal input gives equal output.
    pub fn build(mut docs: Vec<ToolDoc>) -> Result<Self, SearchError> {
        docs.sort_by(|a, b| a.key.cmp(&b.key));
        let mut sb = Schema::builder();
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let key = sb.add_text_field("key", STRING | STORED);
        let server = sb.add_text_field("server_raw", STRING);
        let name = sb.add_text_field("name", text.clone());
        let title = sb.add_text_field("title", text.clone());
        let description = sb.add_text_field("description", text.clone());
        let params = sb.add_text_field("params", text.clone());
        let server_text = sb.add_text_field("server", text);
        let index = Index::create_in_ram(sb.build());
        index.tokenizers().register(ANALYZER, analyzer());

        let mut writer = index.writer_with_num_threads(1, 15_000_000)?;
        let mut names: HashMap<String, Vec<String>> = HashMap::new();
        for d in &docs {
            writer.add_document(doc!(
                key => d.key.as_str(),
                server => d.server.as_str(),
                name => d.name.as_str(),
                title => d.title.as_str(),
                description => d.description.as_str(),
                params => d.params.as_str(),
                server_text => d.server_text.as_str(),
            ))?;
            names
                .entry(d.name.to_lowercase())
                .or_default()
                .push(d.key.clone());
            names
                .entry(d.key.to_lowercase())
                .or_default()
                .push(d.key.clone());
        }
        writer.commit()?;
        let reader = index.reader()?;
        reader.reload()?;
        Ok(Self {
            reader,
            fields: Fields {
                key,
                server,
                text: vec![
                    (name, 3.0),
                    (title, 2.0),
                    (description, 1.0),
                    (params, 0.6),
                    (server_text, 0.5),
                ],
            },
            names,
            len: docs.len(),
        })
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
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
        let Some(q) = self.query(query, server) else {
            return Ok(Vec::new());
        };
        let searcher = self.reader.searcher();
        // Fetch more than asked so ties at the cut are resolved by key, not by doc order.
        let top = searcher.search(&q, &TopDocs::with_limit(limit * 2 + 16).order_by_score())?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            if let Some(key) = doc.get_first(self.fields.key).and_then(|v| v.as_str()) {
                hits.push(Hit {
                    key: key.to_owned(),
                    score,
                });
            }
        }
        let exact = self.names.get(query.trim().to_lowercase().as_str());
        let rank = |h: &Hit| exact.is_some_and(|keys| keys.contains(&h.key));
        hits.sort_by(|a, b| {
            rank(b)
                .cmp(&rank(a))
                .then(b.score.total_cmp(&a.score))
                .then_with(|| a.key.cmp(&b.key))
        });
        hits.truncate(limit);
        Ok(hits)
    }

    /// One SHOULD clause per (query word, field), with the field's boost.
    fn query(&self, query: &str, server: Option<&str>) -> Option<Box<dyn Query>> {
        let mut analyzer = analyzer();
        let mut terms = Vec::new();
        let mut stream = analyzer.token_stream(query);
        while let Some(token) = stream.next() {
            if !terms.contains(&token.text) {
                terms.push(token.text.clone());
            }
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for term in &terms {
            for &(field, boost) in &self.fields.text {
                let tq = TermQuery::new(
                    Term::from_field_text(field, term),
                    IndexRecordOption::WithFreqs,
                );
                clauses.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(Box::new(tq), boost)),
                ));
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

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(tokenizer::IdentTokenizer)
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(Stemmer::new(Language::English))
        .build()
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
        SearchIndex::build(vec![
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
        ])
        .unwrap()
    }

    fn keys(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.key.as_str()).collect()
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
            doc("b", "x", "same words", ""),
            doc("a", "x", "same words", ""),
        ])
        .unwrap();
        assert_eq!(
            keys(&tied.search("same", 2, None).unwrap()),
            ["a__x", "b__x"]
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
}
