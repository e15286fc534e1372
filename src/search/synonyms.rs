//! Query expansion with words of the same meaning in tool vocabulary (`fetch` for `get`,
//! `folder` for `directory`): a query word also searches its synonyms, with a lower weight.

use std::collections::HashMap;

use tantivy::tokenizer::TextAnalyzer;

/// Groups of words that mean the same in a tool's name or description. Written for tool
/// vocabulary in general (verbs of CRUD and search, common nouns), not for any catalog.
const GROUPS: &[&[&str]] = &[
    &["get", "fetch", "retrieve", "obtain", "download"],
    &["find", "search", "lookup", "locate"],
    &["create", "add", "make", "insert"],
    &["delete", "remove", "erase", "destroy"],
    &["update", "modify", "edit", "change", "alter"],
    &["show", "display", "view"],
    &["list", "enumerate"],
    &["run", "execute", "invoke", "launch"],
    &["write", "save", "store"],
    &["send", "post", "deliver"],
    &["calculate", "compute", "evaluate"],
    &["sum", "add", "plus", "total"],
    &["convert", "transform"],
    &["summary", "summarize", "overview"],
    &["stop", "halt", "terminate"],
    &["image", "picture", "photo"],
    &["folder", "directory", "dir"],
    &["repository", "repo"],
    &["issue", "ticket", "bug"],
    &["message", "msg"],
    &["webpage", "website", "site", "page"],
    &["url", "link"],
    &["web", "internet", "online"],
    &["information", "info", "details"],
    &["email", "mail"],
    &["price", "cost"],
    &["company", "business", "organization", "org"],
    &["location", "place", "address"],
    &["latest", "recent", "newest", "current"],
    &["note", "memo"],
    &["document", "doc", "documentation"],
    &["movie", "film"],
    &["car", "vehicle"],
    &["paper", "article", "publication"],
    &["music", "song", "track"],
    &["chart", "graph", "plot"],
];

/// Each analyzed word's synonyms, analyzed the same way (stemmed when words are).
pub(super) struct Synonyms(HashMap<String, Vec<String>>);

impl Synonyms {
    pub(super) fn new(analyzer: &TextAnalyzer) -> Self {
        let mut analyzer = analyzer.clone();
        let mut analyze = |word: &str| {
            let mut stream = analyzer.token_stream(word);
            let mut out = None;
            while let Some(token) = stream.next() {
                out = Some(token.text.clone());
            }
            out
        };
        let mut map: HashMap<String, Vec<String>> = HashMap::new();
        for group in GROUPS {
            let words: Vec<String> = group.iter().filter_map(|w| analyze(w)).collect();
            for w in &words {
                let entry = map.entry(w.clone()).or_default();
                for other in &words {
                    if other != w && !entry.contains(other) {
                        entry.push(other.clone());
                    }
                }
            }
        }
        Self(map)
    }

    pub(super) fn of(&self, word: &str) -> &[String] {
        self.0.get(word).map_or(&[], Vec::as_slice)
    }
}
