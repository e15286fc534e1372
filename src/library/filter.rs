//! A server's `allowTools` / `denyTools` globs.

use crate::config::ServerConfig;

/// Applies the server's `allowTools` / `denyTools` globs (`*` and `?`) to a tool name.
pub(super) fn allowed(server: &ServerConfig, tool: &str) -> bool {
    let allow = server.allow_tools.is_empty() || server.allow_tools.iter().any(|g| glob(g, tool));
    allow && !server.deny_tools.iter().any(|g| glob(g, tool))
}

fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("read_*", "read_text_file"));
        assert!(glob("*file*", "read_text_file"));
        assert!(glob("get?sum", "get-sum"));
        assert!(!glob("write_*", "read_text_file"));
        assert!(glob("*", ""));
    }
}
