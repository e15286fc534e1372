//! The evidence itself: per tool, the queries that led to it, each with who taught it (a
//! principal and a session, as digests), how strongly and when. Bounded per tool, per
//! principal and in all; the oldest and least used queries go first.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Queries kept per tool.
pub const MAX_PER_TOOL: usize = 24;
/// Of a tool's queries, those taught by one principal alone: at most this many. A principal
/// cannot fill a tool's evidence, and its repeats count once.
pub const PRINCIPAL_PER_TOOL: usize = 8;
/// Queries kept in all.
pub const MAX_TOTAL: usize = 10_000;
/// Of all queries, those taught by one principal alone: at most this many.
pub const PRINCIPAL_TOTAL: usize = 2_500;
/// Longer queries (task descriptions) are not kept: they say what a task needs, not one tool.
pub const MAX_QUERY_CHARS: usize = 300;
/// Evidence not confirmed for this long is forgotten.
pub const MAX_AGE: Duration = Duration::from_secs(180 * 24 * 3600);
/// Who taught a query, at most this many (the latest kept).
const MAX_CONTRIBUTIONS: usize = 8;
/// A query's weight halves with every this many seconds since it was last confirmed (in
/// choosing which query goes first).
const HALF_LIFE_SECS: f64 = 30.0 * 24.0 * 3600.0;

/// How strongly a selection speaks for a query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Weight {
    /// A successful call of the tool (by the client, or a script's `tools.call`).
    Call,
    /// Its details read (`get_tool_details`): half a call.
    Details,
}

impl Weight {
    pub fn value(self) -> f32 {
        match self {
            Self::Call => 1.0,
            Self::Details => 0.5,
        }
    }
}

/// All evidence, by qualified tool name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub tools: BTreeMap<String, ToolEvidence>,
}

/// One tool's evidence, for the tool with this fingerprint only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolEvidence {
    pub fingerprint: String,
    pub queries: Vec<Query>,
}

/// A query that led to a tool, as first typed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Query {
    pub text: String,
    #[serde(rename = "by")]
    pub contributions: Vec<Contribution>,
}

/// One session's teaching of a query: its principal and session (digests), the strongest
/// [`Weight`] it gave, and when it last gave it (seconds since the epoch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Contribution {
    #[serde(rename = "p")]
    pub principal: String,
    #[serde(rename = "s")]
    pub session: String,
    #[serde(rename = "w")]
    pub weight: f32,
    #[serde(rename = "t")]
    pub at: u64,
}

/// What one selection teaches: `query` led to `tool` (whose fingerprint is `fingerprint`).
#[derive(Debug, Clone, PartialEq)]
pub struct Teaching {
    pub tool: String,
    pub fingerprint: String,
    pub query: String,
    pub by: Contribution,
}

impl Query {
    /// The summed weight of the sessions that taught it.
    pub fn score(&self) -> f32 {
        self.contributions.iter().map(|c| c.weight).sum()
    }

    /// When it was last confirmed.
    pub fn last(&self) -> u64 {
        self.contributions.iter().map(|c| c.at).max().unwrap_or(0)
    }

    /// The principal that alone taught it, if one did.
    pub fn sole_principal(&self) -> Option<&str> {
        let first = &self.contributions.first()?.principal;
        self.contributions
            .iter()
            .all(|c| &c.principal == first)
            .then_some(first.as_str())
    }

    /// Distinct principals that taught it.
    pub fn principals(&self) -> usize {
        let mut all: Vec<&str> = self
            .contributions
            .iter()
            .map(|c| c.principal.as_str())
            .collect();
        all.sort_unstable();
        all.dedup();
        all.len()
    }

    /// Adds `by`: a session already there keeps its strongest weight and latest time (one
    /// session's repeats count once); past [`MAX_CONTRIBUTIONS`] the oldest goes.
    fn add(&mut self, by: Contribution) {
        match self
            .contributions
            .iter_mut()
            .find(|c| c.principal == by.principal && c.session == by.session)
        {
            Some(c) => {
                c.weight = c.weight.max(by.weight);
                c.at = c.at.max(by.at);
            }
            None => self.contributions.push(by),
        }
        if self.contributions.len() > MAX_CONTRIBUTIONS {
            self.contributions.sort_by_key(|c| std::cmp::Reverse(c.at));
            self.contributions.truncate(MAX_CONTRIBUTIONS);
        }
    }

    /// What it is worth keeping at `now`: its score, halved per [`HALF_LIFE_SECS`] of age.
    fn value(&self, now: u64) -> f64 {
        let age = now.saturating_sub(self.last()) as f64;
        f64::from(self.score()) * 0.5f64.powf(age / HALF_LIFE_SECS)
    }
}

/// Two spellings of a query that differ only in case and spacing are one query.
pub(super) fn normalized(text: &str) -> String {
    text.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

impl ToolEvidence {
    fn new(fingerprint: &str) -> Self {
        Self {
            fingerprint: fingerprint.to_owned(),
            queries: Vec::new(),
        }
    }

    /// `other`'s queries added to these (a query of both: its sessions merged).
    pub fn merge(&mut self, other: &ToolEvidence) {
        for query in &other.queries {
            for by in &query.contributions {
                self.add(&query.text, by.clone());
            }
        }
    }

    fn add(&mut self, text: &str, by: Contribution) {
        let key = normalized(text);
        match self.queries.iter_mut().find(|q| normalized(&q.text) == key) {
            Some(query) => query.add(by),
            None => self.queries.push(Query {
                text: text.to_owned(),
                contributions: vec![by],
            }),
        }
    }
}

/// Where a query sits in [`Evidence`], and what it is worth keeping.
struct Ranked {
    tool: String,
    index: usize,
    value: f64,
    last: u64,
    sole: Option<String>,
}

impl Evidence {
    /// Adds what a selection taught; `false` when there is nothing to learn from it (an empty
    /// query or one longer than [`MAX_QUERY_CHARS`]). A tool whose fingerprint changed loses
    /// what it had learned first. Call [`Self::bound`] after a batch of these.
    pub fn teach(&mut self, teaching: Teaching) -> bool {
        let text = teaching.query.trim();
        if text.is_empty() || text.chars().count() > MAX_QUERY_CHARS {
            return false;
        }
        let tool = self
            .tools
            .entry(teaching.tool)
            .or_insert_with(|| ToolEvidence::new(&teaching.fingerprint));
        if tool.fingerprint != teaching.fingerprint {
            *tool = ToolEvidence::new(&teaching.fingerprint);
        }
        tool.add(text, teaching.by);
        true
    }

    /// Number of queries kept.
    pub fn len(&self) -> usize {
        self.tools.values().map(|t| t.queries.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Keeps within the bounds at `now` (seconds since the epoch): evidence older than
    /// [`MAX_AGE`] is dropped, then the least valuable queries (least used, oldest) go until
    /// each principal holds at most [`PRINCIPAL_PER_TOOL`] of a tool's queries alone and
    /// [`PRINCIPAL_TOTAL`] in all, each tool at most [`MAX_PER_TOOL`], and all tools
    /// [`MAX_TOTAL`]. Returns whether anything was dropped.
    pub fn bound(&mut self, now: u64) -> bool {
        let before = self.len();
        let oldest = now.saturating_sub(MAX_AGE.as_secs());
        for tool in self.tools.values_mut() {
            for query in &mut tool.queries {
                query.contributions.retain(|c| c.at >= oldest);
            }
            tool.queries.retain(|q| !q.contributions.is_empty());
        }
        let mut ranked: Vec<Ranked> = Vec::with_capacity(before);
        for (name, tool) in &self.tools {
            for (index, query) in tool.queries.iter().enumerate() {
                ranked.push(Ranked {
                    tool: name.clone(),
                    index,
                    value: query.value(now),
                    last: query.last(),
                    sole: query.sole_principal().map(str::to_owned),
                });
            }
        }
        // Most valuable first; what is dropped is found from the end.
        ranked.sort_by(|a, b| {
            b.value
                .total_cmp(&a.value)
                .then(b.last.cmp(&a.last))
                .then_with(|| a.tool.cmp(&b.tool))
                .then(a.index.cmp(&b.index))
        });
        let mut per_tool: HashMap<&str, usize> = HashMap::new();
        let mut sole_per_tool: HashMap<(&str, &str), usize> = HashMap::new();
        let mut sole_total: HashMap<&str, usize> = HashMap::new();
        let mut kept = 0;
        let mut keep: HashMap<&str, Vec<usize>> = HashMap::new();
        for r in &ranked {
            let tool = per_tool.entry(&r.tool).or_default();
            if *tool >= MAX_PER_TOOL || kept >= MAX_TOTAL {
                continue;
            }
            if let Some(p) = &r.sole {
                let here = sole_per_tool.entry((&r.tool, p)).or_default();
                let all = sole_total.entry(p).or_default();
                if *here >= PRINCIPAL_PER_TOOL || *all >= PRINCIPAL_TOTAL {
                    continue;
                }
                *here += 1;
                *all += 1;
            }
            *tool += 1;
            kept += 1;
            keep.entry(&r.tool).or_default().push(r.index);
        }
        if kept == before {
            self.tools.retain(|_, t| !t.queries.is_empty());
            return false;
        }
        let keep: HashMap<String, Vec<usize>> = keep
            .into_iter()
            .map(|(tool, mut indices)| {
                indices.sort_unstable();
                (tool.to_owned(), indices)
            })
            .collect();
        for (name, tool) in &mut self.tools {
            let indices = keep.get(name).map(Vec::as_slice).unwrap_or_default();
            let mut i = 0;
            tool.queries.retain(|_| {
                let kept = indices.binary_search(&i).is_ok();
                i += 1;
                kept
            });
        }
        self.tools.retain(|_, t| !t.queries.is_empty());
        true
    }

    /// Forgets everything (`None`), a server's tools (`<server>`) or one tool
    /// (`<server>__<tool>`); returns how many queries were forgotten.
    pub fn forget(&mut self, what: Option<&str>) -> usize {
        let before = self.len();
        match what {
            None => self.tools.clear(),
            Some(name) if name.contains(crate::library::SEPARATOR) => {
                self.tools.remove(name);
            }
            Some(server) => {
                let prefix = format!("{server}{}", crate::library::SEPARATOR);
                self.tools.retain(|tool, _| !tool.starts_with(&prefix));
            }
        }
        before - self.len()
    }

    /// Keeps the tools for which `keep(name, evidence)` holds; returns whether any went.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &ToolEvidence) -> bool) -> bool {
        let before = self.tools.len();
        self.tools.retain(|name, tool| keep(name, tool));
        self.tools.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 24 * 3600;

    fn by(principal: &str, session: &str, weight: Weight, at: u64) -> Contribution {
        Contribution {
            principal: principal.into(),
            session: session.into(),
            weight: weight.value(),
            at,
        }
    }

    fn teach(e: &mut Evidence, tool: &str, query: &str, who: Contribution) -> bool {
        e.teach(Teaching {
            tool: tool.into(),
            fingerprint: "f1".into(),
            query: query.into(),
            by: who,
        })
    }

    #[test]
    fn one_session_s_repeats_count_once_and_a_call_outweighs_details() {
        let mut e = Evidence::default();
        teach(
            &mut e,
            "s__t",
            "read a file",
            by("p", "s1", Weight::Details, 10),
        );
        teach(
            &mut e,
            "s__t",
            "Read  a FILE",
            by("p", "s1", Weight::Call, 20),
        );
        teach(
            &mut e,
            "s__t",
            "read a file",
            by("p", "s1", Weight::Call, 30),
        );
        let q = &e.tools["s__t"].queries;
        assert_eq!(q.len(), 1, "one query, as first typed");
        assert_eq!(q[0].text, "read a file");
        assert_eq!((q[0].score(), q[0].last()), (1.0, 30));
        teach(
            &mut e,
            "s__t",
            "read a file",
            by("p", "s2", Weight::Details, 40),
        );
        assert_eq!(e.tools["s__t"].queries[0].score(), 1.5);
        assert!(!teach(&mut e, "s__t", "  ", by("p", "s3", Weight::Call, 1)));
        let long = "word ".repeat(MAX_QUERY_CHARS);
        assert!(!teach(
            &mut e,
            "s__t",
            &long,
            by("p", "s3", Weight::Call, 1)
        ));
    }

    #[test]
    fn a_changed_tool_starts_again() {
        let mut e = Evidence::default();
        teach(
            &mut e,
            "s__t",
            "read a file",
            by("p", "s1", Weight::Call, 10),
        );
        e.teach(Teaching {
            tool: "s__t".into(),
            fingerprint: "f2".into(),
            query: "open a document".into(),
            by: by("p", "s2", Weight::Call, 20),
        });
        let tool = &e.tools["s__t"];
        assert_eq!(tool.fingerprint, "f2");
        assert_eq!(tool.queries.len(), 1);
        assert_eq!(tool.queries[0].text, "open a document");
    }

    #[test]
    fn one_principal_holds_a_bounded_share_of_a_tool_and_the_least_valuable_go_first() {
        let now = 400 * DAY;
        let mut e = Evidence::default();
        // One principal teaches 20 queries, the newest last.
        for i in 0..20 {
            let at = now - (20 - i) * DAY;
            teach(
                &mut e,
                "s__t",
                &format!("query {i}"),
                by("mallory", "m", Weight::Call, at),
            );
        }
        // A query others confirmed.
        for s in ["a", "b"] {
            teach(
                &mut e,
                "s__t",
                "query 0",
                by(s, s, Weight::Call, now - 50 * DAY),
            );
        }
        assert!(e.bound(now));
        let texts: Vec<&str> = e.tools["s__t"]
            .queries
            .iter()
            .map(|q| q.text.as_str())
            .collect();
        // Mallory alone holds 8: its newest; "query 0" is shared, so it stays too.
        assert_eq!(texts.len(), PRINCIPAL_PER_TOOL + 1, "{texts:?}");
        assert!(texts.contains(&"query 0") && texts.contains(&"query 19"));
        assert!(!texts.contains(&"query 1"), "its oldest went first");
        // Many principals fill a tool up to its bound.
        for i in 0..40 {
            let p = format!("p{i}");
            teach(
                &mut e,
                "s__t",
                &format!("other {i}"),
                by(&p, &p, Weight::Call, now),
            );
        }
        e.bound(now);
        assert_eq!(e.tools["s__t"].queries.len(), MAX_PER_TOOL);
    }

    #[test]
    fn old_evidence_expires_and_forgetting_takes_a_tool_or_a_server() {
        let now = 1000 * DAY;
        let mut e = Evidence::default();
        teach(
            &mut e,
            "s__old",
            "old query",
            by("p", "s", Weight::Call, now - 181 * DAY),
        );
        teach(
            &mut e,
            "s__new",
            "new query",
            by("p", "s", Weight::Call, now),
        );
        teach(
            &mut e,
            "t__x",
            "other server",
            by("p", "s", Weight::Call, now),
        );
        assert!(e.bound(now));
        assert!(!e.tools.contains_key("s__old"));
        assert!(!e.bound(now), "nothing more to drop");
        assert_eq!(e.forget(Some("s")), 1);
        assert_eq!(e.forget(Some("t__x")), 1);
        assert!(e.is_empty());
        teach(
            &mut e,
            "s__new",
            "new query",
            by("p", "s", Weight::Call, now),
        );
        assert_eq!(e.forget(None), 1);
    }

    #[test]
    fn the_total_is_bounded() {
        let now = 10 * DAY;
        let mut e = Evidence::default();
        for i in 0..(MAX_TOTAL + 50) {
            let p = format!("p{}", i % 97);
            teach(
                &mut e,
                &format!("s__t{}", i % 1000),
                &format!("q{i}"),
                by(&p, &p, Weight::Call, now),
            );
        }
        e.bound(now);
        assert_eq!(e.len(), MAX_TOTAL);
    }
}
