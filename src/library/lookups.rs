//! Reading a library: ranked search, lookups by qualified name and "did you mean" suggestions.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{Entry, Library, SEPARATOR};
use crate::search::{Hit, SearchError, close_qualified};

/// Score factor for tools of servers that a skill read in this session needs.
const SKILL_BOOST: f32 = 1.5;

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
                    return self.index.search_hybrid(
                        query,
                        &v,
                        &semantic.vectors,
                        Some(&semantic.learned).filter(|l| !l.is_empty()),
                        limit,
                        server,
                    );
                }
                Err(e) => tracing::warn!("query not embedded, BM25 only: {e}"),
            }
        }
        self.index.search(query, limit, server)
    }

    /// Like [`Self::search`], with the tools of the `boosted` servers (those a skill read in the
    /// session needs) scored [`SKILL_BOOST`] times higher; exact and close names stay first.
    pub fn search_boosted(
        &self,
        query: &str,
        limit: usize,
        server: Option<&str>,
        boosted: &BTreeSet<String>,
    ) -> Result<Vec<Hit>, SearchError> {
        if boosted.is_empty() {
            return self.search(query, limit, server);
        }
        // Look further down the ranking so the boosted servers' tools can move up.
        let mut found = self.search(query, limit + 16, server)?;
        for hit in &mut found {
            if self
                .get(&hit.key)
                .is_some_and(|e| boosted.contains(&e.server))
            {
                hit.score *= SKILL_BOOST;
            }
        }
        // Stable, so equal scores keep the index's order.
        let first = |h: &Hit| h.exact || h.close;
        found.sort_by(|a, b| first(b).cmp(&first(a)).then(b.score.total_cmp(&a.score)));
        found.truncate(limit);
        Ok(found)
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
        let mut out: Vec<String> = close_qualified(name, self.entries.keys(), SEPARATOR, max)
            .into_iter()
            .cloned()
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
