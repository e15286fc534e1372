//! The servers a query names ("search papers on arXiv": `arxiv`): their tools that match the
//! rest of it rank first, ranked by the rest alone (the name told which server, not which
//! tool).

use std::collections::{BTreeMap, HashMap};

use tantivy::tokenizer::TextAnalyzer;

use super::rank::Dense;
use super::tables::Tables;
use super::{HELPER_SERVER, Hit, SearchError, SearchIndex, tokenizer};

/// Words of a server's name that say nothing of which server it is (`mcp-server-git`: `git`).
const AFFIXES: [&str; 2] = ["mcp", "server"];

/// Each server's name as analyzed words, with its number of tools, and by first name word
/// the servers whose name starts with it: a query names a server only if it has that word.
#[derive(Default)]
pub(super) struct ServerNames {
    servers: Vec<(String, Vec<String>, usize)>,
    by_first: HashMap<String, Vec<usize>>,
}

impl ServerNames {
    /// The names of the live servers of `tables` (but meta-server's own), analyzed by
    /// `analyzer`; none unless `named` (`SearchOptions::named_servers`).
    pub fn of(tables: &Tables, analyzer: &TextAnalyzer, named: bool) -> Self {
        let mut tools: BTreeMap<&str, usize> = BTreeMap::new();
        if named {
            for (i, server) in tables.servers.iter().enumerate() {
                if tables.is_live(i as u32) && server != HELPER_SERVER {
                    *tools.entry(server).or_default() += 1;
                }
            }
        }
        let mut analyzer = analyzer.clone();
        let servers: Vec<(String, Vec<String>, usize)> = tools
            .into_iter()
            .filter_map(|(server, count)| {
                let words: Vec<String> = parts(&mut analyzer, server)
                    .into_iter()
                    .filter(|w| !AFFIXES.contains(&w.as_str()))
                    .collect();
                (!words.is_empty()).then(|| (server.to_owned(), words, count))
            })
            .collect();
        let mut by_first: HashMap<String, Vec<usize>> = HashMap::new();
        for (at, (_, words, _)) in servers.iter().enumerate() {
            by_first.entry(words[0].clone()).or_default().push(at);
        }
        Self { servers, by_first }
    }

    /// The servers the query words `words` name, each with its name words: all its name
    /// words are among them, and at least half of the tools that have one of these words
    /// are the server's own. A word that many servers' tools use ("time", "fetch", or
    /// "linear" among several Linear servers) says what to do or which kind of server, not
    /// which server.
    pub fn named<'a>(&'a self, words: &[String], tables: &Tables) -> Vec<(&'a str, &'a [String])> {
        let df = |w: &String| {
            tables
                .vocab
                .get(w)
                .map_or(0, |&id| tables.df[id as usize] as usize)
        };
        let mut candidates: Vec<usize> = (words.iter())
            .filter_map(|w| self.by_first.get(w))
            .flatten()
            .copied()
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        candidates
            .into_iter()
            .map(|at| &self.servers[at])
            .filter(|(_, name, tools)| {
                name.iter().all(|w| words.contains(w))
                    && name.iter().any(|w| 2 * tools >= df(w) && df(w) > 0)
            })
            .map(|(server, name, _)| (server.as_str(), name.as_slice()))
            .collect()
    }
}

/// The analyzed words of `text`, without the whole forms of words also given in parts.
fn parts(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while let Some(token) = stream.next() {
        if token.position_length < tokenizer::JOINED && !words.contains(&token.text) {
            words.push(token.text.clone());
        }
    }
    words
}

impl SearchIndex {
    /// Whether the tool `key` has a name of two or more words, all of them in `words`.
    fn name_spelled_out(&self, key: &str, words: &[String]) -> bool {
        let Some(ord) = self.tables.ord_of(key) else {
            return false;
        };
        let server = &self.tables.servers[ord as usize];
        let name = key
            .strip_prefix(server.as_str())
            .and_then(|k| k.strip_prefix("__"))
            .unwrap_or(key);
        let name = parts(&mut self.analyzer.clone(), name);
        name.len() >= 2 && name.iter().all(|w| words.contains(w))
    }

    /// `hits` (ranked for `words`) with the tools of the servers the query names first (see
    /// [`ServerNames::named`]): each named server's tools ranked for the query's other words,
    /// those that match one of them, best first; exact and close names stay first. As
    /// `hits` when no server is named, when the named servers hold half the catalog or more
    /// (the name tells nothing apart), or when no tool has any of the other words.
    pub(super) fn named_first(
        &self,
        query: &str,
        words: &[String],
        surface: &[String],
        hits: Vec<Hit>,
        limit: usize,
        dense: Dense,
    ) -> Result<Vec<Hit>, SearchError> {
        let named = self.server_names.named(words, &self.tables);
        let held: usize = named
            .iter()
            .map(|(server, _)| self.tables.ords_of(server).len())
            .sum();
        if named.is_empty() || held * 2 >= self.tables.live {
            return Ok(hits);
        }
        let mut lifted: Vec<Hit> = Vec::new();
        for (server, name) in named {
            let rest: Vec<String> = words
                .iter()
                .filter(|w| !name.contains(w))
                .cloned()
                .collect();
            if !rest.iter().any(|w| self.tables.vocab.contains_key(w)) {
                continue;
            }
            let ranked = self.rank_words(query, &rest, surface, limit, Some(server), dense)?;
            lifted.extend(
                ranked
                    .into_iter()
                    .filter(|h| h.words > 0 || h.exact || h.close),
            );
        }
        if lifted.is_empty() {
            return Ok(hits);
        }
        // A tool the query also names ("search papers on arXiv": `search_papers`) comes
        // first among them: its siblings' descriptions often name it too.
        let spelled: Vec<bool> = lifted
            .iter()
            .map(|h| self.name_spelled_out(&h.key, words))
            .collect();
        let mut order: Vec<usize> = (0..lifted.len()).collect();
        order.sort_by(|&a, &b| {
            spelled[b]
                .cmp(&spelled[a])
                .then(lifted[b].score.total_cmp(&lifted[a].score))
                .then_with(|| lifted[a].key.cmp(&lifted[b].key))
        });
        let mut slots: Vec<Option<Hit>> = lifted.into_iter().map(Some).collect();
        let lifted: Vec<Hit> = order.into_iter().filter_map(|i| slots[i].take()).collect();
        let (first, others): (Vec<Hit>, Vec<Hit>) =
            hits.into_iter().partition(|h| h.exact || h.close);
        let mut out = first;
        for hit in lifted.into_iter().chain(others) {
            if !out.iter().any(|h| h.key == hit.key) {
                out.push(hit);
            }
        }
        out.truncate(limit);
        Ok(out)
    }
}
