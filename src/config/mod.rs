//! Configuration: the `mcpServers` JSON that clients already use, resolved once into [`Settings`].
//!
//! Everything is checked before any I/O happens elsewhere; every error names the file, the server
//! and the key, and says what to do.

mod diff;
mod expand;
mod parse;
mod policy;
mod roots;
mod telemetry;
mod tokens;
mod tools;
mod values;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::checksum::Checksum;

pub use diff::Change;
pub use expand::{Unset, expand};
pub use parse::jsonc;
pub use policy::{
    AuditSettings, DEFAULT_AUDIT_MAX_BYTES, Destructive, MIN_AUDIT_MAX_BYTES, Policy,
};
pub use roots::lexical as lexical_path;
pub use telemetry::TelemetrySettings;
pub use tokens::TokenConfig;
pub use tools::{GlobError, ToolFilter};

/// Idle time after which an unused upstream is stopped.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Time a single upstream call may take.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How many servers `index` connects at once.
pub const DEFAULT_INDEX_CONCURRENCY: usize = 4;
/// Pages of one upstream listing (`tools/list`, `prompts/list`, `resources/list`,
/// `resources/templates/list`) meta-server follows (`maxListPages`). Servers that paginate
/// send 10 to 100 items a page, so this is 10,000 to 100,000 items; most send one page.
pub const DEFAULT_MAX_LIST_PAGES: u64 = 1_000;
/// Bytes of one upstream listing, all pages together, as JSON (`maxListMb`). The largest tool
/// lists of real servers are a few MB (MCP-Bench's 28 servers: under 1 MB each), 16 MiB is
/// about 100k resources; parsed, a listing takes about ten times its JSON in memory.
pub const DEFAULT_MAX_LIST_BYTES: usize = 16 << 20;
/// How long a stored full result stays readable.
pub const DEFAULT_RESULT_TTL: Duration = Duration::from_secs(3600);
/// Bytes of stored results kept in memory before the oldest are dropped.
pub const DEFAULT_RESULT_MEMORY: u64 = 256 << 20;
/// The largest single message read from an upstream (`maxMessageMb`): a stdio line, an SSE
/// event, a streamable-HTTP body. 64 MiB carries a 30 MB file read through server-filesystem
/// (JSON escaping about doubles it) and results well over the default hard limit of 5 M tokens
/// (about 20 MB), so no result that result handling would keep is lost; and a message
/// refused at the limit costs meta-server at most that much memory, not the whole message.
pub const DEFAULT_MAX_MESSAGE: usize = 64 << 20;
/// How long a result stays readable in the shared store (`metaServer.store.ttlSecs`).
pub const DEFAULT_STORE_TTL: Duration = Duration::from_secs(3600);
/// The largest result kept in the shared store (`metaServer.store.maxResultMb`).
pub const DEFAULT_STORE_MAX_RESULT: u64 = 64 << 20;
/// The environment variable that sets (and overrides) `metaServer.store.url`.
pub const ENV_STORE_URL: &str = "META_SERVER_STORE_URL";
/// Server name reserved for meta-server's own built-in tools.
pub const RESERVED_SERVER: &str = "meta";
/// Server name under which skills are listed.
pub const SKILL_SERVER: &str = "skill";
/// Environment variable naming the directory of the embedding runtime and model (wins over
/// `metaServer.embeddings.dir`).
pub const EMBED_DIR_ENV: &str = "META_SERVER_EMBED_DIR";
/// Environment variable turning hybrid search `off` (BM25 only) or `on` (wins over
/// `metaServer.search.embeddings`).
pub const EMBEDDINGS_ENV: &str = "META_SERVER_EMBEDDINGS";
/// Turns search that learns from use on or off (`on`/`off`), over `metaServer.learning`.
pub const LEARNING_ENV: &str = "META_SERVER_LEARNING";

/// Errors in reading or checking the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "no config file at {path}; pass --config FILE or set META_SERVER_CONFIG (the mcpServers JSON of Claude Desktop, Cursor, Claude Code or VS Code works as is)"
    )]
    NotFound { path: PathBuf },
    #[error("config {path} is not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("config {path}: {location}: {message}")]
    Invalid {
        path: PathBuf,
        location: String,
        message: String,
    },
    #[error("{var}={value} is not understood; set it to on or off")]
    Switch { var: &'static str, value: String },
    #[error(
        "server \"{server}\": {key} uses ${{{var}}}, which is not set; export {var} or write ${{{var}:-default}}"
    )]
    MissingVar {
        server: String,
        key: String,
        var: String,
    },
}

/// Checked settings for one run: global options plus the registry of upstream servers.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The config file these settings came from.
    pub source: PathBuf,
    /// The checksum of the text they were read from: `serve` reads the file again only when
    /// it changed.
    pub text_sum: Checksum,
    /// Where catalogs are read and written.
    pub catalog_dir: PathBuf,
    /// The catalog dir the command line or the environment gave, over the file's.
    pub catalog_dir_flag: Option<PathBuf>,
    /// How many servers `index` connects at once.
    pub index_concurrency: usize,
    /// Directories searched for `<skill>/SKILL.md`.
    pub skills_dirs: Vec<PathBuf>,
    /// Where the embedding runtime and model are: `META_SERVER_EMBED_DIR`, else
    /// `metaServer.embeddings.dir`, else [`default_embed_dir`].
    pub embed_dir: PathBuf,
    /// Hybrid search (BM25 fused with tool vectors) when the build and the assets allow it:
    /// `META_SERVER_EMBEDDINGS`, else `metaServer.search.embeddings`, else on.
    pub embeddings: bool,
    /// Search learns from use (`META_SERVER_LEARNING`, else `metaServer.learning`, else on):
    /// queries followed by a call of a tool they found are kept beside the catalogs and
    /// searched (docs/learning.md).
    pub learning: bool,
    /// Result budgets and the result store.
    pub results: ResultSettings,
    /// The shared store of `serve` replicas (`metaServer.store`, `META_SERVER_STORE_URL`);
    /// `None`: results in memory and on local disk, sessions and catalogs of this process only.
    pub store: Option<StoreSettings>,
    /// How upstream tools are pinned (`metaServer.trust`).
    pub trust: TrustMode,
    /// `metaServer.policy`: the call policy of servers without their own keys.
    pub policy: Policy,
    /// `metaServer.audit`: where every tool call is recorded, if anywhere.
    pub audit: Option<AuditSettings>,
    /// `metaServer.http.tokens`: named tokens of `serve --http`, each limited to its servers.
    pub http_tokens: Vec<TokenConfig>,
    /// `metaServer.telemetry`: where `serve` exports traces (the `OTEL_*` variables win).
    pub telemetry: Option<TelemetrySettings>,
    /// Enabled servers, sorted by name.
    pub servers: Vec<ServerConfig>,
    /// The names of `servers` in the order the file lists them, which settles which server a
    /// resource URI two servers claim belongs to.
    pub file_order: Vec<String>,
    /// Entries that cannot be served as written, in file order; the rest still work.
    pub skipped: Vec<SkippedServer>,
    /// Keys of the entries with `"disabled": true`, in file order: configured, not served.
    pub disabled: Vec<String>,
}

/// A config entry left out because meta-server cannot serve it as written.
#[derive(Debug, Clone, PartialEq)]
pub struct SkippedServer {
    /// The config key as the user wrote it.
    pub key: String,
    /// What is wrong and what to do, naming the key (the file is [`Settings::source`]).
    pub reason: String,
}

/// Global result-handling options (`metaServer` keys).
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSettings {
    /// `maxResultTokens`: soft limit for every route without its own.
    pub max_result_tokens: Option<u64>,
    /// `hardResultTokens`: results above it are refused.
    pub hard_result_tokens: Option<u64>,
    /// `resultTtlSecs`: how long stored results stay readable.
    pub ttl: Duration,
    /// `resultMemoryMb`: bytes of stored results kept in memory.
    pub memory_bytes: u64,
    pub tokenizer: Tokenizer,
}

/// The shared store (`metaServer.store`).
#[derive(Clone, PartialEq)]
pub struct StoreSettings {
    /// `url`: `redis://` or `rediss://`, as written: `${VAR}` references are expanded when
    /// the store is opened, never stored expanded.
    pub url: String,
    /// `ttlSecs`: how long stored results stay readable.
    pub ttl: Duration,
    /// `maxResultMb`: the largest result kept.
    pub max_result_bytes: u64,
}

impl std::fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSettings")
            .field("ttl", &self.ttl)
            .field("max_result_bytes", &self.max_result_bytes)
            .finish_non_exhaustive()
    }
}

/// How upstream tools are pinned (`metaServer.trust`): which tools wait for the user's
/// approval before they can be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrustMode {
    /// A server's tools are approved when it is first listed; later changes and additions wait.
    #[default]
    FirstUse,
    /// Like `FirstUse`, and a new server's tools wait too.
    Review,
    /// No pinning.
    Off,
}

/// How result tokens are counted (`metaServer.tokenizer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokenizer {
    /// The real `o200k_base` tokenizer.
    O200k,
    /// Bytes / 4: cheaper, less exact.
    Estimate,
}

impl Settings {
    /// Reads and checks `path`; `catalog_dir` (flag or environment) overrides the file's choice.
    pub fn load(path: &Path, catalog_dir: Option<PathBuf>) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => ConfigError::NotFound {
                path: path.to_owned(),
            },
            _ => ConfigError::Read {
                path: path.to_owned(),
                source,
            },
        })?;
        Self::from_text(path, &text, catalog_dir)
    }

    /// Checks `text` as the config file at `path` would be read by [`Self::load`]: with the
    /// catalog dir `catalog_dir` (flag or environment) and the environment's overrides.
    pub fn from_text(
        path: &Path,
        text: &str,
        catalog_dir: Option<PathBuf>,
    ) -> Result<Self, ConfigError> {
        parse::parse(path, text)?.overridden(catalog_dir)
    }

    /// The config file's new `text` read as [`Self::load`] read the file: with the same catalog
    /// dir flag and the same environment.
    pub fn reread(&self, text: &str) -> Result<Self, ConfigError> {
        parse::parse(&self.source, text)?.overridden(self.catalog_dir_flag.clone())
    }

    /// These settings with what the flag (`catalog_dir`) and the environment set over the file.
    fn overridden(mut self, catalog_dir: Option<PathBuf>) -> Result<Self, ConfigError> {
        if let Some(dir) = &catalog_dir {
            self.catalog_dir = dir.clone();
        }
        self.catalog_dir_flag = catalog_dir;
        let mut settings = self;
        if let Some(dir) = std::env::var_os(EMBED_DIR_ENV).filter(|d| !d.is_empty()) {
            settings.embed_dir = PathBuf::from(dir);
        }
        if let Some(on) = embeddings_from_env()? {
            settings.embeddings = on;
        }
        if let Some(on) = switch_from_env(LEARNING_ENV)? {
            settings.learning = on;
        }
        if let Some(url) = std::env::var(ENV_STORE_URL).ok().filter(|u| !u.is_empty()) {
            settings.store = Some(StoreSettings {
                url,
                ..settings.store.unwrap_or(StoreSettings {
                    url: String::new(),
                    ttl: DEFAULT_STORE_TTL,
                    max_result_bytes: DEFAULT_STORE_MAX_RESULT,
                })
            });
        }
        Ok(settings)
    }

    /// Checks `text` as the config file at `path`, without reading anything.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        parse::parse(path, text)
    }

    /// The server with this name (the identifier used in qualified tool names).
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        let at = self.servers.binary_search_by(|s| s.name.as_str().cmp(name));
        at.ok().map(|at| &self.servers[at])
    }

    /// The enabled servers in the order the file lists them.
    pub fn servers_in_file_order(&self) -> Vec<&ServerConfig> {
        (self.file_order.iter())
            .filter_map(|name| self.server(name))
            .collect()
    }
}

/// The default config file: `$XDG_CONFIG_HOME/meta-server/config.json` or the platform equivalent.
pub fn default_config_path() -> PathBuf {
    dirs::config_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("meta-server")
        .join("config.json")
}

/// The default skills directories: the user's and the current project's `.claude/skills`.
pub fn default_skills_dirs() -> Vec<PathBuf> {
    let mut dirs_found = Vec::new();
    if let Some(home) = dirs::home_dir() {
        dirs_found.push(home.join(".claude").join("skills"));
    }
    if let Ok(cwd) = std::env::current_dir() {
        dirs_found.push(cwd.join(".claude").join("skills"));
    }
    dirs_found
}

/// The default catalog directory: `$XDG_DATA_HOME/meta-server/catalogs` or the platform equivalent.
/// `META_SERVER_EMBEDDINGS` read as a switch: `None` when unset or empty.
pub fn embeddings_from_env() -> Result<Option<bool>, ConfigError> {
    switch_from_env(EMBEDDINGS_ENV)
}

/// The variable `var` read as a switch (`on`/`off`, `true`/`false`, `1`/`0`, `yes`/`no`):
/// `None` when unset or empty.
fn switch_from_env(var: &'static str) -> Result<Option<bool>, ConfigError> {
    let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let value = value.to_string_lossy().to_lowercase();
    match value.as_str() {
        "off" | "false" | "0" | "no" => Ok(Some(false)),
        "on" | "true" | "1" | "yes" => Ok(Some(true)),
        _ => Err(ConfigError::Switch { var, value }),
    }
}

/// Where `scripts/fetch-embed-assets` puts the embedding runtime and model for a user who sets
/// nothing: `<data dir>/meta-server/embed`, next to the default catalog dir.
pub fn default_embed_dir() -> PathBuf {
    // Unit tests never load the user's model: a test that ends while ONNX Runtime is loading
    // it on the embedding thread crashes the test binary in ONNX Runtime's exit handlers.
    if cfg!(test) {
        return PathBuf::from("/nonexistent/unit-tests/meta-server/embed");
    }
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("meta-server")
        .join("embed")
}

pub fn default_catalog_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("meta-server")
        .join("catalogs")
}

/// One upstream server as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Identifier used in qualified names (`<name>__<tool>`): the config key, made name-safe.
    pub name: String,
    /// The config key as the user wrote it, for display.
    pub key: String,
    pub description: Option<String>,
    pub transport: TransportConfig,
    pub always_load: bool,
    /// Whether its tools and prompts are named `<server>__<name>` (`prefix`, default true);
    /// without, they are also listed and called under their own names.
    pub prefix: bool,
    pub idle_timeout: Duration,
    pub call_timeout: Duration,
    /// `allowTools` / `denyTools`, compiled.
    pub tools: ToolFilter,
    pub max_result_tokens: Option<u64>,
    /// The largest single message read from this server, in bytes (`maxMessageMb`).
    pub max_message_bytes: usize,
    /// How much of one of its listings is taken (`maxListPages`, `maxListMb`).
    pub lists: ListBounds,
    /// OAuth client settings of a remote server (`oauth`, or Cursor's `auth`).
    pub oauth: Option<OAuthConfig>,
    /// Its own `policy` block, over `metaServer.policy` ([`Settings::policy`]).
    pub policy: Policy,
    /// `roots`: the directories the server may be given as roots; a client's roots reach it
    /// only within them. `None`: it is told there are none.
    pub roots: Option<Vec<PathBuf>>,
}

/// How much of one upstream listing meta-server takes before it gives up on it: a server
/// that always returns a `nextCursor` would otherwise be listed until memory runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListBounds {
    /// `maxListPages`: pages followed.
    pub max_pages: u64,
    /// `maxListMb`: bytes of all pages together, as JSON.
    pub max_bytes: usize,
}

impl Default for ListBounds {
    fn default() -> Self {
        Self {
            max_pages: DEFAULT_MAX_LIST_PAGES,
            max_bytes: DEFAULT_MAX_LIST_BYTES,
        }
    }
}

/// How meta-server logs in to a remote server that needs OAuth. Everything is optional:
/// without a client id, the client registers itself (metadata document, else dynamically).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OAuthConfig {
    /// A client registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// Its secret, usually `${VAR}`: expanded when used, never written anywhere.
    pub client_secret: Option<String>,
    /// Scopes to ask for instead of those the server suggests.
    pub scopes: Vec<String>,
    /// Fixed port of the loopback callback (a pre-registered redirect URI needs one).
    pub callback_port: Option<u16>,
    /// Authorization-server metadata to use instead of discovering it.
    pub auth_server_metadata_url: Option<String>,
    /// An https URL hosting this client's Client ID Metadata Document, used as its client id
    /// where the authorization server supports that.
    pub client_metadata_url: Option<String>,
}

/// How to reach a server. Values may hold `${VAR}` references, expanded by [`ServerConfig::launch`].
#[derive(Debug, Clone, PartialEq)]
pub enum TransportConfig {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// The legacy HTTP+SSE transport (`"type": "sse"`): a GET event stream plus POSTs.
    Sse {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// A transport with every `${VAR}` expanded: what is actually launched. Never persisted.
#[derive(Debug, Clone, PartialEq)]
pub enum Launch {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    Sse {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl ServerConfig {
    /// A server known only by its catalog (nothing to launch), for searching shipped or
    /// exported catalogs without a config, as `eval` does.
    pub fn catalog_only(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            key: name.to_owned(),
            description: None,
            transport: TransportConfig::Stdio {
                command: String::new(),
                args: Vec::new(),
                env: BTreeMap::new(),
                cwd: None,
            },
            always_load: false,
            prefix: true,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            tools: ToolFilter::default(),
            max_result_tokens: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE,
            lists: ListBounds::default(),
            oauth: None,
            policy: Policy::default(),
            roots: None,
        }
    }

    /// What this server's config must never show: the values it takes from the environment
    /// (`${VAR}` anywhere), and env and header values whose names sound secret (`*TOKEN*`,
    /// `*KEY*`, `Authorization`, ...). Read from `lookup`.
    pub fn secrets_with(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
        let secret_name = |name: &str| {
            let name = name.to_ascii_lowercase();
            [
                "token",
                "key",
                "secret",
                "password",
                "passwd",
                "auth",
                "credential",
                "cookie",
            ]
            .iter()
            .any(|word| name.contains(word))
        };
        let mut texts: Vec<&str> = Vec::new();
        let mut named: Vec<&str> = Vec::new();
        match &self.transport {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                texts.push(command);
                texts.extend(args.iter().map(String::as_str));
                texts.extend(cwd.as_deref());
                texts.extend(env.values().map(String::as_str));
                named.extend(
                    env.iter()
                        .filter(|(k, _)| secret_name(k))
                        .map(|(_, v)| v.as_str()),
                );
            }
            TransportConfig::Http { url, headers } | TransportConfig::Sse { url, headers } => {
                texts.push(url);
                texts.extend(headers.values().map(String::as_str));
                named.extend(
                    headers
                        .iter()
                        .filter(|(k, _)| secret_name(k))
                        .map(|(_, v)| v.as_str()),
                );
            }
        }
        texts.extend(self.oauth.iter().filter_map(|o| o.client_secret.as_deref()));
        let mut secrets: Vec<String> = texts
            .iter()
            .flat_map(|t| expand::references(t))
            .filter_map(|var| lookup(&var))
            .collect();
        for value in named {
            if let Ok(value) = expand(value, lookup) {
                // `Bearer <token>`: the token alone is the secret too.
                secrets.extend(value.split_whitespace().skip(1).map(str::to_owned));
                secrets.push(value);
            }
        }
        secrets
    }

    /// [`Self::secrets_with`] from the process environment.
    pub fn secrets(&self) -> Vec<String> {
        self.secrets_with(&|var| std::env::var(var).ok())
    }

    /// The URL of a remote (streamable HTTP or SSE) server, as written.
    pub fn remote_url(&self) -> Option<&str> {
        match &self.transport {
            TransportConfig::Http { url, .. } | TransportConfig::Sse { url, .. } => Some(url),
            TransportConfig::Stdio { .. } => None,
        }
    }

    /// Expands `${VAR}` and `${VAR:-default}` from the process environment.
    pub fn launch(&self) -> Result<Launch, ConfigError> {
        self.launch_with(&|var| std::env::var(var).ok())
    }

    /// Like [`Self::launch`], with the variable lookup given.
    pub fn launch_with(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Launch, ConfigError> {
        let ex = |key: &str, value: &str| {
            expand(value, lookup).map_err(|Unset(var)| ConfigError::MissingVar {
                server: self.key.clone(),
                key: key.to_owned(),
                var,
            })
        };
        let expand_headers = |headers: &BTreeMap<String, String>| {
            headers
                .iter()
                .map(|(k, v)| Ok((k.clone(), ex(&format!("headers.{k}"), v)?)))
                .collect::<Result<BTreeMap<_, _>, ConfigError>>()
        };
        Ok(match &self.transport {
            TransportConfig::Stdio {
                command,
                args,
                env,
                cwd,
            } => Launch::Stdio {
                command: ex("command", command)?,
                args: args
                    .iter()
                    .map(|a| ex("args", a))
                    .collect::<Result<_, _>>()?,
                env: env
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), ex(&format!("env.{k}"), v)?)))
                    .collect::<Result<_, ConfigError>>()?,
                cwd: cwd
                    .as_deref()
                    .map(|c| ex("cwd", c))
                    .transpose()?
                    .map(PathBuf::from),
            },
            TransportConfig::Http { url, headers } => Launch::Http {
                url: ex("url", url)?,
                headers: expand_headers(headers)?,
            },
            TransportConfig::Sse { url, headers } => Launch::Sse {
                url: ex("url", url)?,
                headers: expand_headers(headers)?,
            },
        })
    }
}

/// Why a config key cannot name a server.
#[derive(Debug, thiserror::Error)]
pub enum NameError {
    #[error("the server name has no letters or digits; rename it")]
    Empty,
    #[error(
        "the server name \"{0}\" contains \"__\", which separates server and tool in qualified names; rename it"
    )]
    Separator(String),
    #[error("the server name \"{0}\" is longer than 64 characters; shorten it")]
    TooLong(String),
    #[error(
        "the server name \"{0}\" is reserved for meta-server's own tools and skills; rename it"
    )]
    Reserved(String),
}

/// Turns a config key into a name-safe identifier: characters outside `[A-Za-z0-9_.-]` become `-`.
///
/// Errors when the result is empty, reserved, or contains `__` (the qualified-name separator).
pub fn server_identifier(key: &str) -> Result<String, NameError> {
    let mut id = String::with_capacity(key.len());
    for c in key.trim().chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            c
        } else {
            '-'
        };
        if !(c == '-' && id.ends_with('-')) {
            id.push(c);
        }
    }
    let id = id.trim_matches('-').to_owned();
    if id.is_empty() {
        return Err(NameError::Empty);
    }
    if id.contains("__") {
        return Err(NameError::Separator(key.to_owned()));
    }
    if id.len() > 64 {
        return Err(NameError::TooLong(key.to_owned()));
    }
    if id == RESERVED_SERVER || id == SKILL_SERVER {
        return Err(NameError::Reserved(id));
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_search_is_on_by_default_and_the_model_has_a_default_place() {
        let parse = |text: &str| Settings::parse(Path::new("/cfg/config.json"), text);
        let s = parse(r#"{"mcpServers": {}}"#).unwrap();
        assert!(s.embeddings);
        assert_eq!(s.embed_dir, default_embed_dir());
        assert!(s.embed_dir.ends_with("meta-server/embed"));
        let s = parse(
            r#"{"metaServer": {"search": {"embeddings": false}, "embeddings": {"dir": "m"}}, "mcpServers": {}}"#,
        )
        .unwrap();
        assert!(!s.embeddings);
        assert_eq!(s.embed_dir, Path::new("/cfg/m"));
        let e = parse(r#"{"metaServer": {"search": {"embedings": false}}, "mcpServers": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("metaServer.search.embedings"), "{e}");
        let e = parse(r#"{"metaServer": {"search": true}, "mcpServers": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("metaServer.search: must be an object"), "{e}");
    }

    #[test]
    fn identifiers_are_name_safe_and_deterministic() {
        assert_eq!(
            server_identifier("Ant Design Components").unwrap(),
            "Ant-Design-Components"
        );
        assert_eq!(server_identifier("github").unwrap(), "github");
        assert_eq!(server_identifier("a/b: c").unwrap(), "a-b-c");
        assert_eq!(server_identifier("my_server.v2").unwrap(), "my_server.v2");
        assert!(
            server_identifier("a__b")
                .unwrap_err()
                .to_string()
                .contains("__")
        );
        assert!(
            server_identifier("meta")
                .unwrap_err()
                .to_string()
                .contains("reserved")
        );
        assert!(server_identifier("  ").is_err());
        assert!(server_identifier("!!!").is_err());
    }

    #[test]
    fn launch_expands_variables_and_names_missing_ones() {
        let server = ServerConfig {
            name: "gh".into(),
            key: "gh".into(),
            description: None,
            transport: TransportConfig::Http {
                url: "http://127.0.0.1:${PORT:-8080}/mcp".into(),
                headers: BTreeMap::from([("Authorization".into(), "Bearer ${TOKEN}".into())]),
            },
            always_load: false,
            prefix: true,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            tools: ToolFilter::default(),
            max_result_tokens: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE,
            lists: ListBounds::default(),
            oauth: None,
            policy: Policy::default(),
            roots: None,
        };
        let lookup = |v: &str| (v == "TOKEN").then(|| "s3cret".to_owned());
        assert_eq!(
            server.secrets_with(&lookup),
            ["s3cret", "s3cret", "Bearer s3cret"]
        );
        let Launch::Http { url, headers } = server.launch_with(&lookup).unwrap() else {
            panic!("expected http");
        };
        assert_eq!(url, "http://127.0.0.1:8080/mcp");
        assert_eq!(headers["Authorization"], "Bearer s3cret");
        let err = server.launch_with(&|_| None).unwrap_err().to_string();
        assert!(
            err.contains("TOKEN") && err.contains("headers.Authorization"),
            "{err}"
        );
    }
}
