//! Parsing of the config file: `mcpServers` (Claude Desktop, Cursor, Claude Code) or `servers`
//! (VS Code), per-server meta-server keys, and the global `metaServer` object.
//!
//! The file is read as JSONC (JSON with the comments and trailing commas VS Code's `mcp.json`
//! accepts, [`jsonc`]), then `metaServer` and each server entry are deserialized on their
//! own into the serde types below (through `serde_path_to_error`, so an error names the key), and
//! one bad entry is skipped without sinking the others. Leaf values are read by small types
//! ([`Str`], [`Positive`], ...) whose errors say what the value must be and what kind of value
//! was found rather than quoting it: it may be a secret.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::policy::{AuditBlock, PolicyBlock};
use super::telemetry::TelemetryBlock;
use super::tokens::HttpBlock;
use super::values::{Flag, HttpUrl, MessageMb, Port, Positive, Str, StrMap, Strs, wrong};
use super::{
    ConfigError, DEFAULT_CALL_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_INDEX_CONCURRENCY,
    DEFAULT_MAX_LIST_BYTES, DEFAULT_MAX_LIST_PAGES, DEFAULT_MAX_MESSAGE, DEFAULT_RESULT_MEMORY,
    DEFAULT_RESULT_TTL, DEFAULT_STORE_MAX_RESULT, DEFAULT_STORE_TTL, ListBounds, OAuthConfig,
    ResultSettings, ServerConfig, Settings, SkippedServer, StoreSettings, Tokenizer, ToolFilter,
    TransportConfig, TrustMode, default_catalog_dir, default_embed_dir, default_skills_dirs,
    server_identifier,
};

/// `metaServer`: options for meta-server itself. Unknown keys are errors (they are typos).
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
struct Global {
    catalog_dir: Option<Str>,
    idle_timeout_secs: Option<Positive>,
    timeout_secs: Option<Positive>,
    max_result_tokens: Option<Positive>,
    max_message_mb: Option<MessageMb>,
    max_list_pages: Option<Positive>,
    max_list_mb: Option<MessageMb>,
    index_concurrency: Option<Positive>,
    skills_dirs: Option<Strs>,
    /// [`Embeddings`], read by [`read`] like every object.
    embeddings: Option<Value>,
    /// [`Search`], read by [`read`].
    search: Option<Value>,
    hard_result_tokens: Option<Positive>,
    result_ttl_secs: Option<Positive>,
    result_memory_mb: Option<Positive>,
    tokenizer: Option<Str>,
    /// [`Store`], read by [`read`].
    store: Option<Value>,
    trust: Option<Str>,
    learning: Option<Flag>,
    /// [`PolicyBlock`], read by [`read`].
    policy: Option<Value>,
    /// [`AuditBlock`], read by [`read`].
    audit: Option<Value>,
    /// [`HttpBlock`], read by [`read`].
    http: Option<Value>,
    /// [`TelemetryBlock`], read by [`read`].
    telemetry: Option<Value>,
}

/// `metaServer.embeddings`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Embeddings {
    dir: Option<Str>,
}

/// `metaServer.store`: the shared store of `serve` replicas.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Store {
    url: Option<Str>,
    ttl_secs: Option<Positive>,
    max_result_mb: Option<Positive>,
}

impl Store {
    /// `url` is required and must be `redis://` or `rediss://`; kept unexpanded (`${VAR}`).
    fn settings(self) -> Result<StoreSettings, Invalid> {
        const AT: &str = "metaServer.store.url";
        let url = self.url.ok_or_else(|| {
            Invalid::new(
                AT,
                "is missing; give the store's URL, like redis://127.0.0.1:6379 (a password as ${VAR})",
            )
        })?;
        if !(url.0.starts_with("redis://") || url.0.starts_with("rediss://")) {
            return Err(Invalid::new(
                AT,
                "must start with redis:// or rediss:// (TLS); Valkey and Redis both speak it",
            ));
        }
        Ok(StoreSettings {
            url: url.0,
            ttl: self
                .ttl_secs
                .map_or(DEFAULT_STORE_TTL, |n| Duration::from_secs(n.0)),
            max_result_bytes: self
                .max_result_mb
                .map_or(DEFAULT_STORE_MAX_RESULT, |mb| mb.0 << 20),
        })
    }
}

/// `metaServer.search`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Search {
    embeddings: Option<Flag>,
}

/// One server entry. Unknown keys are ignored: other clients have their own (`autoApprove`, ...).
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Entry {
    command: Option<Str>,
    args: Strs,
    env: StrMap,
    cwd: Option<Str>,
    url: Option<Str>,
    #[serde(rename = "type")]
    transport: Option<Str>,
    headers: StrMap,
    description: Option<Str>,
    always_load: Flag,
    /// Absent or null: true.
    prefix: Option<Flag>,
    /// Read for its type only: entries with `"disabled": true` are left out before this.
    #[serde(rename = "disabled")]
    _disabled: Flag,
    idle_timeout_secs: Option<Positive>,
    timeout_secs: Option<Positive>,
    max_result_tokens: Option<Positive>,
    max_message_mb: Option<MessageMb>,
    max_list_pages: Option<Positive>,
    max_list_mb: Option<MessageMb>,
    allow_tools: Strs,
    deny_tools: Strs,
    /// [`OAuth`], read by [`read`] like every object.
    oauth: Option<Value>,
    /// Cursor's [`CursorAuth`], taken when it is an object and there is no `oauth`.
    auth: Option<Value>,
    /// [`PolicyBlock`], read by [`read`].
    policy: Option<Value>,
    /// The directories the server may be given as roots (`roots.rs`).
    roots: Option<Strs>,
}

/// A remote server's `oauth` block (meta-server's and Claude Code's keys).
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
struct OAuth {
    client_id: Option<Str>,
    client_secret: Option<Str>,
    scopes: Strs,
    callback_port: Option<Port>,
    auth_server_metadata_url: Option<HttpUrl>,
    client_metadata_url: Option<HttpUrl>,
}

/// Cursor's `auth` block.
#[derive(Deserialize, Default)]
#[serde(default)]
struct CursorAuth {
    #[serde(rename = "CLIENT_ID")]
    client_id: Option<Str>,
    #[serde(rename = "CLIENT_SECRET")]
    client_secret: Option<Str>,
    scopes: Strs,
}

impl From<OAuth> for OAuthConfig {
    fn from(o: OAuth) -> Self {
        Self {
            client_id: o.client_id.map(|s| s.0),
            client_secret: o.client_secret.map(|s| s.0),
            scopes: o.scopes.0,
            callback_port: o.callback_port.map(|p| p.0),
            auth_server_metadata_url: o.auth_server_metadata_url.map(|u| u.0),
            client_metadata_url: o.client_metadata_url.map(|u| u.0),
        }
    }
}

impl From<CursorAuth> for OAuthConfig {
    fn from(a: CursorAuth) -> Self {
        Self {
            client_id: a.client_id.map(|s| s.0),
            client_secret: a.client_secret.map(|s| s.0),
            scopes: a.scopes.0,
            ..Self::default()
        }
    }
}

/// What is wrong and where (`mcpServers."gh".args`): a whole-file [`ConfigError::Invalid`], or
/// the reason an entry is skipped.
struct Invalid {
    location: String,
    message: String,
}

impl Invalid {
    fn new(location: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            location: location.into(),
            message: message.into(),
        }
    }

    fn in_file(self, path: &Path) -> ConfigError {
        ConfigError::Invalid {
            path: path.to_owned(),
            location: self.location,
            message: self.message,
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// Deserializes the object `value`, found at `at`, into `T`; an error names `at` and the key.
fn read<T: DeserializeOwned>(at: &str, value: Value) -> Result<T, Invalid> {
    if !value.is_object() {
        return Err(Invalid::new(at, wrong("an object", &value).to_string()));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let location = match e.path().to_string() {
            key if key == "." => at.to_owned(),
            key => format!("{at}.{key}"),
        };
        Invalid::new(location, e.into_inner().to_string())
    })
}

/// What config files may hold beyond JSON: the comments and trailing commas VS Code accepts in
/// `mcp.json`, nothing looser. The clients' files are read the same way.
pub fn jsonc() -> jsonc_parser::ParseOptions {
    jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    }
}

/// Global defaults from `metaServer`, applied to servers that do not set their own.
struct Defaults {
    idle_timeout: Duration,
    call_timeout: Duration,
    max_result_tokens: Option<u64>,
    max_message_bytes: usize,
    lists: ListBounds,
}

pub(super) fn parse(path: &Path, text: &str) -> Result<Settings, ConfigError> {
    let invalid = |at: &str, message: String| Invalid::new(at, message).in_file(path);
    // Editors on Windows start files with a byte order mark.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // Plain JSON, what most configs are, is read by serde_json (at 15,664 servers the JSONC
    // reader was 6% of a start's CPU); JSONC, and any error's message, by the JSONC reader.
    let root: Value = match serde_json::from_str(text) {
        Ok(root) => root,
        Err(_) => {
            jsonc_parser::parse_to_serde_value(text, &jsonc()).map_err(|e| ConfigError::Syntax {
                path: path.to_owned(),
                line: e.line_display(),
                column: e.column_display(),
                message: e.kind().to_string(),
            })?
        }
    };
    let Value::Object(mut root) = root else {
        return Err(invalid(
            "top level",
            "must be an object with an \"mcpServers\" key".into(),
        ));
    };
    let global: Global = match root.remove("metaServer") {
        None | Some(Value::Null) => Global::default(),
        Some(value) => read("metaServer", value).map_err(|e| e.in_file(path))?,
    };
    let tokenizer = match global.tokenizer.as_ref().map(|t| t.0.as_str()) {
        None | Some("o200k") => Tokenizer::O200k,
        Some("estimate") => Tokenizer::Estimate,
        Some(other) => {
            return Err(invalid(
                "metaServer.tokenizer",
                format!(
                    "\"{other}\" is not a tokenizer; use \"o200k\" (exact) or \"estimate\" (bytes / 4, faster)"
                ),
            ));
        }
    };
    let trust = match global.trust.as_ref().map(|t| t.0.as_str()) {
        None | Some("first-use") => TrustMode::FirstUse,
        Some("review") => TrustMode::Review,
        Some("off") => TrustMode::Off,
        Some(other) => {
            return Err(invalid(
                "metaServer.trust",
                format!(
                    "\"{other}\" is not a trust mode; use \"first-use\" (approve a server's tools when first listed), \"review\" (approve every server yourself) or \"off\""
                ),
            ));
        }
    };
    let embeddings: Option<Embeddings> = global
        .embeddings
        .map(|e| read("metaServer.embeddings", e))
        .transpose()
        .map_err(|e| e.in_file(path))?;
    let search: Option<Search> = global
        .search
        .map(|s| read("metaServer.search", s))
        .transpose()
        .map_err(|e| e.in_file(path))?;
    let store = global
        .store
        .map(|s| read::<Store>("metaServer.store", s).and_then(Store::settings))
        .transpose()
        .map_err(|e| e.in_file(path))?;
    let policy = global
        .policy
        .map(|p| read::<PolicyBlock>("metaServer.policy", p))
        .transpose()
        .map_err(|e| e.in_file(path))?
        .map(Into::into)
        .unwrap_or_default();
    let base = path.parent().unwrap_or(Path::new("."));
    let audit = global
        .audit
        .map(|a| {
            read::<AuditBlock>("metaServer.audit", a)?
                .settings(base)
                .map_err(|message| Invalid::new("metaServer.audit", message))
        })
        .transpose()
        .map_err(|e| e.in_file(path))?;
    let http: Option<HttpBlock> = global
        .http
        .map(|h| read("metaServer.http", h))
        .transpose()
        .map_err(|e| e.in_file(path))?;
    let telemetry = global
        .telemetry
        .map(|t| {
            read::<TelemetryBlock>("metaServer.telemetry", t)?
                .settings()
                .map_err(|(key, message)| {
                    Invalid::new(format!("metaServer.telemetry.{key}"), message)
                })
        })
        .transpose()
        .map_err(|e| e.in_file(path))?;
    let (section, servers) = match (root.remove("mcpServers"), root.remove("servers")) {
        (Some(servers), _) => ("mcpServers", servers),
        (None, Some(servers)) => ("servers", servers),
        (None, None) => {
            return Err(invalid(
                "top level",
                "has no \"mcpServers\" (or VS Code \"servers\") object; add one mapping server names to {\"command\": ...} or {\"url\": ...}".into(),
            ));
        }
    };
    let Value::Object(servers) = servers else {
        return Err(invalid(
            section,
            wrong("an object mapping server names to entries", &servers).to_string(),
        ));
    };

    let secs = |n: Option<Positive>, default| n.map_or(default, |n| Duration::from_secs(n.0));
    let defaults = Defaults {
        idle_timeout: secs(global.idle_timeout_secs, DEFAULT_IDLE_TIMEOUT),
        call_timeout: secs(global.timeout_secs, DEFAULT_CALL_TIMEOUT),
        max_result_tokens: global.max_result_tokens.map(|n| n.0),
        max_message_bytes: global
            .max_message_mb
            .map_or(DEFAULT_MAX_MESSAGE, |mb| mb.0 << 20),
        lists: ListBounds {
            max_pages: global
                .max_list_pages
                .map_or(DEFAULT_MAX_LIST_PAGES, |n| n.0),
            max_bytes: global
                .max_list_mb
                .map_or(DEFAULT_MAX_LIST_BYTES, |mb| mb.0 << 20),
        },
    };
    // One entry meta-server cannot serve is reported and skipped; it never sinks the rest.
    let mut out: Vec<ServerConfig> = Vec::new();
    let mut skipped: Vec<SkippedServer> = Vec::new();
    let mut disabled: Vec<String> = Vec::new();
    // The names of the servers read so far, with their keys.
    let mut taken: HashMap<String, String> = HashMap::new();
    for (key, entry) in servers {
        if entry.get("disabled") == Some(&Value::Bool(true)) {
            disabled.push(key);
            continue;
        }
        match server(section, &key, entry, &taken, &defaults) {
            Ok(server) => {
                taken.insert(server.name.clone(), server.key.clone());
                out.push(server);
            }
            Err(e) => skipped.push(SkippedServer {
                key,
                reason: e.to_string(),
            }),
        }
    }
    let file_order = out.iter().map(|s| s.name.clone()).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    let http_tokens = http
        .map(|h| h.tokens(&out))
        .transpose()
        .map_err(|(key, message)| invalid(&format!("metaServer.http.{key}"), message))?
        .unwrap_or_default();

    Ok(Settings {
        source: path.to_owned(),
        text_sum: crate::checksum::of(text.as_bytes()),
        catalog_dir: global
            .catalog_dir
            .map_or_else(default_catalog_dir, |dir| base.join(dir.0)),
        catalog_dir_flag: None,
        index_concurrency: global
            .index_concurrency
            .map_or(DEFAULT_INDEX_CONCURRENCY, |n| n.0 as usize),
        skills_dirs: match global.skills_dirs {
            None => default_skills_dirs(),
            Some(list) => list
                .0
                .iter()
                .map(|d| match d.strip_prefix("~/") {
                    Some(rest) => dirs::home_dir().unwrap_or_default().join(rest),
                    None => base.join(d),
                })
                .collect(),
        },
        embed_dir: embeddings
            .and_then(|e| e.dir)
            .map_or_else(default_embed_dir, |dir| base.join(dir.0)),
        embeddings: search.and_then(|s| s.embeddings).is_none_or(|on| on.0),
        learning: global.learning.is_none_or(|on| on.0),
        results: ResultSettings {
            max_result_tokens: defaults.max_result_tokens,
            hard_result_tokens: global.hard_result_tokens.map(|n| n.0),
            ttl: secs(global.result_ttl_secs, DEFAULT_RESULT_TTL),
            memory_bytes: global
                .result_memory_mb
                .map_or(DEFAULT_RESULT_MEMORY, |mb| mb.0 << 20),
            tokenizer,
        },
        store,
        trust,
        policy,
        audit,
        http_tokens,
        telemetry,
        servers: out,
        file_order,
        skipped,
        disabled,
    })
}

/// Reads the entry `key` of `section`; `taken` are the names of the servers read before it,
/// with their keys.
fn server(
    section: &str,
    key: &str,
    entry: Value,
    taken: &HashMap<String, String>,
    defaults: &Defaults,
) -> Result<ServerConfig, Invalid> {
    let at = format!("{section}.\"{key}\"");
    let name = server_identifier(key).map_err(|e| Invalid::new(&at, e.to_string()))?;
    if let Some(twin) = taken.get(&name) {
        return Err(Invalid::new(
            &at,
            format!("maps to the same name \"{name}\" as server \"{twin}\"; rename one of them"),
        ));
    }
    let entry: Entry = read(&at, entry)?;
    let kind = entry.transport.map(|t| t.0);
    let transport = match (entry.command, entry.url) {
        (Some(_), Some(_)) => {
            return Err(Invalid::new(
                at,
                "has both \"command\" and \"url\"; keep \"command\" for a local server or \"url\" for a remote one",
            ));
        }
        (None, None) => {
            return Err(Invalid::new(
                at,
                "needs \"command\" (a local stdio server) or \"url\" (a remote server)",
            ));
        }
        (Some(Str(command)), None) => {
            if let Some(t) = kind.filter(|t| t != "stdio") {
                return Err(Invalid::new(
                    format!("{at}.type"),
                    format!(
                        "is \"{t}\" but the entry has a \"command\"; use \"stdio\" or remove \"type\""
                    ),
                ));
            }
            if command.trim().is_empty() {
                return Err(Invalid::new(
                    format!("{at}.command"),
                    "is empty; name the program that starts the server",
                ));
            }
            TransportConfig::Stdio {
                command,
                args: entry.args.0,
                env: entry.env.0,
                cwd: entry.cwd.map(|c| c.0),
            }
        }
        (None, Some(Str(url))) => {
            let sse = match kind.as_deref() {
                None | Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
                    false
                }
                Some("sse") => true,
                Some(t) => {
                    return Err(Invalid::new(
                        format!("{at}.type"),
                        format!(
                            "\"{t}\" is not a known transport; use \"http\" (streamable HTTP) or \"sse\" (legacy HTTP+SSE) for a url, \"stdio\" for a command"
                        ),
                    ));
                }
            };
            if !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("${"))
            {
                return Err(Invalid::new(
                    format!("{at}.url"),
                    format!("\"{url}\" must start with http:// or https://"),
                ));
            }
            let headers = entry.headers.0;
            if sse {
                TransportConfig::Sse { url, headers }
            } else {
                TransportConfig::Http { url, headers }
            }
        }
    };
    let oauth = match (entry.oauth, entry.auth) {
        (Some(oauth), _) => Some(read::<OAuth>(&format!("{at}.oauth"), oauth)?.into()),
        (None, Some(auth @ Value::Object(_))) => {
            Some(read::<CursorAuth>(&format!("{at}.auth"), auth)?.into())
        }
        (None, _) => None,
    };
    if oauth.is_some() && matches!(transport, TransportConfig::Stdio { .. }) {
        return Err(Invalid::new(
            format!("{at}.oauth"),
            "applies to remote servers only (\"url\"); a stdio server gets its credentials from \"env\"",
        ));
    }
    let policy = entry
        .policy
        .map(|p| read::<PolicyBlock>(&format!("{at}.policy"), p))
        .transpose()?
        .map(Into::into)
        .unwrap_or_default();
    let tools = ToolFilter::new(entry.allow_tools.0, entry.deny_tools.0)
        .map_err(|e| Invalid::new(format!("{at}.{}[{}]", e.key, e.index), e.message))?;
    let roots = entry
        .roots
        .map(|list| super::roots::directories(list.0))
        .transpose()
        .map_err(|(i, message)| Invalid::new(format!("{at}.roots[{i}]"), message))?;
    Ok(ServerConfig {
        name,
        key: key.to_owned(),
        description: entry.description.map(|d| d.0),
        transport,
        always_load: entry.always_load.0,
        prefix: entry.prefix.is_none_or(|p| p.0),
        idle_timeout: entry
            .idle_timeout_secs
            .map_or(defaults.idle_timeout, |n| Duration::from_secs(n.0)),
        call_timeout: entry
            .timeout_secs
            .map_or(defaults.call_timeout, |n| Duration::from_secs(n.0)),
        tools,
        max_result_tokens: entry
            .max_result_tokens
            .map(|n| n.0)
            .or(defaults.max_result_tokens),
        max_message_bytes: entry
            .max_message_mb
            .map_or(defaults.max_message_bytes, |mb| mb.0 << 20),
        lists: ListBounds {
            max_pages: entry
                .max_list_pages
                .map_or(defaults.lists.max_pages, |n| n.0),
            max_bytes: entry
                .max_list_mb
                .map_or(defaults.lists.max_bytes, |mb| mb.0 << 20),
        },
        oauth,
        policy,
        roots,
    })
}

// Leaf values. Each is read from a `serde_json::Value` (`try_from`), so its error can say what
// kind of value was found; null counts as absent.

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

    /// Plain JSON is read by serde_json, JSONC by the JSONC reader: on plain JSON they agree.
    #[test]
    fn both_readers_read_plain_json_alike() {
        let text = r#"{"mcpServers": {"a": {"command": "x", "args": ["\u00e9", "\ud83d\ude00"]},
            "a": {"command": "last", "timeoutSecs": 12, "env": {"N": "1"}}},
            "metaServer": {"maxResultTokens": 18446744073709551615, "x": -3, "y": 1.5e3, "z": 0.1}}"#;
        let by_serde: Value = serde_json::from_str(text).unwrap();
        let by_jsonc: Value = jsonc_parser::parse_to_serde_value(text, &jsonc()).unwrap();
        assert_eq!(by_serde, by_jsonc);
        let settings = parse_str(text).unwrap_err().to_string();
        assert!(settings.contains("metaServer"), "{settings}");
    }

    #[test]
    fn servers_are_sorted_by_name_and_their_file_order_is_kept() {
        let s = parse_str(
            r#"{"mcpServers": {"zeta": {"command": "z"}, "off": {"command": "o", "disabled": true},
                "alpha": {"command": "a"}, "mid": {"url": "https://x"}}}"#,
        )
        .unwrap();
        let names: Vec<_> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["alpha", "mid", "zeta"]);
        let in_file: Vec<_> = (s.servers_in_file_order().iter())
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(in_file, ["zeta", "alpha", "mid"]);
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
    fn prefix_is_on_unless_turned_off() {
        let s = parse_str(
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "prefix": false},
                "c": {"command": "x", "prefix": null}, "d": {"command": "x", "prefix": true}}}"#,
        )
        .unwrap();
        let prefixed: Vec<bool> = s.servers.iter().map(|s| s.prefix).collect();
        assert_eq!(prefixed, [true, false, true, true]);
        let s = parse_str(r#"{"mcpServers": {"a": {"command": "x", "prefix": "no"}}}"#).unwrap();
        assert!(s.servers.is_empty());
        assert!(
            s.skipped[0].reason.contains("prefix") && s.skipped[0].reason.contains("true or false"),
            "{}",
            s.skipped[0].reason
        );
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
    fn trust_mode_defaults_to_first_use_and_names_the_choices() {
        let mode = |v: &str| {
            parse_str(&format!(
                r#"{{"metaServer": {{"trust": {v}}}, "mcpServers": {{}}}}"#
            ))
            .map(|s| s.trust)
        };
        assert_eq!(
            parse_str(r#"{"mcpServers": {}}"#).unwrap().trust,
            TrustMode::FirstUse
        );
        assert_eq!(mode(r#""first-use""#).unwrap(), TrustMode::FirstUse);
        assert_eq!(mode(r#""review""#).unwrap(), TrustMode::Review);
        assert_eq!(mode(r#""off""#).unwrap(), TrustMode::Off);
        let e = invalid(r#"{"metaServer": {"trust": "always"}, "mcpServers": {}}"#);
        assert!(
            e.contains("metaServer.trust") && e.contains("\"review\""),
            "{e}"
        );
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
        let e = invalid("{\"mcpServers\": {\n  \"s\": {\"command\": \"x\" \"args\": []}\n}}");
        assert!(e.contains("line 2"), "{e}");
        let e = invalid("{\"mcpServers\": {'s': {\"command\": \"x\"}}}");
        assert!(e.contains("line 1"), "only what VS Code accepts: {e}");
    }

    #[test]
    fn comments_and_trailing_commas_are_read_as_vs_code_reads_them() {
        let s = parse_str(
            "// mine\n{\n  \"metaServer\": {\"trust\": \"off\",}, /* x */\n  \"mcpServers\": {\n    \"s\": {\"command\": \"x\", \"args\": [\"a\",],}, // s\n  },\n}\n",
        )
        .unwrap();
        assert_eq!(s.trust, TrustMode::Off);
        let TransportConfig::Stdio { args, .. } = &s.servers[0].transport else {
            panic!()
        };
        assert_eq!(args, &["a"]);
    }

    #[test]
    fn wrong_values_say_what_they_must_be_without_quoting_them() {
        let e = skipped(r#"{"mcpServers": {"s": {"command": "x", "args": "--token s3cret"}}}"#);
        assert_eq!(
            e,
            r#"mcpServers."s".args: must be an array of strings, found a string"#
        );
        let e = skipped(r#"{"mcpServers": {"s": {"command": "x", "args": ["a", 7]}}}"#);
        assert_eq!(
            e,
            r#"mcpServers."s".args: must be an array of strings, but item 2 is a number"#
        );
        let e = skipped(r#"{"mcpServers": {"s": {"command": "x", "env": {"K": ["s3cret"]}}}}"#);
        assert_eq!(
            e,
            r#"mcpServers."s".env: must be an object of strings, but "K" is an array"#
        );
        let e = skipped(r#"{"mcpServers": {"s": {"url": "http://x", "headers": "s3cret"}}}"#);
        assert_eq!(
            e,
            r#"mcpServers."s".headers: must be an object of strings, found a string"#
        );
        let e = skipped(r#"{"mcpServers": {"s": {"command": "x", "timeoutSecs": 1.5}}}"#);
        assert_eq!(
            e,
            r#"mcpServers."s".timeoutSecs: must be a whole number above 0, found 1.5"#
        );
        let e = skipped(r#"{"mcpServers": {"s": {"url": "http://x", "oauth": "s3cret"}}}"#);
        assert_eq!(
            e,
            r#"mcpServers."s".oauth: must be an object, found a string"#
        );
        let e = skipped(
            r#"{"mcpServers": {"s": {"url": "http://x", "oauth": {"authServerMetadataUrl": "ftp://x"}}}}"#,
        );
        assert_eq!(
            e,
            r#"mcpServers."s".oauth.authServerMetadataUrl: "ftp://x" must be an http(s) URL"#
        );
        let e = skipped(r#"{"mcpServers": {"s": {"url": "http://x", "auth": {"CLIENT_ID": 1}}}}"#);
        assert_eq!(
            e,
            r#"mcpServers."s".auth.CLIENT_ID: must be a string, found a number"#
        );
        let e = skipped(r#"{"mcpServers": {"s": {"command": "x", "allowTools": ["[a"]}}}"#);
        assert!(
            e.starts_with(r#"mcpServers."s".allowTools[0]: "[a" is not a valid glob"#),
            "{e}"
        );
    }

    #[test]
    fn values_other_clients_write_are_taken() {
        let s = parse_str(
            "\u{feff}{\"servers\": {
                \"a\": {\"type\": \"streamable-http\", \"url\": \"http://x\"},
                \"b\": {\"type\": \"streamableHttp\", \"url\": \"http://x\"},
                \"c\": {\"type\": \"streamable_http\", \"url\": \"${BASE}/mcp\"},
                \"d\": {\"type\": \"stdio\", \"command\": \"x\", \"env\": {\"N\": 3, \"B\": true},
                        \"args\": null, \"cwd\": null, \"autoApprove\": [\"t\"], \"alwaysAllow\": 1},
                \"e\": {\"url\": \"http://x\", \"auth\": \"not cursor's\"},
                \"f\": {\"command\": \"x\", \"disabled\": true, \"args\": 42}
            }}",
        )
        .unwrap();
        assert!(s.skipped.is_empty(), "{:?}", s.skipped);
        let names: Vec<_> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        for name in ["a", "b", "c"] {
            let transport = &s.server(name).unwrap().transport;
            assert!(matches!(transport, TransportConfig::Http { .. }), "{name}");
        }
        let TransportConfig::Stdio { env, args, cwd, .. } = &s.server("d").unwrap().transport
        else {
            panic!("d is stdio");
        };
        assert_eq!(env["N"], "3");
        assert_eq!(env["B"], "true");
        assert!(args.is_empty() && cwd.is_none());
        assert_eq!(s.server("e").unwrap().oauth, None);
    }

    #[test]
    fn meta_server_options_are_checked() {
        let s = parse_str(
            r#"{"metaServer": {"indexConcurrency": 2, "resultMemoryMb": 1, "tokenizer": "estimate",
                "skillsDirs": ["skills"], "embeddings": {"dir": "e"}, "maxResultTokens": 5,
                "search": {"embeddings": false}, "learning": false},
                "mcpServers": {"s": {"command": "x"}}}"#,
        )
        .unwrap();
        assert!(!s.learning);
        assert!(
            parse_str(r#"{"mcpServers": {}}"#).unwrap().learning,
            "on by default"
        );
        let e = invalid(r#"{"metaServer": {"learning": "off"}, "mcpServers": {}}"#);
        assert!(e.contains("metaServer.learning"), "{e}");
        assert_eq!(s.index_concurrency, 2);
        assert_eq!(s.results.memory_bytes, 1 << 20);
        assert_eq!(s.results.tokenizer, Tokenizer::Estimate);
        assert_eq!(s.skills_dirs, [Path::new("/cfg/skills")]);
        assert_eq!(s.embed_dir, Path::new("/cfg/e"));
        assert!(!s.embeddings);
        let e = invalid(r#"{"metaServer": {"search": {"embeddings": "no"}}, "mcpServers": {}}"#);
        assert!(
            e.contains("metaServer.search.embeddings") && e.contains("true or false"),
            "{e}"
        );
        assert_eq!(s.server("s").unwrap().max_result_tokens, Some(5));
        let e = invalid(r#"{"metaServer": [], "mcpServers": {}}"#);
        assert!(
            e.ends_with("metaServer: must be an object, found an array"),
            "{e}"
        );
        let e = invalid(r#"{"metaServer": {"embeddings": {"path": "x"}}, "mcpServers": {}}"#);
        assert!(
            e.contains("metaServer.embeddings.path") && e.contains("`dir`"),
            "{e}"
        );
        let e = invalid(r#"{"metaServer": {"tokenizer": "cl100k"}, "mcpServers": {}}"#);
        assert!(
            e.contains("metaServer.tokenizer") && e.contains("\"estimate\""),
            "{e}"
        );
        let e = invalid(r#"{"metaServer": {"indexConcurrency": 0}, "mcpServers": {}}"#);
        assert!(
            e.ends_with("metaServer.indexConcurrency: must be a whole number above 0, found 0"),
            "{e}"
        );
        let e = invalid("[]");
        assert!(e.contains("top level"), "{e}");
    }

    #[test]
    fn the_message_limit_is_global_with_a_per_server_override() {
        let s = parse_str(
            r#"{"metaServer": {"maxMessageMb": 8},
                "mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "maxMessageMb": 512}}}"#,
        )
        .unwrap();
        assert_eq!(s.server("a").unwrap().max_message_bytes, 8 << 20);
        assert_eq!(s.server("b").unwrap().max_message_bytes, 512 << 20);
        let s = parse_str(r#"{"mcpServers": {"a": {"command": "x"}}}"#).unwrap();
        assert_eq!(s.server("a").unwrap().max_message_bytes, 64 << 20);
        let e = invalid(r#"{"metaServer": {"maxMessageMb": 5000}, "mcpServers": {}}"#);
        assert!(
            e.ends_with(
                "metaServer.maxMessageMb: must be a whole number of MiB from 1 to 4096, found 5000"
            ),
            "{e}"
        );
    }

    #[test]
    fn listing_bounds_are_global_with_a_per_server_override() {
        let s = parse_str(
            r#"{"metaServer": {"maxListPages": 50, "maxListMb": 4},
                "mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "maxListPages": 9000, "maxListMb": 256}}}"#,
        )
        .unwrap();
        let bounds = |name| s.server(name).unwrap().lists;
        assert_eq!(
            (bounds("a").max_pages, bounds("a").max_bytes),
            (50, 4 << 20)
        );
        assert_eq!(
            (bounds("b").max_pages, bounds("b").max_bytes),
            (9000, 256 << 20)
        );
        let s = parse_str(r#"{"mcpServers": {"a": {"command": "x"}}}"#).unwrap();
        assert_eq!(s.server("a").unwrap().lists, ListBounds::default());
        let e = invalid(r#"{"metaServer": {"maxListPages": 0}, "mcpServers": {}}"#);
        assert!(
            e.ends_with("metaServer.maxListPages: must be a whole number above 0, found 0"),
            "{e}"
        );
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
