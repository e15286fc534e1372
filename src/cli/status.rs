//! What `list` and `get` say about each configured server, from the config and what lies
//! beside the catalogs (catalog, last failed listing, approvals, login), without starting
//! anything. The JSON shape is documented in docs/servers.md and kept stable for scripts.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::catalog::{Catalog, Failure};
use crate::config::{ServerConfig, Settings, TransportConfig, server_identifier};
use crate::redact::Redactor;
use crate::trust::Approvals;
use crate::upstream::CommandLookups;

/// The version of the `list --json` shape; bumped only when a field changes meaning or goes.
pub const FORMAT: u64 = 1;

/// `list --json`: the config and every server in it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    pub format: u64,
    pub config: PathBuf,
    pub catalog_dir: PathBuf,
    pub servers: Vec<Status>,
}

/// Where a server stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// It has a catalog: its tools are searched.
    Indexed,
    /// Never listed yet: `serve` lists it in the background, `index` now.
    #[default]
    NotIndexed,
    /// It cannot be served as configured, or its last listing failed (`reason` says why).
    Failing,
    /// A remote server that wants `meta-server auth login <name>`.
    NeedsLogin,
    /// `"disabled": true` in the config.
    Disabled,
}

impl State {
    /// As the text table shows it.
    pub fn words(self) -> &'static str {
        match self {
            Self::Indexed => "indexed",
            Self::NotIndexed => "not indexed",
            Self::Failing => "failing",
            Self::NeedsLogin => "needs login",
            Self::Disabled => "disabled",
        }
    }
}

/// One server as `list` and `get` show it.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The name its tools are qualified with (`<name>__<tool>`); the key when it has none.
    pub name: String,
    /// The config key as written.
    pub key: String,
    /// `stdio`, `http` or `sse`; `null` when the entry says neither command nor url.
    pub transport: Option<&'static str>,
    /// The command line or URL as written (`${VAR}` not expanded, secrets masked).
    pub target: Option<String>,
    pub state: State,
    /// Why it is failing or needs a login.
    pub reason: Option<String>,
    /// Its catalog was listed from another launch config than the one configured now.
    pub stale: bool,
    pub tools: Option<usize>,
    pub prompts: Option<usize>,
    pub resources: Option<usize>,
    /// When its catalog was listed (RFC 3339).
    pub refreshed_at: Option<String>,
    /// The MCP revision it spoke then.
    pub revision: Option<String>,
    /// What waits for `meta-server tools approve`: tools by qualified name, prompts,
    /// resources and instructions as `tools review` names them (`prompt:<server>__<name>`, ...).
    pub quarantined: Vec<String>,
    pub always_load: bool,
    /// Its catalog file, if it has one.
    pub catalog: Option<PathBuf>,
}

/// Every server of `settings` (the config text `text`), sorted by key.
pub fn all(settings: &Settings, text: &str) -> Vec<Status> {
    let raw = raw_servers(text);
    let mut lookups = CommandLookups::default();
    let mut out: Vec<Status> = settings
        .servers
        .iter()
        .map(|server| of_server(settings, server, &mut lookups))
        .collect();
    for skipped in &settings.skipped {
        let mut status = of_entry(&skipped.key, raw.get(&skipped.key), State::Failing);
        status.reason = Some(skipped.reason.clone());
        out.push(status);
    }
    out.extend((settings.disabled.iter()).map(|key| of_entry(key, raw.get(key), State::Disabled)));
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// A served server: its catalog, else why it has none.
fn of_server(settings: &Settings, server: &ServerConfig, lookups: &mut CommandLookups) -> Status {
    let dir = &settings.catalog_dir;
    let mut status = Status {
        name: server.name.clone(),
        key: server.key.clone(),
        transport: Some(transport(&server.transport)),
        target: Some(target(server)),
        always_load: server.always_load,
        ..Status::default()
    };
    match Catalog::load_server(dir, &server.name) {
        Ok(Some(catalog)) => {
            let approvals = Approvals::load(dir, &server.name);
            let held = crate::trust::assess(settings.trust, &approvals, &catalog);
            status.state = State::Indexed;
            status.stale = !catalog.made_from(server);
            status.tools = Some(catalog.tools.len());
            status.prompts = Some(catalog.prompts.as_ref().map_or(0, |p| p.len()));
            status.resources = Some(catalog.resources.as_ref().map_or(0, |r| r.len()));
            status.quarantined = (held.iter())
                .map(|(kind, key, _)| kind.name(&server.name, key))
                .collect();
            status.refreshed_at = catalog.fetched_at;
            status.revision = catalog.protocol_version;
            status.catalog = Some(Catalog::path(dir, &server.name));
        }
        Ok(None) => match Failure::load(dir, &server.name) {
            Some(failure) => {
                status.state = if failure.needs_login {
                    State::NeedsLogin
                } else {
                    State::Failing
                };
                status.reason = Some(format!("{} (at {})", failure.reason, failure.at));
            }
            None => {
                if let Err(e) = crate::upstream::check_launch(server, lookups) {
                    status.state = State::Failing;
                    status.reason = Some(e.to_string());
                }
            }
        },
        Err(e) => {
            status.state = State::Failing;
            status.reason = Some(format!("its catalog cannot be read: {e}"));
        }
    }
    status
}

/// An entry the config does not serve (disabled, or skipped for a reason), from its JSON.
fn of_entry(key: &str, entry: Option<&Value>, state: State) -> Status {
    let text = |k: &str| entry.and_then(|e| e.get(k)).and_then(Value::as_str);
    let (transport, target) = match (text("command"), text("url")) {
        (Some(command), None) => (Some("stdio"), Some(command.to_owned())),
        (None, Some(url)) => (
            Some(if text("type") == Some("sse") {
                "sse"
            } else {
                "http"
            }),
            Some(url.to_owned()),
        ),
        _ => (None, None),
    };
    Status {
        name: server_identifier(key).unwrap_or_else(|_| key.to_owned()),
        key: key.to_owned(),
        transport,
        target: target.map(|t| crate::redact::process().apply(&t)),
        state,
        always_load: entry.and_then(|e| e.get("alwaysLoad")) == Some(&Value::Bool(true)),
        ..Status::default()
    }
}

fn transport(transport: &TransportConfig) -> &'static str {
    match transport {
        TransportConfig::Stdio { .. } => "stdio",
        TransportConfig::Http { .. } => "http",
        TransportConfig::Sse { .. } => "sse",
    }
}

/// The command line or URL as written, its secrets masked.
pub fn target(server: &ServerConfig) -> String {
    let written = match &server.transport {
        TransportConfig::Stdio { command, args, .. } => std::iter::once(command)
            .chain(args)
            .map(|a| shell_word(a))
            .collect::<Vec<_>>()
            .join(" "),
        TransportConfig::Http { url, .. } | TransportConfig::Sse { url, .. } => url.clone(),
    };
    let masked = Redactor::new(server.secrets()).apply(&written);
    crate::redact::process().apply(&masked)
}

/// `word` quoted when a shell would split it.
fn shell_word(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,${}".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// The servers section of the config text, by key (empty if it cannot be read).
fn raw_servers(text: &str) -> serde_json::Map<String, Value> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Ok(Value::Object(mut root)) =
        jsonc_parser::parse_to_serde_value::<Value>(text, &crate::config::jsonc())
    else {
        return serde_json::Map::new();
    };
    match root.remove("mcpServers").or_else(|| root.remove("servers")) {
        Some(Value::Object(servers)) => servers,
        _ => serde_json::Map::new(),
    }
}

/// The status of the server `name` (its key or identifier) among `all`.
pub fn find<'a>(all: &'a [Status], name: &str) -> Option<&'a Status> {
    all.iter()
        .find(|s| s.key == name)
        .or_else(|| all.iter().find(|s| s.name == name))
}

/// The config file's text (for the entries it does not serve).
pub fn config_text(path: &Path) -> anyhow::Result<String> {
    Ok(crate::clients::read_text(path)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_entry_gets_its_state() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            r#"{{"metaServer": {{"catalogDir": "{}"}}, "mcpServers": {{
                "indexed": {{"command": "sh"}},
                "never": {{"command": "sh", "args": ["-c", "echo hi"]}},
                "missing": {{"command": "/nonexistent/bin/x"}},
                "login": {{"url": "https://example.invalid/mcp"}},
                "off": {{"command": "sh", "disabled": true}},
                "bad": {{"url": "ftp://x"}}
            }}}}"#,
            dir.path().display()
        );
        let settings = Settings::parse(&dir.path().join("config.json"), &text).unwrap();
        let tool = serde_json::json!({"name": "t", "inputSchema": {"type": "object"}});
        Catalog::new("indexed", vec![tool.into()])
            .write(dir.path())
            .unwrap();
        Failure::record(dir.path(), "login", "needs a login", true);
        let all = all(&settings, &text);
        let state = |key: &str| {
            let s = find(&all, key).unwrap();
            (s.state, s.reason.clone().unwrap_or_default())
        };
        let keys: Vec<&str> = all.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["bad", "indexed", "login", "missing", "never", "off"]);
        assert_eq!(state("indexed").0, State::Indexed);
        assert_eq!(find(&all, "indexed").unwrap().tools, Some(1));
        assert_eq!(state("never").0, State::NotIndexed);
        assert_eq!(
            find(&all, "never").unwrap().target.as_deref(),
            Some("sh -c 'echo hi'")
        );
        assert_eq!(state("missing").0, State::Failing);
        assert_eq!(state("login").0, State::NeedsLogin);
        assert_eq!(state("off").0, State::Disabled);
        let (bad, why) = state("bad");
        assert_eq!(bad, State::Failing);
        assert!(why.contains("http://"), "{why}");
    }
}
