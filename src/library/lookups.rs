//! Reading a library: ranked search, lookups by qualified name and "did you mean" suggestions.

use std::borrow::Cow;
use std::sync::Arc;

use super::{Entry, Library, SEPARATOR};
use crate::search::{Hit, SearchError};

/// Longest text compared with tool names for suggestions (MCP tool names have at most 128).
const MAX_SUGGESTED_LEN: usize = 256;

impl Library {
    /// Ranked tools for `query`: hybrid (BM25 fused with vectors) once [`Self::embed`] has
    /// run and the options allow it, BM25 alone otherwise or if the query cannot be embedded.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        server: Option<&str>,
    ) -> Result<Vec<Hit>, SearchError> {
        if self.index.options().embeddings
            && let Some(semantic) = self.semantic.get()
        {
            match semantic.embedder.embed_query(query) {
                Ok(v) => {
                    return self
                        .index
                        .search_hybrid(query, &v, &semantic.vectors, limit, server);
                }
                Err(e) => tracing::warn!("query not embedded, BM25 only: {e}"),
            }
        }
        self.index.search(query, limit, server)
    }

    /// Whether any entry belongs to `server`.
    pub fn has_server(&self, server: &str) -> bool {
        let prefix = format!("{server}{SEPARATOR}");
        self.entries
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(key, _)| key.starts_with(&prefix))
    }

    /// The tool with this qualified name.
    pub fn get(&self, qualified: &str) -> Option<&Arc<Entry>> {
        self.entries.get(qualified)
    }

    /// Qualified names close to `name` (edit distance or shared words), best first; none for
    /// a name far longer than any tool name (comparing it would take long for nothing).
    ///
    /// Only a one-word `name` is compared letter by letter with every tool name: a sentence
    /// is not a misspelt name, and its words are what the search that follows matches (at 10k
    /// tools the comparison took 10-15 ms).
    pub fn suggestions(&self, name: &str, max: usize) -> Vec<String> {
        if name.len() > MAX_SUGGESTED_LEN {
            return Vec::new();
        }
        let wanted = name.trim().to_lowercase();
        fn lower(s: &str) -> Cow<'_, str> {
            if s.chars().any(char::is_uppercase) {
                Cow::Owned(s.to_lowercase())
            } else {
                Cow::Borrowed(s)
            }
        }
        let mut scored: Vec<(f64, &String)> = if wanted.contains(char::is_whitespace) {
            Vec::new()
        } else {
            self.entries
                .keys()
                .map(|q| {
                    let tool = q.split_once(SEPARATOR).map_or(q.as_str(), |(_, t)| t);
                    let full = strsim::jaro_winkler(&wanted, &lower(q));
                    let tool = strsim::jaro_winkler(&wanted, &lower(tool));
                    (full.max(tool), q)
                })
                .filter(|(score, _)| *score >= 0.75)
                .collect()
        };
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let mut out: Vec<String> = scored
            .into_iter()
            .take(max)
            .map(|(_, q)| q.clone())
            .collect();
        if out.len() < max
            && let Ok(hits) = self.search(name, max, None)
        {
            for hit in hits {
                if out.len() < max && !out.contains(&hit.key) {
                    out.push(hit.key);
                }
            }
        }
        out
    }
}
