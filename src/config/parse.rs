//! Parsing of the config file: `mcpServers` (Claude Desktop, Cursor, Claude Code) or `servers`
//! (VS Code), per-server meta-server keys, and the global `metaServer` object.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{
    ConfigError, DEFAULT_CALL_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_INDEX_CONCURRENCY,
    DEFAULT_RESULT_MEMORY, DEFAULT_RESULT_TTL, ResultSettings, ServerConfig, Settings, Tokenizer,
    TransportConfig, default_catalog_dir, default_embed_dir, default_skills_dirs,
    server_identifier,
};

const GLOBAL_KEYS: &[&str] = &[
    "catalogDir",
    "idleTimeoutSecs",
    "timeoutSecs",
    "maxResultTokens",
    "indexConcurrency",
    "skillsDirs",
    "embeddings",
    "search",
    "hardResultTokens",
    "resultTtlSecs",
    "resultMemoryMb",
    "tokenizer",
];

/// Reads one value at a location, producing errors that name the file and the location.
struct Cx<'a> {
    path: &'a Path,
}

impl Cx<'_> {
    fn err(&self, location: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_owned(),
            location: location.into(),
            message: message.into(),
        }
    }

    fn string(
        &self,
        obj: &Map<String, Value>,
        at: &str,
        key: &str,
    ) -> Result<Option<String>, ConfigError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.err(
                format!("{at}.{key}"),
                format!("must be a string, found {}", kind(other)),
            )),
        }
    }

    fn strings(
        &self,
        obj: &Map<String, Value>,
        at: &str,
        key: &str,
    ) -> Result<Vec<String>, ConfigError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(self.err(
                        format!("{at}.{key}[{i}]"),
                        format!("must be a string, found {}", kind(other)),
                    )),
                })
                .collect(),
            Some(other) => Err(self.err(
                format!("{at}.{key}"),
                format!("must be an array of strings, found {}", kind(other)),
            )),
        }
    }

    fn string_map(
        &self,
        obj: &Map<String, Value>,
        at: &str,
        key: &str,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    Value::Number(n) => Ok((k.clone(), n.to_string())),
                    Value::Bool(b) => Ok((k.clone(), b.to_string())),
                    other => Err(self.err(
                        format!("{at}.{key}.{k}"),
                        format!("must be a string, found {}", kind(other)),
                    )),
                })
                .collect(),
            Some(other) => Err(self.err(
                format!("{at}.{key}"),
                format!("must be an object of strings, found {}", kind(other)),
            )),
        }
    }

    fn bool(&self, obj: &Map<String, Value>, at: &str, key: &str) -> Result<bool, ConfigError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(self.err(
                format!("{at}.{key}"),
                format!("must be true or false, found {}", kind(other)),
            )),
        }
    }

    fn positive(
        &self,
        obj: &Map<String, Value>,
        at: &str,
        key: &str,
    ) -> Result<Option<u64>, ConfigError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v > 0 => Ok(Some(v)),
                _ => Err(self.err(
                    format!("{at}.{key}"),
                    format!("must be a whole number above 0, found {n}"),
                )),
            },
            Some(other) => Err(self.err(
                format!("{at}.{key}"),
                format!("must be a whole number above 0, found {}", kind(other)),
            )),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Global defaults from `metaServer`, applied to servers that do not set their own.
struct Defaults {
    idle_timeout: Duration,
    call_timeout: Duration,
    max_result_tokens: Option<u64>,
}

pub(super) fn parse(path: &Path, text: &str) -> Result<Settings, ConfigError> {
    let cx = Cx { path };
    let root: Value = serde_json::from_str(text).map_err(|e| ConfigError::Syntax {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let Value::Object(root) = root else {
        return Err(cx.err("top level", "must be an object with an \"mcpServers\" key"));
    };

    let global = match root.get("metaServer") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(cx.err(
                "metaServer",
                format!("must be an object, found {}", kind(other)),
            ));
        }
    };
    if let Some(unknown) = global.keys().find(|k| !GLOBAL_KEYS.contains(&k.as_str())) {
        return Err(cx.err(
            format!("metaServer.{unknown}"),
            format!("unknown key; known keys are {}", GLOBAL_KEYS.join(", ")),
        ));
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let catalog_dir = match cx.string(&global, "metaServer", "catalogDir")? {
        Some(dir) => base.join(PathBuf::from(dir)),
        None => default_catalog_dir(),
    };
    let index_concurrency = cx
        .positive(&global, "metaServer", "indexConcurrency")?
        .map_or(DEFAULT_INDEX_CONCURRENCY, |n| n as usize);
    let skills_dirs = match global.get("skillsDirs") {
        None | Some(Value::Null) => default_skills_dirs(),
        Some(_) => cx
            .strings(&global, "metaServer", "skillsDirs")?
            .iter()
            .map(|d| match d.strip_prefix("~/") {
                Some(rest) => dirs::home_dir().unwrap_or_default().join(rest),
                None => base.join(d),
            })
            .collect(),
    };
    let embed_dir = match global.get("embeddings") {
        None | Some(Value::Null) => default_embed_dir(),
        Some(Value::Object(e)) => {
            if let Some(unknown) = e.keys().find(|k| k.as_str() != "dir") {
                return Err(cx.err(
                    format!("metaServer.embeddings.{unknown}"),
                    "unknown key; the only key is \"dir\"",
                ));
            }
            cx.string(e, "metaServer.embeddings", "dir")?
                .map_or_else(default_embed_dir, |d| base.join(d))
        }
        Some(other) => {
            return Err(cx.err(
                "metaServer.embeddings",
                format!(
                    "must be an object like {{\"dir\": \"...\"}}, found {}",
                    kind(other)
                ),
            ));
        }
    };
    let embeddings = match global.get("search") {
        None | Some(Value::Null) => true,
        Some(Value::Object(s)) => {
            if let Some(unknown) = s.keys().find(|k| k.as_str() != "embeddings") {
                return Err(cx.err(
                    format!("metaServer.search.{unknown}"),
                    "unknown key; the only key is \"embeddings\"",
                ));
            }
            s.get("embeddings").is_none_or(Value::is_null)
                || cx.bool(s, "metaServer.search", "embeddings")?
        }
        Some(other) => {
            return Err(cx.err(
                "metaServer.search",
                format!(
                    "must be an object like {{\"embeddings\": false}}, found {}",
                    kind(other)
                ),
            ));
        }
    };
    let results = ResultSettings {
        max_result_tokens: cx.positive(&global, "metaServer", "maxResultTokens")?,
        hard_result_tokens: cx.positive(&global, "metaServer", "hardResultTokens")?,
        ttl: cx
            .positive(&global, "metaServer", "resultTtlSecs")?
            .map_or(DEFAULT_RESULT_TTL, Duration::from_secs),
        memory_bytes: cx
            .positive(&global, "metaServer", "resultMemoryMb")?
            .map_or(DEFAULT_RESULT_MEMORY, |mb| mb << 20),
        tokenizer: match cx.string(&global, "metaServer", "tokenizer")?.as_deref() {
            None | Some("o200k") => Tokenizer::O200k,
            Some("estimate") => Tokenizer::Estimate,
            Some(other) => {
                return Err(cx.err(
                    "metaServer.tokenizer",
                    format!("\"{other}\" is not a tokenizer; use \"o200k\" (exact) or \"estimate\" (bytes / 4, faster)"),
                ));
            }
        },
    };
    let defaults = Defaults {
        idle_timeout: cx
            .positive(&global, "metaServer", "idleTimeoutSecs")?
            .map_or(DEFAULT_IDLE_TIMEOUT, Duration::from_secs),
        call_timeout: cx
            .positive(&global, "metaServer", "timeoutSecs")?
            .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_secs),
        max_result_tokens: cx.positive(&global, "metaServer", "maxResultTokens")?,
    };

    let (section, servers) = match (root.get("mcpServers"), root.get("servers")) {
        (Some(s), _) => ("mcpServers", s),
        (None, Some(s)) => ("servers", s),
        (None, None) => {
            return Err(cx.err(
                "top level",
                "has no \"mcpServers\" (or VS Code \"servers\") object; add one mapping server names to {\"command\": ...} or {\"url\": ...}",
            ));
        }
    };
    let Value::Object(servers) = servers else {
        return Err(cx.err(
            section,
            format!(
                "must be an object mapping server names to entries, found {}",
                kind(servers)
            ),
        ));
    };

    let mut out: Vec<ServerConfig> = Vec::new();
    for (key, entry) in servers {
        let at = format!("{section}.\"{key}\"");
        let Value::Object(entry) = entry else {
            return Err(cx.err(at, format!("must be an object, found {}", kind(entry))));
        };
        if cx.bool(entry, &at, "disabled")? {
            continue;
        }
        let name = server_identifier(key).map_err(|m| cx.err(&at, m))?;
        if let Some(twin) = out.iter().find(|s| s.name == name) {
            return Err(cx.err(
                &at,
                format!(
                    "maps to the same name \"{name}\" as server \"{}\"; rename one of them",
                    twin.key
                ),
            ));
        }
        out.push(parse_server(&cx, &at, key, name, entry, &defaults)?);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Settings {
        source: path.to_owned(),
        catalog_dir,
        index_concurrency,
        skills_dirs,
        embed_dir,
        embeddings,
        results,
        servers: out,
    })
}

fn parse_server(
    cx: &Cx<'_>,
    at: &str,
    key: &str,
    name: String,
    entry: &Map<String, Value>,
    defaults: &Defaults,
) -> Result<ServerConfig, ConfigError> {
    let command = cx.string(entry, at, "command")?;
    let url = cx.string(entry, at, "url")?;
    let kind = cx.string(entry, at, "type")?;
    let transport = match (command, url) {
        (Some(_), Some(_)) => {
            return Err(cx.err(at, "has both \"command\" and \"url\"; keep \"command\" for a local server or \"url\" for a remote one"));
        }
        (None, None) => {
            return Err(cx.err(
                at,
                "needs \"command\" (a local stdio server) or \"url\" (a streamable HTTP server)",
            ));
        }
        (Some(command), None) => {
            if let Some(t) = kind.as_deref().filter(|t| *t != "stdio") {
                return Err(cx.err(format!("{at}.type"), format!("is \"{t}\" but the entry has a \"command\"; use \"stdio\" or remove \"type\"")));
            }
            if command.trim().is_empty() {
                return Err(cx.err(
                    format!("{at}.command"),
                    "is empty; name the program that starts the server",
                ));
            }
            TransportConfig::Stdio {
                command,
                args: cx.strings(entry, at, "args")?,
                env: cx.string_map(entry, at, "env")?,
                cwd: cx.string(entry, at, "cwd")?,
            }
        }
        (None, Some(url)) => {
            match kind.as_deref() {
                None | Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {}
                Some("sse") => {
                    return Err(cx.err(format!("{at}.type"), "is \"sse\": the legacy SSE transport is not supported; use the server's streamable HTTP endpoint (usually ending in /mcp) with \"type\": \"http\""));
                }
                Some(t) => {
                    return Err(cx.err(format!("{at}.type"), format!("\"{t}\" is not a known transport; use \"http\" for a url or \"stdio\" for a command")));
                }
            }
            if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("${"))
            {
                return Err(cx.err(
                    format!("{at}.url"),
                    format!("\"{url}\" must start with http:// or https://"),
                ));
            }
            TransportConfig::Http {
                url,
                headers: cx.string_map(entry, at, "headers")?,
            }
        }
    };
    Ok(ServerConfig {
        name,
        key: key.to_owned(),
        description: cx.string(entry, at, "description")?,
        transport,
        always_load: cx.bool(entry, at, "alwaysLoad")?,
        idle_timeout: cx
            .positive(entry, at, "idleTimeoutSecs")?
            .map_or(defaults.idle_timeout, Duration::from_secs),
        call_timeout: cx
            .positive(entry, at, "timeoutSecs")?
            .map_or(defaults.call_timeout, Duration::from_secs),
        allow_tools: cx.strings(entry, at, "allowTools")?,
        deny_tools: cx.strings(entry, at, "denyTools")?,
        max_result_tokens: cx
            .positive(entry, at, "maxResultTokens")?
            .or(defaults.max_result_tokens),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Result<Settings, ConfigError> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/configs")
            .join(name);
        Settings::load(&path, None)
    }

    fn parse_str(text: &str) -> Result<Settings, ConfigError> {
        parse(Path::new("/cfg/config.json"), text)
    }

    #[test]
    fn claude_desktop_config() {
        let s = fixture("claude_desktop_config.json").unwrap();
        let names: Vec<_> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["filesystem", "github", "memory"]);
        let gh = s.server("github").unwrap();
        let TransportConfig::Stdio {
            command, args, env, ..
        } = &gh.transport
        else {
            panic!("github is stdio");
        };
        assert_eq!(command, "npx");
        assert_eq!(args, &["-y", "@modelcontextprotocol/server-github"]);
        assert_eq!(env["GITHUB_PERSONAL_ACCESS_TOKEN"], "${GITHUB_TOKEN}");
        assert_eq!(gh.idle_timeout, DEFAULT_IDLE_TIMEOUT);
    }

    #[test]
    fn cursor_config_with_remote_server_and_meta_keys() {
        let s = fixture("cursor_mcp.json").unwrap();
        let remote = s.server("Ant-Design-Components").unwrap();
        assert_eq!(remote.key, "Ant Design Components");
        let TransportConfig::Http { url, headers } = &remote.transport else {
            panic!("remote is http");
        };
        assert_eq!(url, "https://mcp.example.com/mcp");
        assert_eq!(headers["Authorization"], "Bearer ${ANT_TOKEN}");
        let time = s.server("time").unwrap();
        assert_eq!(time.idle_timeout, Duration::from_secs(30));
        assert_eq!(
            time.call_timeout,
            Duration::from_secs(120),
            "global timeoutSecs applies"
        );
        assert!(time.always_load);
        assert_eq!(
            time.description.as_deref(),
            Some("Current time and time zones")
        );
        assert!(
            s.server("disabled-one").is_none(),
            "disabled servers are left out"
        );
        assert_eq!(
            s.catalog_dir,
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/configs/catalogs-here")
        );
    }

    #[test]
    fn claude_code_mcp_json_with_http_type() {
        let s = fixture("claude_code.mcp.json").unwrap();
        let api = s.server("api").unwrap();
        assert!(matches!(api.transport, TransportConfig::Http { .. }));
        let local = s.server("local-tools").unwrap();
        let TransportConfig::Stdio { cwd, .. } = &local.transport else {
            panic!()
        };
        assert_eq!(cwd.as_deref(), Some("${PROJECT_DIR:-.}"));
    }

    #[test]
    fn vscode_servers_shape() {
        let s = fixture("vscode_mcp.json").unwrap();
        let names: Vec<_> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["fetch", "remote"]);
    }

    fn invalid(text: &str) -> String {
        let err = parse_str(text).unwrap_err();
        assert!(
            matches!(
                err,
                ConfigError::Invalid { .. } | ConfigError::Syntax { .. }
            ),
            "{err:?}"
        );
        err.to_string()
    }

    #[test]
    fn errors_name_file_server_and_key() {
        let e = invalid(r#"{"mcpServers": {"s": {"command": "x", "args": "a b"}}}"#);
        assert!(
            e.contains("/cfg/config.json")
                && e.contains(r#"mcpServers."s".args"#)
                && e.contains("array of strings"),
            "{e}"
        );
        let e = invalid(r#"{"mcpServers": {"s": {"args": []}}}"#);
        assert!(
            e.contains(r#""s""#) && e.contains("\"command\"") && e.contains("\"url\""),
            "{e}"
        );
        let e = invalid(r#"{"mcpServers": {"a__b": {"command": "x"}}}"#);
        assert!(e.contains("__"), "{e}");
        let e = invalid(r#"{"mcpServers": {"meta": {"command": "x"}}}"#);
        assert!(e.contains("reserved"), "{e}");
        let e = invalid(r#"{"mcpServers": {"a b": {"command": "x"}, "a-b": {"command": "y"}}}"#);
        assert!(e.contains("same name"), "{e}");
        let e = invalid(r#"{"mcpServers": {"s": {"url": "http://x/sse", "type": "sse"}}}"#);
        assert!(e.contains("streamable HTTP"), "{e}");
        let e = invalid(r#"{"mcpServers": {"s": {"command": "x", "timeoutSecs": -1}}}"#);
        assert!(e.contains("timeoutSecs") && e.contains("above 0"), "{e}");
        let e = invalid(r#"{"metaServer": {"catalogdir": "x"}, "mcpServers": {}}"#);
        assert!(
            e.contains("metaServer.catalogdir") && e.contains("catalogDir"),
            "{e}"
        );
        let e = invalid(r#"{"servers_typo": {}}"#);
        assert!(e.contains("mcpServers"), "{e}");
        let e = invalid("{\"mcpServers\": {\n  \"s\": {\"command\": \"x\",}\n}}");
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn missing_file_says_how_to_choose_one() {
        let e = Settings::load(Path::new("/nonexistent/meta.json"), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--config") && e.contains("META_SERVER_CONFIG"),
            "{e}"
        );
    }
}
