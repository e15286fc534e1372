//! Parsing of the config file: `mcpServers` (Claude Desktop, Cursor, Claude Code) or `servers`
//! (VS Code), per-server meta-server keys, and the global `metaServer` object.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{
    ConfigError, DEFAULT_CALL_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_INDEX_CONCURRENCY,
    DEFAULT_RESULT_MEMORY, DEFAULT_RESULT_TTL, DEFAULT_STORE_MAX_RESULT, DEFAULT_STORE_TTL,
    OAuthConfig, ResultSettings, ServerConfig, Settings, SkippedServer, StoreSettings, Tokenizer,
    ToolFilter, TransportConfig, default_catalog_dir, default_skills_dirs, server_identifier,
};

const GLOBAL_KEYS: &[&str] = &[
    "catalogDir",
    "idleTimeoutSecs",
    "timeoutSecs",
    "maxResultTokens",
    "indexConcurrency",
    "skillsDirs",
    "embeddings",
    "hardResultTokens",
    "resultTtlSecs",
    "resultMemoryMb",
    "tokenizer",
    "store",
];

const STORE_KEYS: &[&str] = &["url", "ttlSecs", "maxResultMb"];

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
    // Editors on Windows start files with a byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
        None | Some(Value::Null) => None,
        Some(Value::Object(e)) => {
            if let Some(unknown) = e.keys().find(|k| k.as_str() != "dir") {
                return Err(cx.err(
                    format!("metaServer.embeddings.{unknown}"),
                    "unknown key; the only key is \"dir\"",
                ));
            }
            cx.string(e, "metaServer.embeddings", "dir")?
                .map(|d| base.join(d))
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
    let store = match global.get("store") {
        None | Some(Value::Null) => None,
        Some(Value::Object(block)) => Some(parse_store(&cx, block)?),
        Some(other) => {
            return Err(cx.err(
                "metaServer.store",
                format!(
                    "must be an object like {{\"url\": \"redis://127.0.0.1:6379\"}}, found {}",
                    kind(other)
                ),
            ));
        }
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

    // One entry meta-server cannot serve is reported and skipped; it never sinks the rest.
    let mut out: Vec<ServerConfig> = Vec::new();
    let mut skipped: Vec<SkippedServer> = Vec::new();
    for (key, entry) in servers {
        let at = format!("{section}.\"{key}\"");
        let parsed = match entry {
            Value::Object(entry) if entry.get("disabled") == Some(&Value::Bool(true)) => continue,
            Value::Object(entry) => {
                server_identifier(key)
                    .map_err(|m| cx.err(&at, m))
                    .and_then(|name| {
                        match out.iter().find(|s| s.name == name) {
                    Some(twin) => Err(cx.err(
                        &at,
                        format!(
                            "maps to the same name \"{name}\" as server \"{}\"; rename one of them",
                            twin.key
                        ),
                    )),
                    None => parse_server(&cx, &at, key, name, entry, &defaults),
                }
                    })
            }
            other => Err(cx.err(&at, format!("must be an object, found {}", kind(other)))),
        };
        match parsed {
            Ok(server) => out.push(server),
            Err(e) => skipped.push(SkippedServer {
                key: key.clone(),
                reason: match e {
                    ConfigError::Invalid {
                        location, message, ..
                    } => format!("{location}: {message}"),
                    other => other.to_string(),
                },
            }),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Settings {
        source: path.to_owned(),
        catalog_dir,
        index_concurrency,
        skills_dirs,
        embed_dir,
        results,
        store,
        servers: out,
        skipped,
    })
}

/// `metaServer.store`: `url` (required, `redis://` or `rediss://`), `ttlSecs`, `maxResultMb`.
fn parse_store(cx: &Cx<'_>, block: &Map<String, Value>) -> Result<StoreSettings, ConfigError> {
    const AT: &str = "metaServer.store";
    if let Some(unknown) = block.keys().find(|k| !STORE_KEYS.contains(&k.as_str())) {
        return Err(cx.err(
            format!("{AT}.{unknown}"),
            format!("unknown key; known keys are {}", STORE_KEYS.join(", ")),
        ));
    }
    let url = cx.string(block, AT, "url")?.ok_or_else(|| {
        cx.err(
            format!("{AT}.url"),
            "is missing; give the store's URL, like redis://127.0.0.1:6379 (a password as ${VAR})",
        )
    })?;
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return Err(cx.err(
            format!("{AT}.url"),
            "must start with redis:// or rediss:// (TLS); Valkey and Redis both speak it",
        ));
    }
    Ok(StoreSettings {
        url,
        ttl: cx
            .positive(block, AT, "ttlSecs")?
            .map_or(DEFAULT_STORE_TTL, Duration::from_secs),
        max_result_bytes: cx
            .positive(block, AT, "maxResultMb")?
            .map_or(DEFAULT_STORE_MAX_RESULT, |mb| mb << 20),
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
                "needs \"command\" (a local stdio server) or \"url\" (a remote server)",
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
            let sse = match kind.as_deref() {
                None | Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
                    false
                }
                Some("sse") => true,
                Some(t) => {
                    return Err(cx.err(format!("{at}.type"), format!("\"{t}\" is not a known transport; use \"http\" (streamable HTTP) or \"sse\" (legacy HTTP+SSE) for a url, \"stdio\" for a command")));
                }
            };
            if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("${"))
            {
                return Err(cx.err(
                    format!("{at}.url"),
                    format!("\"{url}\" must start with http:// or https://"),
                ));
            }
            let headers = cx.string_map(entry, at, "headers")?;
            if sse {
                TransportConfig::Sse { url, headers }
            } else {
                TransportConfig::Http { url, headers }
            }
        }
    };
    let oauth = parse_oauth(cx, at, entry)?;
    if oauth.is_some() && matches!(transport, TransportConfig::Stdio { .. }) {
        return Err(cx.err(
            format!("{at}.oauth"),
            "applies to remote servers only (\"url\"); a stdio server gets its credentials from \"env\"",
        ));
    }
    cx.bool(entry, at, "disabled")?;
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
        tools: ToolFilter::new(
            cx.strings(entry, at, "allowTools")?,
            cx.strings(entry, at, "denyTools")?,
        )
        .map_err(|e| cx.err(format!("{at}.{}[{}]", e.key, e.index), e.message))?,
        max_result_tokens: cx
            .positive(entry, at, "maxResultTokens")?
            .or(defaults.max_result_tokens),
        oauth,
    })
}

const OAUTH_KEYS: &[&str] = &[
    "clientId",
    "clientSecret",
    "scopes",
    "callbackPort",
    "authServerMetadataUrl",
    "clientMetadataUrl",
];

/// The `oauth` block (meta-server's and Claude Code's keys), or Cursor's `auth` block
/// (`CLIENT_ID`, `CLIENT_SECRET`, `scopes`).
fn parse_oauth(
    cx: &Cx<'_>,
    at: &str,
    entry: &Map<String, Value>,
) -> Result<Option<OAuthConfig>, ConfigError> {
    if let Some(Value::Object(auth)) = entry.get("auth").filter(|_| !entry.contains_key("oauth")) {
        let at = format!("{at}.auth");
        return Ok(Some(OAuthConfig {
            client_id: cx.string(auth, &at, "CLIENT_ID")?,
            client_secret: cx.string(auth, &at, "CLIENT_SECRET")?,
            scopes: cx.strings(auth, &at, "scopes")?,
            ..OAuthConfig::default()
        }));
    }
    let block = match entry.get("oauth") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(block)) => block,
        Some(other) => {
            return Err(cx.err(
                format!("{at}.oauth"),
                format!("must be an object, found {}", kind(other)),
            ));
        }
    };
    let at = format!("{at}.oauth");
    if let Some(unknown) = block.keys().find(|k| !OAUTH_KEYS.contains(&k.as_str())) {
        return Err(cx.err(
            format!("{at}.{unknown}"),
            format!("unknown key; known keys are {}", OAUTH_KEYS.join(", ")),
        ));
    }
    let callback_port = match cx.positive(block, &at, "callbackPort")? {
        None => None,
        Some(port) => Some(u16::try_from(port).map_err(|_| {
            cx.err(
                format!("{at}.callbackPort"),
                format!("must be a port number (1 to 65535), found {port}"),
            )
        })?),
    };
    let url = |key: &str| -> Result<Option<String>, ConfigError> {
        let value = cx.string(block, &at, key)?;
        if let Some(v) = &value
            && !(v.starts_with("https://") || v.starts_with("http://"))
        {
            return Err(cx.err(
                format!("{at}.{key}"),
                format!("\"{v}\" must be an http(s) URL"),
            ));
        }
        Ok(value)
    };
    Ok(Some(OAuthConfig {
        client_id: cx.string(block, &at, "clientId")?,
        client_secret: cx.string(block, &at, "clientSecret")?,
        scopes: cx.strings(block, &at, "scopes")?,
        callback_port,
        auth_server_metadata_url: url("authServerMetadataUrl")?,
        client_metadata_url: url("clientMetadataUrl")?,
    }))
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

    /// The reason an entry was skipped; the config itself loads.
    fn skipped(text: &str) -> String {
        let settings = parse_str(text).unwrap();
        assert_eq!(settings.skipped.len(), 1, "{:?}", settings.skipped);
        settings.skipped[0].reason.clone()
    }

    #[test]
    fn bad_entries_are_skipped_with_a_reason_naming_server_and_key() {
        let e = skipped(r#"{"mcpServers": {"s": {"command": "x", "args": "a b"}}}"#);
        assert!(
            e.contains(r#"mcpServers."s".args"#) && e.contains("array of strings"),
            "{e}"
        );
        let e = skipped(r#"{"mcpServers": {"s": {"args": []}}}"#);
        assert!(
            e.contains(r#""s""#) && e.contains("\"command\"") && e.contains("\"url\""),
            "{e}"
        );
        let e = skipped(r#"{"mcpServers": {"a__b": {"command": "x"}}}"#);
        assert!(e.contains("__"), "{e}");
        let e = skipped(r#"{"mcpServers": {"meta": {"command": "x"}}}"#);
        assert!(e.contains("reserved"), "{e}");
        let e = skipped(r#"{"mcpServers": {"a b": {"command": "x"}, "a-b": {"command": "y"}}}"#);
        assert!(e.contains("same name"), "{e}");
        let e = skipped(r#"{"mcpServers": {"s": {"url": "ws://x", "type": "websocket"}}}"#);
        assert!(e.contains("\"websocket\" is not a known transport"), "{e}");
        let e = skipped(r#"{"mcpServers": {"s": {"command": "x", "timeoutSecs": -1}}}"#);
        assert!(e.contains("timeoutSecs") && e.contains("above 0"), "{e}");
        let e = skipped(r#"{"mcpServers": {"s": {"command": "x", "oauth": {"clientId": "c"}}}}"#);
        assert!(e.contains("remote servers only"), "{e}");
        let e =
            skipped(r#"{"mcpServers": {"s": {"url": "http://x", "oauth": {"clientid": "c"}}}}"#);
        assert!(
            e.contains("oauth.clientid") && e.contains("clientId"),
            "{e}"
        );
        let e = skipped(r#"{"mcpServers": {"s": 3}}"#);
        assert!(e.contains("must be an object"), "{e}");
        let e = skipped(r#"{"mcpServers": {"s": {"command": "x", "disabled": "yes"}}}"#);
        assert!(e.contains("disabled") && e.contains("true or false"), "{e}");
    }

    #[test]
    fn one_bad_entry_leaves_the_others_working() {
        let s = parse_str(
            r#"{"mcpServers": {"good": {"command": "x"}, "bad": {"type": "ws", "url": "ws://x"}, "off": {"command": "y", "disabled": true}}}"#,
        )
        .unwrap();
        let names: Vec<_> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["good"]);
        assert_eq!(s.skipped.len(), 1, "disabled entries are not skipped ones");
        assert_eq!(s.skipped[0].key, "bad");
    }

    #[test]
    fn legacy_sse_and_oauth_blocks_are_read() {
        let s = parse_str(
            r#"{"mcpServers": {
                "old": {"type": "sse", "url": "http://127.0.0.1:1/sse", "headers": {"X": "1"}},
                "notion": {"type": "http", "url": "https://mcp.notion.com/mcp", "oauth": {"clientId": "c", "clientSecret": "${SECRET}", "scopes": ["a", "b"], "callbackPort": 8765}},
                "cursor-style": {"url": "https://x/mcp", "auth": {"CLIENT_ID": "id", "CLIENT_SECRET": "s", "scopes": ["r"]}}
            }}"#,
        )
        .unwrap();
        assert!(s.skipped.is_empty(), "{:?}", s.skipped);
        let old = s.server("old").unwrap();
        assert!(
            matches!(&old.transport, TransportConfig::Sse { url, headers } if url.ends_with("/sse") && headers["X"] == "1")
        );
        let oauth = s.server("notion").unwrap().oauth.clone().unwrap();
        assert_eq!(oauth.client_id.as_deref(), Some("c"));
        assert_eq!(
            oauth.client_secret.as_deref(),
            Some("${SECRET}"),
            "expanded only when used"
        );
        assert_eq!(oauth.scopes, ["a", "b"]);
        assert_eq!(oauth.callback_port, Some(8765));
        let cursor = s.server("cursor-style").unwrap().oauth.clone().unwrap();
        assert_eq!(cursor.client_id.as_deref(), Some("id"));
        assert_eq!(cursor.scopes, ["r"]);
        let e = skipped(
            r#"{"mcpServers": {"s": {"url": "http://x", "oauth": {"callbackPort": 70000}}}}"#,
        );
        assert!(e.contains("port number"), "{e}");
    }

    #[test]
    fn whole_file_errors_still_stop_loading() {
        let e = invalid(r#"{"metaServer": {"catalogdir": "x"}, "mcpServers": {}}"#);
        assert!(
            e.contains("/cfg/config.json")
                && e.contains("metaServer.catalogdir")
                && e.contains("catalogDir"),
            "{e}"
        );
        let e = invalid(r#"{"servers_typo": {}}"#);
        assert!(e.contains("mcpServers"), "{e}");
        let e = invalid(r#"{"mcpServers": []}"#);
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

    #[test]
    fn the_shared_store_block() {
        let settings = parse_str(r#"{"mcpServers": {}}"#).unwrap();
        assert!(settings.store.is_none(), "no store unless configured");
        let settings = parse_str(
            r#"{"metaServer": {"store": {"url": "rediss://:${PW}@cache:6380/1", "ttlSecs": 60, "maxResultMb": 8}}, "mcpServers": {}}"#,
        )
        .unwrap();
        let store = settings.store.unwrap();
        assert_eq!(store.url, "rediss://:${PW}@cache:6380/1", "kept unexpanded");
        assert_eq!(store.ttl, Duration::from_secs(60));
        assert_eq!(store.max_result_bytes, 8 << 20);
        assert!(
            !format!("{store:?}").contains("PW"),
            "the URL is never printed"
        );
        let defaults =
            parse_str(r#"{"metaServer": {"store": {"url": "redis://h"}}, "mcpServers": {}}"#)
                .unwrap()
                .store
                .unwrap();
        assert_eq!(defaults.ttl, DEFAULT_STORE_TTL);
        assert_eq!(defaults.max_result_bytes, DEFAULT_STORE_MAX_RESULT);
        let e = invalid(r#"{"metaServer": {"store": {"url": "http://h"}}, "mcpServers": {}}"#);
        assert!(
            e.contains("metaServer.store.url") && e.contains("redis://"),
            "{e}"
        );
        let e = invalid(r#"{"metaServer": {"store": {}}, "mcpServers": {}}"#);
        assert!(
            e.contains("metaServer.store.url") && e.contains("missing"),
            "{e}"
        );
        let e = invalid(
            r#"{"metaServer": {"store": {"url": "redis://h", "ttl": 5}}, "mcpServers": {}}"#,
        );
        assert!(
            e.contains("metaServer.store.ttl") && e.contains("ttlSecs"),
            "{e}"
        );
        let e = invalid(r#"{"metaServer": {"store": "redis://h"}, "mcpServers": {}}"#);
        assert!(e.contains("must be an object"), "{e}");
    }
}
