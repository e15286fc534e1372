//! Which search showed a tool: each session's recent searches, so a call (or a details read)
//! can be attributed to the query that found its tool. A tool called without a search that
//! showed it, or after the window, teaches nothing.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::clock::Instant;

/// Hits of a search that count as shown: the first ten (what the replay measures, and what a
/// model reads).
pub const SHOWN: usize = 10;
/// A call teaches only within this time of the search that showed its tool.
pub const WINDOW: Duration = Duration::from_secs(10 * 60);
/// Searches remembered per session (the latest).
const SEARCHES: usize = 16;
/// Sessions remembered; past this, the one idle longest is forgotten.
const SESSIONS: usize = 4096;

struct Shown {
    query: String,
    tools: Vec<String>,
    at: Instant,
}

#[derive(Default)]
struct Recent {
    searches: VecDeque<Shown>,
}

impl Recent {
    fn last(&self) -> Option<Instant> {
        self.searches.back().map(|s| s.at)
    }
}

/// The recent searches of every session, by session key.
#[derive(Default)]
pub struct Sessions {
    by_key: HashMap<String, Recent>,
}

impl Sessions {
    /// Records that `session` searched `query` and was shown `tools` (best first; only the
    /// first [`SHOWN`] count).
    pub fn searched(&mut self, session: &str, query: &str, tools: &[String], now: Instant) {
        if !self.by_key.contains_key(session) && self.by_key.len() >= SESSIONS {
            self.forget_idlest();
        }
        let recent = self.by_key.entry(session.to_owned()).or_default();
        recent
            .searches
            .retain(|s| now.duration_since(s.at) <= WINDOW);
        if recent.searches.len() == SEARCHES {
            recent.searches.pop_front();
        }
        recent.searches.push_back(Shown {
            query: query.to_owned(),
            tools: tools.iter().take(SHOWN).cloned().collect(),
            at: now,
        });
    }

    /// The query of `session`'s latest search within [`WINDOW`] that showed `tool`, if any.
    pub fn query_for(&self, session: &str, tool: &str, now: Instant) -> Option<&str> {
        self.by_key
            .get(session)?
            .searches
            .iter()
            .rev()
            .take_while(|s| now.duration_since(s.at) <= WINDOW)
            .find(|s| s.tools.iter().any(|t| t == tool))
            .map(|s| s.query.as_str())
    }

    fn forget_idlest(&mut self) {
        let idlest = self
            .by_key
            .iter()
            .min_by_key(|(_, recent)| recent.last())
            .map(|(key, _)| key.clone());
        if let Some(key) = idlest {
            self.by_key.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_call_is_attributed_to_the_latest_search_that_showed_its_tool_within_the_window() {
        let mut s = Sessions::default();
        let t0 = Instant::now();
        s.searched("a", "read a file", &names(&["fs__read", "fs__write"]), t0);
        s.searched(
            "a",
            "write a file",
            &names(&["fs__write"]),
            t0 + Duration::from_secs(1),
        );
        let later = t0 + Duration::from_secs(2);
        assert_eq!(s.query_for("a", "fs__read", later), Some("read a file"));
        assert_eq!(s.query_for("a", "fs__write", later), Some("write a file"));
        assert_eq!(s.query_for("a", "fs__delete", later), None, "never shown");
        assert_eq!(s.query_for("b", "fs__read", later), None, "another session");
        let expired = t0 + WINDOW + Duration::from_secs(2);
        assert_eq!(s.query_for("a", "fs__read", expired), None);
        // Only the first ten hits count as shown.
        let many: Vec<String> = (0..20).map(|i| format!("s__t{i}")).collect();
        s.searched("c", "many", &many, t0);
        assert_eq!(s.query_for("c", "s__t9", t0), Some("many"));
        assert_eq!(s.query_for("c", "s__t10", t0), None);
    }
}
