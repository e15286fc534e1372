//! What a principal may see and call: every server, or a named token's servers less its
//! denied tools. meta-server's own tools and skills are everyone's.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::config::{RESERVED_SERVER, SKILL_SERVER, TokenConfig, ToolFilter};
use crate::library::{Library, SEPARATOR};

/// Suggestions looked at per one shown, when some are hidden from the principal.
const LOOK_FURTHER: usize = 4;

/// The servers and tools a principal sees; unlimited by default.
#[derive(Debug, Clone, Default)]
pub(crate) struct Access(Option<Arc<Limits>>);

#[derive(Debug)]
struct Limits {
    /// `None`: every server.
    servers: Option<BTreeSet<String>>,
    /// Over qualified names.
    deny: ToolFilter,
}

impl Access {
    /// The access of a named token.
    pub(crate) fn of(token: &TokenConfig) -> Self {
        if token.servers.is_none() && token.deny_tools.globs().1.is_empty() {
            return Self::default();
        }
        Self(Some(Arc::new(Limits {
            servers: token.servers.as_ref().map(|s| s.iter().cloned().collect()),
            deny: token.deny_tools.clone(),
        })))
    }

    /// Whether anything is hidden.
    pub(crate) fn is_limited(&self) -> bool {
        self.0.is_some()
    }

    /// Whether `other` is this very access (the same token's), not merely an equal one.
    pub(crate) fn is_same(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// Whether server `server` is visible (meta-server's own always are).
    pub(crate) fn sees_server(&self, server: &str) -> bool {
        match &self.0 {
            None => true,
            Some(_) if server == RESERVED_SERVER || server == SKILL_SERVER => true,
            Some(limits) => limits.servers.as_ref().is_none_or(|s| s.contains(server)),
        }
    }

    /// Whether the tool `qualified` (`<server>__<tool>`) is visible.
    pub(crate) fn sees(&self, qualified: &str) -> bool {
        let Some(limits) = &self.0 else {
            return true;
        };
        let server = qualified.split_once(SEPARATOR).map_or("", |(s, _)| s);
        if server == RESERVED_SERVER || server == SKILL_SERVER {
            return true;
        }
        self.sees_server(server) && limits.deny.allows(qualified)
    }

    /// `library`'s suggestions for `name`, of the visible tools only.
    pub(crate) fn suggestions(&self, library: &Library, name: &str, max: usize) -> Vec<String> {
        if !self.is_limited() {
            return library.suggestions(name, max);
        }
        library
            .suggestions(name, max * LOOK_FURTHER)
            .into_iter()
            .filter(|n| self.sees(n))
            .take(max)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_sees_its_servers_less_its_denied_tools_and_always_meta_server_s_own() {
        let token = TokenConfig {
            name: "ci".into(),
            token: "${T}".into(),
            servers: Some(vec!["fs".into()]),
            deny_tools: ToolFilter::new(Vec::new(), vec!["*__write_*".into()]).unwrap(),
        };
        let access = Access::of(&token);
        assert!(access.sees("fs__read_file") && !access.sees("fs__write_file"));
        assert!(!access.sees("memory__read_graph") && !access.sees_server("memory"));
        assert!(access.sees("meta__run_script") && access.sees("skill__deploy"));
        assert!(!access.sees("nonsense"));
        let all = Access::default();
        assert!(!all.is_limited() && all.sees("memory__read_graph") && all.sees("nonsense"));
    }
}
