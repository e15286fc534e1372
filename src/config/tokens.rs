//! `metaServer.http.tokens`: named bearer tokens of `serve --http`, each limited to some
//! servers and tools.

use std::fmt;

use serde::Deserialize;

use super::ToolFilter;
use super::values::{Flag, Str, Strs};

/// The principal names meta-server gives itself: a token may not take them.
const RESERVED_NAMES: [&str; 1] = ["anonymous"];

/// One named token.
#[derive(Clone, PartialEq)]
pub struct TokenConfig {
    /// What the audit log and metrics call its holder (never the token).
    pub name: String,
    /// The token as written, usually `${VAR}`: expanded when serving starts, never stored
    /// expanded.
    pub token: String,
    /// The servers (by name) it sees and calls; `None`: every server.
    pub servers: Option<Vec<String>>,
    /// Globs over qualified names (`<server>__<tool>`) it neither sees nor calls.
    pub deny_tools: ToolFilter,
    /// `"admin": true`: its holder may open the console (`/console`) of `serve --http`.
    pub admin: bool,
}

impl fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenConfig")
            .field("name", &self.name)
            .field("servers", &self.servers)
            .field("deny_tools", &self.deny_tools.globs().1)
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

/// `metaServer.http` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HttpBlock {
    #[serde(default)]
    tokens: Vec<TokenEntry>,
}

/// One entry of `tokens` as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TokenEntry {
    name: Str,
    token: Str,
    servers: Option<Strs>,
    #[serde(default)]
    deny_tools: Strs,
    #[serde(default)]
    admin: Flag,
}

impl HttpBlock {
    /// The tokens, their servers resolved among `servers` (name, config key); an error is the
    /// key it is about (under `metaServer.http`) and what to do.
    pub(super) fn tokens(
        self,
        servers: &[super::ServerConfig],
    ) -> Result<Vec<TokenConfig>, (String, String)> {
        let mut out: Vec<TokenConfig> = Vec::new();
        for (i, entry) in self.tokens.into_iter().enumerate() {
            let at = |key: &str| format!("tokens[{i}].{key}");
            let name = entry.name.0;
            let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
            if name.is_empty() || name.len() > 64 || !name.chars().all(fine) {
                return Err((
                    at("name"),
                    "must be 1 to 64 letters, digits, '_', '.' or '-'".into(),
                ));
            }
            if RESERVED_NAMES.contains(&name.as_str()) || name.starts_with("token-") {
                return Err((
                    at("name"),
                    format!("\"{name}\" is a name meta-server gives itself; choose another"),
                ));
            }
            if out.iter().any(|t| t.name == name) {
                return Err((
                    at("name"),
                    format!("\"{name}\" names two tokens; give each its own"),
                ));
            }
            if entry.token.0.trim().is_empty() {
                return Err((
                    at("token"),
                    "is empty; write \"${VAR}\" and export VAR as a long random string".into(),
                ));
            }
            let servers = entry
                .servers
                .map(|list| {
                    list.0
                        .iter()
                        .map(|wanted| {
                            servers
                                .iter()
                                .find(|s| &s.name == wanted || &s.key == wanted)
                                .map(|s| s.name.clone())
                                .ok_or_else(|| {
                                    (
                                        at("servers"),
                                        format!(
                                            "\"{wanted}\" is not a configured server (or its entry could not be read); name servers as in mcpServers"
                                        ),
                                    )
                                })
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?;
            let deny_tools = ToolFilter::new(Vec::new(), entry.deny_tools.0)
                .map_err(|e| (format!("{}[{}]", at("denyTools"), e.index), e.message))?;
            out.push(TokenConfig {
                name,
                token: entry.token.0,
                servers,
                deny_tools,
                admin: entry.admin.0,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Settings;

    fn parse(tokens: &str) -> Result<Settings, String> {
        let text = format!(
            r#"{{"metaServer": {{"http": {{"tokens": {tokens}}}}},
                "mcpServers": {{"Fs Server": {{"command": "x"}}, "memory": {{"command": "x"}}}}}}"#
        );
        Settings::parse(Path::new("/cfg/config.json"), &text).map_err(|e| e.to_string())
    }

    #[test]
    fn named_tokens_resolve_their_servers_and_keep_the_token_unexpanded() {
        let s = parse(
            r#"[{"name": "ci", "token": "${CI_TOKEN}", "servers": ["Fs Server"], "denyTools": ["*__write_*"]},
                {"name": "ops", "token": "${OPS_TOKEN}"}]"#,
        )
        .unwrap();
        let [ci, ops] = &s.http_tokens[..] else {
            panic!("{:?}", s.http_tokens)
        };
        assert_eq!(ci.servers.as_deref(), Some(&["Fs-Server".to_owned()][..]));
        assert_eq!(ci.token, "${CI_TOKEN}");
        assert!(
            !ci.deny_tools.allows("Fs-Server__write_file")
                && ci.deny_tools.allows("Fs-Server__read")
        );
        assert_eq!(ops.servers, None);
        assert!(!ci.admin && !ops.admin);
        let s = parse(r#"[{"name": "root", "token": "${R}", "admin": true}]"#).unwrap();
        assert!(s.http_tokens[0].admin);
        let e = parse(r#"[{"name": "root", "token": "${R}", "admin": "yes"}]"#).unwrap_err();
        assert!(e.contains("tokens[0].admin"), "{e}");
        assert!(!format!("{ci:?}").contains("CI_TOKEN"), "never printed");
    }

    #[test]
    fn bad_tokens_stop_the_config_naming_the_key() {
        let e = parse(r#"[{"name": "ci", "token": "${T}", "servers": ["github"]}]"#).unwrap_err();
        assert!(
            e.contains("metaServer.http.tokens[0].servers")
                && e.contains("\"github\" is not a configured server"),
            "{e}"
        );
        let e = parse(r#"[{"name": "a", "token": "${A}"}, {"name": "a", "token": "${B}"}]"#)
            .unwrap_err();
        assert!(
            e.contains("tokens[1].name") && e.contains("names two tokens"),
            "{e}"
        );
        let e = parse(r#"[{"name": "anonymous", "token": "${A}"}]"#).unwrap_err();
        assert!(e.contains("meta-server gives itself"), "{e}");
        let e = parse(r#"[{"name": "a b", "token": "${A}"}]"#).unwrap_err();
        assert!(e.contains("tokens[0].name"), "{e}");
        let e = parse(r#"[{"name": "a", "token": " "}]"#).unwrap_err();
        assert!(e.contains("tokens[0].token") && e.contains("${VAR}"), "{e}");
        let e = parse(r#"[{"name": "a", "token": "${A}", "deny": []}]"#).unwrap_err();
        assert!(e.contains("denyTools"), "{e}");
        let e = parse(r#"[{"name": "a", "token": "${A}", "denyTools": ["[x"]}]"#).unwrap_err();
        assert!(e.contains("tokens[0].denyTools[0]"), "{e}");
    }
}
