//! MCP clients' own config files: where each client keeps its servers, reading them in
//! meta-server's `mcpServers` shape, and replacing them with the single meta-server entry.
//!
//! Only the servers section of a client file is ever rewritten; the rest stays byte-identical
//! (JSON and JSONC are spliced, Codex TOML is edited in place). No I/O here but [`files`].

mod codex;
mod entries;
mod files;
mod json;
mod locate;
mod merge;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde_json::{Value, json};

use crate::config::ConfigError;

pub use entries::{Edit, add_server, remove_server};
pub use files::{backup_path, read_text, restore_backup, write_atomic, write_backup};
pub use locate::{Dirs, candidates, locate};
pub use merge::{Merge, merge};

/// Name of the one entry `install` leaves in a client's config.
pub const ENTRY_NAME: &str = "meta-server";

/// An MCP client whose config meta-server can import and install into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    VsCode,
    Codex,
}

impl Client {
    pub const ALL: [Client; 5] = [
        Client::ClaudeDesktop,
        Client::ClaudeCode,
        Client::Cursor,
        Client::VsCode,
        Client::Codex,
    ];
    /// Command-line names, in the order of [`Client::ALL`].
    pub const NAMES: [&'static str; 5] =
        ["claude-desktop", "claude-code", "cursor", "vscode", "codex"];

    /// The command-line name (`claude-desktop`, ...).
    pub fn name(self) -> &'static str {
        Self::NAMES[Self::ALL.iter().position(|c| *c == self).unwrap_or(0)]
    }

    /// Whether the client defers an MCP server's tools behind its own tool search unless the
    /// server's entry says `"alwaysLoad": true`: Claude Code from 2.1.121 (the Agent SDK reads
    /// the same key from `.mcp.json`). meta-server's three tools are its way in, so its entry
    /// there carries the key.
    pub fn defers_tools(self) -> bool {
        self == Client::ClaudeCode
    }

    /// The key that holds the servers: `mcpServers`, VS Code's `servers`, Codex's `mcp_servers`.
    pub fn section(self) -> &'static str {
        match self {
            Client::VsCode => "servers",
            Client::Codex => "mcp_servers",
            _ => "mcpServers",
        }
    }
}

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::VsCode => "VS Code",
            Client::Codex => "Codex",
        })
    }
}

impl FromStr for Client {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::NAMES
            .iter()
            .position(|n| *n == s)
            .map(|i| Self::ALL[i])
            .ok_or_else(|| {
                format!(
                    "unknown client \"{s}\"; use one of {}",
                    Self::NAMES.join(", ")
                )
            })
    }
}

/// Errors in finding, reading or rewriting client files.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "no {client} config found (tried {tried}); pass the file's location as the PATH argument"
    )]
    NotFound { client: Client, tried: String },
    #[error("{path} does not exist; check the PATH argument")]
    Missing { path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not valid {format} at line {line}, column {column}: {message}")]
    Syntax {
        path: PathBuf,
        format: &'static str,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {location} {message}")]
    Invalid {
        path: PathBuf,
        location: String,
        message: String,
    },
    #[error(
        "a backup from an earlier install already exists at {path}; run `meta-server uninstall --client {client}` to restore it, or move it away"
    )]
    BackupExists { path: PathBuf, client: &'static str },
    #[error(
        "no backup at {path}, so there is nothing to restore; `meta-server install --client {client}` writes it"
    )]
    NoBackup { path: PathBuf, client: &'static str },
    #[error(
        "{path} is both the client's config and meta-server's; pass --config with a file of meta-server's own"
    )]
    SameFile { path: PathBuf },
    #[error("meta-server's config would not load after the import: {0}; fix it and retry")]
    Config(#[from] ConfigError),
    #[error("meta-server's config does not load as it is, so it was left alone: {0}")]
    Broken(ConfigError),
    #[error(
        "{path} already has a server \"{key}\"; pass --force to replace it, or pick another name"
    )]
    Exists { key: String, path: PathBuf },
    #[error("server \"{key}\" not written: {reason}")]
    Refused { key: String, reason: String },
    #[error("{path} has no server \"{name}\"; configured: {configured}")]
    UnknownServer {
        name: String,
        path: PathBuf,
        configured: String,
    },
}

/// One server read from a client file, in meta-server's entry shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The client's key for the server.
    pub name: String,
    /// The entry as meta-server's config holds it (`command`/`args`/`env`/... or `url`/`headers`).
    pub entry: Value,
    /// What did not carry over exactly, for the report.
    pub notes: Vec<String>,
}

/// A client's config file as read: its text and its servers in file order.
#[derive(Debug, Clone)]
pub struct ClientFile {
    pub client: Client,
    pub path: PathBuf,
    pub text: String,
    pub servers: Vec<Imported>,
}

impl ClientFile {
    /// Reads and parses `path` as `client`'s config.
    pub fn read(client: Client, path: &Path) -> Result<Self, ClientError> {
        let text = read_text(path)?.ok_or_else(|| ClientError::Missing {
            path: path.to_owned(),
        })?;
        Self::parse(client, path, text)
    }

    /// Parses `text` as `client`'s config found at `path`.
    pub fn parse(client: Client, path: &Path, text: String) -> Result<Self, ClientError> {
        let servers = match client {
            Client::Codex => codex::servers(path, &text)?,
            _ => json::servers(path, &text, client.section())?,
        };
        Ok(Self {
            client,
            path: path.to_owned(),
            text,
            servers,
        })
    }

    /// The file's text with its servers replaced by the single meta-server `entry`.
    /// Servers named in `keep` (those meta-server cannot serve) stay, as they were written.
    pub fn with_only(&self, entry: &MetaEntry, keep: &[String]) -> Result<String, ClientError> {
        if self.client == Client::Codex {
            return codex::with_only(&self.path, &self.text, entry, keep);
        }
        let section = self.client.section();
        let original = json::parse(&self.path, &self.text)?;
        let mut servers = serde_json::Map::new();
        servers.insert(ENTRY_NAME.to_owned(), entry.to_json());
        for name in keep {
            if let Some(raw) = original.get(section).and_then(|s| s.get(name)) {
                servers.insert(name.clone(), raw.clone());
            }
        }
        json::replace_section(&self.path, &self.text, section, &Value::Object(servers))
    }
}

/// The entry that runs meta-server: `<exe> --config <config> serve`, both paths absolute;
/// `"alwaysLoad": true` for a client that would otherwise defer its tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaEntry {
    pub command: String,
    pub args: Vec<String>,
    /// Written as `"alwaysLoad": true` (see [`Client::defers_tools`]).
    pub always_load: bool,
}

impl MetaEntry {
    /// The entry for `client`'s config.
    pub fn new(client: Client, exe: &Path, config: &Path) -> Self {
        Self {
            command: exe.display().to_string(),
            args: vec![
                "--config".into(),
                config.display().to_string(),
                "serve".into(),
            ],
            always_load: client.defers_tools(),
        }
    }

    pub fn to_json(&self) -> Value {
        let mut entry = json!({"command": self.command, "args": self.args});
        if self.always_load {
            entry["alwaysLoad"] = json!(true);
        }
        entry
    }
}

/// Whether an entry runs meta-server itself: its program is named `meta-server`, or it runs
/// something mentioning meta-server with `serve`. Importing it would make meta-server its own
/// upstream.
pub fn is_meta_server(entry: &Value) -> bool {
    let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
    let program = Path::new(command)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    if program == "meta-server" {
        return true;
    }
    let args: Vec<&str> = entry
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    args.contains(&"serve")
        && std::iter::once(command)
            .chain(args.iter().copied())
            .any(|s| s.contains("meta-server"))
}

/// A unified diff of two texts, for `--dry-run`; empty when they are equal.
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

/// Line and column (1-based) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_names_round_trip() {
        for client in Client::ALL {
            assert_eq!(client.name().parse::<Client>().unwrap(), client);
        }
        let err = "zed".parse::<Client>().unwrap_err();
        assert!(
            err.contains("claude-desktop") && err.contains("codex"),
            "{err}"
        );
    }

    #[test]
    fn meta_server_entries_are_recognised() {
        assert!(is_meta_server(
            &json!({"command": "/opt/bin/meta-server", "args": ["serve"]})
        ));
        assert!(is_meta_server(&json!({"command": "meta-server.exe"})));
        assert!(is_meta_server(
            &json!({"command": "cargo", "args": ["run", "--bin", "meta-server", "--", "serve"]})
        ));
        assert!(!is_meta_server(
            &json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]})
        ));
        assert!(!is_meta_server(
            &json!({"command": "python", "args": ["serve"]})
        ));
        assert!(!is_meta_server(&json!({"url": "https://x/mcp"})));
    }

    #[test]
    fn line_column_is_one_based() {
        assert_eq!(line_column("ab\ncd", 0), (1, 1));
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
    }

    #[test]
    fn diff_shows_changed_lines_only() {
        assert_eq!(unified_diff("a\n", "a\n", "x", "y"), "");
        let d = unified_diff("a\nb\nc\n", "a\nB\nc\n", "old", "new");
        assert!(d.contains("--- old") && d.contains("+++ new"), "{d}");
        assert!(
            d.contains("-b\n") && d.contains("+B\n") && d.contains(" a\n"),
            "{d}"
        );
    }
}

#[cfg(test)]
mod fixture_tests {
    use super::*;

    fn read(client: Client, name: &str) -> ClientFile {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/clients")
            .join(name);
        ClientFile::read(client, &path).unwrap()
    }

    fn names(file: &ClientFile) -> Vec<&str> {
        file.servers.iter().map(|s| s.name.as_str()).collect()
    }

    #[test]
    fn claude_desktop_file() {
        let f = read(Client::ClaudeDesktop, "claude_desktop_config.json");
        assert_eq!(names(&f), ["filesystem", "memory"]);
        assert_eq!(
            f.servers[1].entry["env"],
            json!({"MEMORY_FILE_PATH": "/Users/me/.memory.jsonl"})
        );
    }

    #[test]
    fn claude_code_user_file_reads_top_level_servers_only() {
        let f = read(Client::ClaudeCode, "claude.json");
        assert_eq!(names(&f), ["context7", "sequential-thinking"]);
        assert_eq!(f.servers[0].entry["type"], "http");
        let out = f
            .with_only(
                &MetaEntry::new(Client::ClaudeCode, Path::new("/m"), Path::new("/c")),
                &[],
            )
            .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["mcpServers"][ENTRY_NAME],
            json!({"command": "/m", "args": ["--config", "/c", "serve"], "alwaysLoad": true}),
            "Claude Code defers the tools of an entry without alwaysLoad"
        );
        assert!(out.contains("\"project-only\""), "{out}");
        assert!(out.ends_with("  \"userID\": \"0f3c9a\"\n}\n"), "{out}");
    }

    #[test]
    fn servers_to_keep_stay_as_the_client_wrote_them() {
        let f = read(Client::Cursor, "cursor_mcp.json");
        let out = f
            .with_only(
                &MetaEntry::new(Client::Cursor, Path::new("/m"), Path::new("/c")),
                &["browser".into(), "absent".into()],
            )
            .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        let kept: Vec<&String> = v["mcpServers"].as_object().unwrap().keys().collect();
        assert_eq!(kept, ["meta-server", "browser"]);
        let original: Value = serde_json::from_str(&f.text).unwrap();
        assert_eq!(
            v["mcpServers"]["browser"],
            original["mcpServers"]["browser"]
        );
    }

    #[test]
    fn cursor_file_with_env_variables() {
        let f = read(Client::Cursor, "cursor_mcp.json");
        assert_eq!(
            names(&f),
            ["time", "browser", "legacy", "socket", "meta-server"]
        );
        assert_eq!(
            f.servers[1].entry["env"]["BROWSER_TOKEN"],
            "${BROWSER_TOKEN}"
        );
        assert!(is_meta_server(&f.servers[4].entry));
    }

    #[test]
    fn vscode_jsonc_with_inputs_and_tabs() {
        let f = read(Client::VsCode, "vscode_mcp.json");
        assert_eq!(names(&f), ["fetch", "perplexity", "github"]);
        assert!(f.servers[1].notes[0].contains("${input:"));
        let out = f
            .with_only(
                &MetaEntry::new(Client::VsCode, Path::new("/m"), Path::new("/c")),
                &[],
            )
            .unwrap();
        assert!(
            out.starts_with("{\n\t// Servers for every workspace.\n"),
            "{out}"
        );
        // The file's tab indent is kept for the new entry.
        assert!(
            out.contains("\t\"servers\": {\n\t\t\"meta-server\": {\n\t\t\t\"command\": \"/m\""),
            "{out}"
        );
        let again = ClientFile::parse(Client::VsCode, &f.path, out).unwrap();
        assert_eq!(names(&again), [ENTRY_NAME]);
    }
}
