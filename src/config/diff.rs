//! A changed config as a running `serve` takes it: which servers came, went or changed, and
//! which `metaServer` settings changed that only a restart applies.
//!
//! Live: the servers (every per-server key) and their order in the file (which settles resource
//! URIs two servers claim), `policy`, `maxResultTokens`, `hardResultTokens`, `idleTimeoutSecs`,
//! `timeoutSecs`, `maxMessageMb`, `maxListPages`, `maxListMb` (through the servers they shape)
//! and `indexConcurrency`. At the next start: the keys that open or shape something built once
//! (the catalog dir, the store, the search model, the result store, trust, the audit log, the
//! HTTP tokens, the skills).

use super::Settings;

/// What a reload changes, by server name (the identifier in qualified names), sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Servers whose config differs in any key: they are restarted.
    pub changed: Vec<String>,
    /// `metaServer` keys whose new value waits for the next start; the old one stays.
    pub fixed: Vec<&'static str>,
    /// Live settings other than the servers changed (policy, budgets, concurrency, the
    /// servers' order in the file).
    pub settings: bool,
}

impl Change {
    /// Whether anything at all is different.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.fixed.is_empty()
            && !self.settings
    }
}

impl Settings {
    /// `new` as this running process applies it, and what changes: the live settings are
    /// `new`'s, those only a start applies stay `self`'s (and are named in [`Change::fixed`]).
    pub fn reload(&self, mut new: Settings) -> (Settings, Change) {
        let mut fixed = Vec::new();
        macro_rules! keep {
            ($($field:ident).+, $key:literal) => {
                if new.$($field).+ != self.$($field).+ {
                    fixed.push($key);
                    new.$($field).+ = self.$($field).+.clone();
                }
            };
        }
        keep!(catalog_dir, "metaServer.catalogDir");
        keep!(skills_dirs, "metaServer.skillsDirs");
        keep!(embed_dir, "metaServer.embeddings.dir");
        keep!(embeddings, "metaServer.search.embeddings");
        keep!(results.ttl, "metaServer.resultTtlSecs");
        keep!(results.memory_bytes, "metaServer.resultMemoryMb");
        keep!(results.tokenizer, "metaServer.tokenizer");
        keep!(store, "metaServer.store");
        keep!(trust, "metaServer.trust");
        keep!(audit, "metaServer.audit");
        keep!(http_tokens, "metaServer.http.tokens");
        let settings = new.policy != self.policy
            || new.file_order != self.file_order
            || new.index_concurrency != self.index_concurrency
            || new.results.max_result_tokens != self.results.max_result_tokens
            || new.results.hard_result_tokens != self.results.hard_result_tokens;
        let names =
            |s: &Settings| -> Vec<String> { s.servers.iter().map(|s| s.name.clone()).collect() };
        let (old_names, new_names) = (names(self), names(&new));
        let change = Change {
            added: (new_names.iter())
                .filter(|n| self.server(n).is_none())
                .cloned()
                .collect(),
            removed: (old_names.iter())
                .filter(|n| new.server(n).is_none())
                .cloned()
                .collect(),
            changed: (new.servers.iter())
                .filter(|s| self.server(&s.name).is_some_and(|old| old != *s))
                .map(|s| s.name.clone())
                .collect(),
            fixed,
            settings,
        };
        (new, change)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn settings(text: &str) -> Settings {
        Settings::parse(Path::new("/cfg/config.json"), text).unwrap()
    }

    #[test]
    fn servers_come_go_and_change_and_fixed_keys_stay() {
        let old = settings(
            r#"{"metaServer": {"trust": "off", "timeoutSecs": 30}, "mcpServers": {
                "a": {"command": "a"}, "b": {"command": "b"}, "c": {"command": "c"}}}"#,
        );
        let new = settings(
            r#"{"metaServer": {"trust": "review", "timeoutSecs": 30, "catalogDir": "x",
                "policy": {"destructive": "deny"}},
                "mcpServers": {"a": {"command": "a"}, "c": {"command": "c", "args": ["-v"]},
                "d": {"url": "http://h/mcp"}, "e": {"command": "e", "disabled": true}}}"#,
        );
        let (applied, change) = old.reload(new.clone());
        assert_eq!(
            change,
            Change {
                added: vec!["d".into()],
                removed: vec!["b".into()],
                changed: vec!["c".into()],
                fixed: vec!["metaServer.catalogDir", "metaServer.trust"],
                settings: true,
            }
        );
        assert_eq!(
            applied.trust, old.trust,
            "a fixed key keeps its running value"
        );
        assert_eq!(applied.catalog_dir, old.catalog_dir);
        assert_eq!(applied.policy, new.policy, "the policy is live");
        assert_eq!(applied.servers, new.servers);
        assert_eq!(applied.disabled, ["e"]);
        let (_, none) = applied.reload(new);
        assert_eq!(none.fixed, ["metaServer.catalogDir", "metaServer.trust"]);
        let (_, none) = applied.reload(applied.clone());
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn a_global_default_changes_every_server_it_shapes() {
        let old = settings(
            r#"{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b", "timeoutSecs": 5}}}"#,
        );
        let new = settings(
            r#"{"metaServer": {"timeoutSecs": 9}, "mcpServers": {"a": {"command": "a"}, "b": {"command": "b", "timeoutSecs": 5}}}"#,
        );
        let (_, change) = old.reload(new);
        assert_eq!(change.changed, ["a"]);
        assert!(!change.settings && change.fixed.is_empty());
    }
}
