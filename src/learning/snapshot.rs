//! What search is given of the evidence: per tool, the learned queries that count (in a field
//! of their own in BM25, and as vectors in hybrid search), for the tool with the fingerprint
//! they were learned for only.

use std::collections::{BTreeMap, BTreeSet};

use super::Evidence;
use crate::checksum;

/// A query counts in ranking once the sessions that taught it weigh this much: one call, or
/// two sessions that read its details.
pub const COUNTS: f32 = 1.0;

/// The learned queries of every tool that has some that count. Immutable; equal evidence
/// gives an equal snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Learned {
    tools: BTreeMap<String, LearnedTool>,
}

/// One tool's learned queries.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnedTool {
    pub fingerprint: String,
    /// Distinct queries that count, sorted.
    pub queries: Vec<String>,
}

impl LearnedTool {
    /// The text of the tool's learned field: its queries, one per line.
    pub fn text(&self) -> String {
        self.queries.join("\n")
    }
}

impl Learned {
    /// The queries of `evidence` that count.
    pub fn of(evidence: &Evidence) -> Self {
        let tools = evidence
            .tools
            .iter()
            .filter_map(|(name, tool)| {
                let mut queries: Vec<String> = tool
                    .queries
                    .iter()
                    .filter(|q| q.score() >= COUNTS)
                    .map(|q| q.text.clone())
                    .collect();
                queries.sort();
                queries.dedup();
                (!queries.is_empty()).then(|| {
                    let fingerprint = tool.fingerprint.clone();
                    (
                        name.clone(),
                        LearnedTool {
                            fingerprint,
                            queries,
                        },
                    )
                })
            })
            .collect();
        Self { tools }
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The learned queries of `tool`, if the tool is still the one they were learned for:
    /// `fingerprint` gives its fingerprint now (computed only for tools with evidence).
    pub fn of_tool(
        &self,
        tool: &str,
        fingerprint: impl FnOnce() -> String,
    ) -> Option<&LearnedTool> {
        self.tools
            .get(tool)
            .filter(|learned| learned.fingerprint == fingerprint())
    }

    /// Every tool with learned queries, with them.
    pub fn tools(&self) -> impl Iterator<Item = (&str, &LearnedTool)> {
        self.tools.iter().map(|(name, tool)| (name.as_str(), tool))
    }

    /// Every distinct learned query.
    pub fn queries(&self) -> BTreeSet<&str> {
        self.tools
            .values()
            .flat_map(|t| t.queries.iter().map(String::as_str))
            .collect()
    }

    /// A hash of the learned queries of `server`'s tools ("" when it has none): part of what
    /// tells a saved index that a server's documents changed.
    pub fn source(&self, server: &str) -> String {
        let prefix = format!("{server}{}", crate::library::SEPARATOR);
        let of_server: Vec<(&String, &String, &Vec<String>)> = self
            .tools
            .range(prefix.clone()..)
            .take_while(|(name, _)| name.starts_with(&prefix))
            .map(|(name, t)| (name, &t.fingerprint, &t.queries))
            .collect();
        if of_server.is_empty() {
            return String::new();
        }
        let text = serde_json::to_string(&of_server).expect("serializes");
        checksum::hex(&checksum::of(text.as_bytes()))
    }

    /// The tools whose learned queries differ between `self` and `other`.
    pub fn changed(&self, other: &Learned) -> BTreeSet<String> {
        self.tools
            .keys()
            .chain(other.tools.keys())
            .filter(|name| self.tools.get(*name) != other.tools.get(*name))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::learning::{Contribution, Teaching, Weight};

    #[test]
    fn only_queries_that_weigh_a_call_count_and_only_for_the_same_tool() {
        let mut e = Evidence::default();
        let mut teach = |query: &str, session: &str, weight: Weight| {
            e.teach(Teaching {
                tool: "s__t".into(),
                fingerprint: "f".into(),
                query: query.into(),
                by: Contribution {
                    principal: "p".into(),
                    session: session.into(),
                    weight: weight.value(),
                    at: 1,
                },
            });
        };
        teach("read a file", "a", Weight::Call);
        teach("open a file", "a", Weight::Details);
        teach("show a file", "a", Weight::Details);
        teach("show a file", "b", Weight::Details);
        let learned = Learned::of(&e);
        let tool = learned.of_tool("s__t", || "f".into()).unwrap();
        assert_eq!(tool.queries, ["read a file", "show a file"]);
        assert!(learned.of_tool("s__t", || "changed".into()).is_none());
        assert!(learned.of_tool("s__u", || "f".into()).is_none());
        assert_ne!(learned.source("s"), "");
        assert_eq!(learned.source("t"), "");
        assert_eq!(
            learned.changed(&Learned::default()),
            BTreeSet::from(["s__t".to_owned()])
        );
    }
}
