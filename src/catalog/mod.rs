//! Catalog files (format v1): one `<server>.json` per upstream holding its `tools/list` as
//! received, written atomically, plus fingerprints and refresh from a live upstream.

mod failure;
mod filed;
mod fingerprint;
mod injection;
mod known;
mod raw;
mod refresh;
pub mod screen;
mod tool;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::atomic_file::{self, Access};
use crate::checksum::{self, Checksum};
use crate::config::ServerConfig;
use known::Stamp;

pub use failure::Failure;
pub use fingerprint::{
    config_fingerprint, is_fingerprint_v1, offer_fingerprint, resource_fingerprint,
    tool_fingerprint, tool_fingerprint_v1, tools_hash,
};
pub use known::{Known, Record};
pub use raw::RawTool;
pub use refresh::fetch;
pub use tool::{ToolDef, ToolError};

/// The catalog format this build writes and the newest it reads.
pub const FORMAT: u64 = 1;

/// Errors reading or writing catalog files.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read catalog {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write catalog {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "catalog {path} is not a valid catalog: {message}; re-create it with `meta-server index`"
    )]
    Invalid { path: PathBuf, message: String },
    #[error(
        "catalog {path} has format {found}, newer than this meta-server reads ({FORMAT}); upgrade meta-server or re-create it with `meta-server index`"
    )]
    NewerFormat { path: PathBuf, found: u64 },
    #[error(
        "catalog {path} is the catalog of server \"{found}\", not of \"{expected}\"; it is skipped (re-create it with `meta-server index`)"
    )]
    WrongServer {
        path: PathBuf,
        found: String,
        expected: String,
    },
}

/// A catalog file read at start-up ([`Catalog::read_server_filed`]).
pub struct FiledRead {
    pub catalog: Catalog,
    /// The checksum of the file's bytes.
    pub sum: Checksum,
    /// Its tools that parse as MCP tools.
    pub tools: Vec<ToolDef>,
    /// What the next start needs to take it without reading the file, if it can.
    pub record: Option<Record>,
}

/// One server's catalog. Only `format`, `server` and `tools` are required to load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Catalog {
    pub format: u64,
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_hash: Option<String>,
    /// How long the server said its tool list stays fresh (`ttlMs` of `tools/list`, SEP-2549),
    /// counted from `fetchedAt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// MCP Tool objects as the server sent them, kept as text (shared, never copied).
    pub tools: Vec<RawTool>,
    /// The server's MCP Prompt objects as sent; `[]` when it offers none, absent in a catalog
    /// made before prompts were recorded (such a catalog is stale, see [`Self::is_stale`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<Arc<[Value]>>,
    /// The server's MCP Resource objects as sent; absent or `[]` as for `prompts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Arc<[Value]>>,
    /// The server's MCP ResourceTemplate objects as sent; absent or `[]` as for `prompts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_templates: Option<Arc<[Value]>>,
}

impl Catalog {
    /// A catalog of `tools` that says nothing about where or when they were listed.
    pub fn new(server: impl Into<String>, tools: Vec<RawTool>) -> Self {
        Self {
            format: FORMAT,
            server: server.into(),
            fetched_at: None,
            config_fingerprint: None,
            protocol_version: None,
            server_info: None,
            instructions: None,
            tools_hash: None,
            ttl_ms: None,
            tools,
            prompts: None,
            resources: None,
            resource_templates: None,
        }
    }

    /// Whether the catalog should be listed again: it was made from another launch config
    /// than `server`'s, it does not record the server's prompts and resources (an older
    /// meta-server made it, or listing them failed), or the freshness its server gave it
    /// (`ttlMs`) has run out by `now`.
    pub fn is_stale(&self, server: &ServerConfig, now: SystemTime) -> bool {
        !self.describes(server)
            || self.ttl_ms.is_some_and(|ttl| {
                let fetched = self.fetched_at.as_deref().map(humantime::parse_rfc3339);
                !matches!(fetched, Some(Ok(at)) if at + Duration::from_millis(ttl) > now)
            })
    }

    /// Whether the catalog describes `server` as configured now, whatever its age: listed from
    /// its launch config, with its prompts and resources.
    pub fn describes(&self, server: &ServerConfig) -> bool {
        self.made_from(server)
            && self.prompts.is_some()
            && self.resources.is_some()
            && self.resource_templates.is_some()
    }

    /// Whether the catalog was listed from `server`'s launch config as it is now.
    pub fn made_from(&self, server: &ServerConfig) -> bool {
        self.config_fingerprint.as_deref() == Some(config_fingerprint(server).as_str())
    }

    /// The protocol revision its server spoke when it was listed, if that was from `server`'s
    /// launch config as it is now: what a new connection can start with, without a probe.
    pub fn known_revision(&self, server: &ServerConfig) -> Option<&str> {
        self.protocol_version
            .as_deref()
            .filter(|_| self.made_from(server))
    }

    /// Whether `other` lists the same tools (by hash), prompts, resources and templates.
    pub fn lists_same(&self, other: &Catalog) -> bool {
        self.tools_hash == other.tools_hash
            && self.prompts == other.prompts
            && self.resources == other.resources
            && self.resource_templates == other.resource_templates
    }

    /// The file that holds `server`'s catalog in `dir`.
    pub fn path(dir: &Path, server: &str) -> PathBuf {
        dir.join(format!("{server}.json"))
    }

    /// Loads one catalog file; `Ok(None)` if it does not exist.
    pub fn load(path: &Path) -> Result<Option<Self>, CatalogError> {
        Ok(Self::read(path)?.map(|(catalog, _)| catalog))
    }

    /// Like [`Self::load`], with the checksum of the file's bytes.
    fn read(path: &Path) -> Result<Option<(Self, Checksum)>, CatalogError> {
        let Some((text, _)) = read_stamped(path)? else {
            return Ok(None);
        };
        let sum = checksum::of(text.as_bytes());
        Ok(Some((Self::parse(path, &text)?, sum)))
    }

    /// Loads `server`'s catalog from `dir`; `Ok(None)` if there is none. A catalog in that
    /// file that names another server is an error, never taken for this server's.
    pub fn load_server(dir: &Path, server: &str) -> Result<Option<Self>, CatalogError> {
        Ok(Self::read_server(dir, server)?.map(|(catalog, _)| catalog))
    }

    /// Like [`Self::load_server`], with the checksum of the file's bytes: what tells whether
    /// the file changed since the search index was saved.
    pub fn read_server(dir: &Path, server: &str) -> Result<Option<(Self, Checksum)>, CatalogError> {
        let path = Self::path(dir, server);
        match Self::read(&path)? {
            Some((catalog, _)) if catalog.server != server => Err(CatalogError::WrongServer {
                path,
                found: catalog.server,
                expected: server.to_owned(),
            }),
            loaded => Ok(loaded),
        }
    }

    /// Like [`Self::read_server`], with the tools that parse as MCP tools ([`Self::tool_defs`]),
    /// and the tools' texts left in the file ([`filed`]): read from it again when something
    /// asks for them. When `known` (the last start's [`Record`] of the file) has the file's
    /// stamp, the catalog is taken from it and the file is not read. The read's record is
    /// made for a file unchanged for [`known::SETTLED`] at `now`.
    pub fn read_server_filed(
        dir: &Path,
        server: &str,
        known: Option<Record>,
        now: SystemTime,
    ) -> Result<Option<FiledRead>, CatalogError> {
        let path = Self::path(dir, server);
        if let Some(record) = known
            && let Ok(meta) = std::fs::metadata(&path)
            && Stamp::of(&meta).is_some_and(|stamp| record.stamp().ok() == Some(stamp))
        {
            match record.recall(&path, server) {
                Ok((catalog, sum, tools)) => {
                    return Ok(Some(FiledRead {
                        catalog,
                        sum,
                        tools,
                        record: Some(record),
                    }));
                }
                Err(e) => tracing::debug!(server, "the record of its catalog is unusable: {e}"),
            }
        }
        let Some((text, stamp)) = read_stamped(&path)? else {
            return Ok(None);
        };
        let sum = checksum::of(text.as_bytes());
        let mut catalog = Self::parse(&path, &text)?;
        if catalog.server != server {
            return Err(CatalogError::WrongServer {
                path,
                found: catalog.server,
                expected: server.to_owned(),
            });
        }
        let defs: Vec<Option<ToolDef>> = catalog
            .tools
            .iter()
            .map(|raw| catalog.tool_def(raw))
            .collect();
        let names: Vec<Option<&str>> = defs
            .iter()
            .map(|d| d.as_ref().map(|d| d.name.as_str()))
            .collect();
        let file = filed::CatalogFile::new(path, sum);
        let filed = filed::file_tools(&file, &text, &catalog.tools, &names);
        let tools: Vec<ToolDef> = defs
            .into_iter()
            .zip(catalog.tools.iter().zip(&filed))
            .filter_map(|(def, (held, filed))| {
                let mut def = def?;
                // A tool cleaned of hidden characters keeps its cleaned text.
                if def.raw.is(held) {
                    def.raw = filed.clone();
                }
                Some(def)
            })
            .collect();
        catalog.tools = filed;
        let record = stamp
            .filter(|stamp| stamp.settled(now))
            .and_then(|stamp| Record::of(stamp, &sum, &catalog, &tools));
        Ok(Some(FiledRead {
            catalog,
            sum,
            tools,
            record,
        }))
    }

    /// Parses catalog text; `path` is only used in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, CatalogError> {
        let invalid = |message: String| CatalogError::Invalid {
            path: path.to_owned(),
            message,
        };
        // The usual catalog in one pass; anything else is read again below for its message
        // (parsing into a `Value` first, then into a catalog, builds every tool twice).
        if let Ok(catalog) = serde_json::from_str::<Self>(text)
            && (1..=FORMAT).contains(&catalog.format)
        {
            return Ok(catalog);
        }
        let value: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        match value.get("format") {
            Some(Value::Number(n)) => match n.as_u64() {
                Some(found) if found > FORMAT => {
                    return Err(CatalogError::NewerFormat {
                        path: path.to_owned(),
                        found,
                    });
                }
                Some(found) if found >= 1 => {}
                _ => return Err(invalid(format!("\"format\" {n} is not a catalog format"))),
            },
            Some(_) => return Err(invalid("\"format\" must be a number".into())),
            None => return Err(invalid("it has no \"format\" key".into())),
        }
        serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
    }

    /// The tools that parse as MCP tools; malformed entries are skipped with a warning.
    pub fn tool_defs(&self) -> Vec<ToolDef> {
        self.tools
            .iter()
            .filter_map(|raw| self.tool_def(raw))
            .collect()
    }

    /// `raw`, one of this catalog's tools, if it parses as an MCP tool; else a warning.
    fn tool_def(&self, raw: &RawTool) -> Option<ToolDef> {
        ToolDef::from_json(raw)
            .inspect_err(|message| {
                tracing::warn!(server = %self.server, "skipping a tool in the catalog: {message}");
            })
            .ok()
    }

    /// The catalog as [`Self::write`] writes it.
    pub fn text(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("catalog serializes");
        text.push('\n');
        text
    }

    /// Writes the catalog into `dir` atomically (temp file + rename), owner-only. A catalog of
    /// a newer format (from a newer meta-server) is never overwritten.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, CatalogError> {
        let path = Self::path(dir, &self.server);
        let fail = |source| CatalogError::Write {
            path: path.clone(),
            source,
        };
        match Self::load_server(dir, &self.server) {
            Err(newer @ CatalogError::NewerFormat { .. }) => return Err(newer),
            // Kept for a look at what went wrong, not overwritten.
            Err(CatalogError::Invalid { .. } | CatalogError::WrongServer { .. }) => {
                let bad = bad_path(&path, SystemTime::now());
                std::fs::rename(&path, &bad).map_err(fail)?;
                tracing::warn!(
                    "the unusable catalog {} is kept as {}",
                    path.display(),
                    bad.display()
                );
            }
            _ => {}
        }
        let text = self.text();
        atomic_file::write(&path, text.as_bytes(), Access::OwnerOnly).map_err(fail)?;
        Failure::clear(dir, &self.server);
        Ok(path)
    }
}

/// The text of the file at `path` and its stamp when it was opened; `None` if there is none.
fn read_stamped(path: &Path) -> Result<Option<(String, Option<Stamp>)>, CatalogError> {
    let read = || -> std::io::Result<(String, Option<Stamp>)> {
        let mut file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        let mut text = String::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_string(&mut text)?;
        Ok((text, Stamp::of(&meta)))
    };
    match read() {
        Ok(read) => Ok(Some(read)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CatalogError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Where an unusable catalog file is kept: `<server>.json.bad-<UTC time>`.
fn bad_path(path: &Path, now: SystemTime) -> PathBuf {
    let time = humantime::format_rfc3339_seconds(now)
        .to_string()
        .replace(':', "");
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".bad-{time}"));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Catalog {
        let tools = vec![RawTool::from(json!({
            "name": "echo",
            "description": "Echoes back the input",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
            "x-extra": {"kept": true}
        }))];
        Catalog {
            format: FORMAT,
            server: "everything".into(),
            fetched_at: Some("2026-11-29T12:00:00Z".into()),
            config_fingerprint: Some("abc".into()),
            protocol_version: Some("2025-11-25".into()),
            server_info: Some(json!({"name": "everything", "version": "2.0.0"})),
            instructions: None,
            tools_hash: Some(tools_hash(&tools)),
            ttl_ms: None,
            tools,
            prompts: Some(vec![json!({"name": "simple-prompt"})].into()),
            resources: Some(vec![json!({"uri": "demo://a", "name": "a"})].into()),
            resource_templates: Some(Vec::new().into()),
        }
    }

    #[test]
    fn a_catalog_from_before_prompts_and_resources_loads_and_is_listed_again() {
        let server = ServerConfig::catalog_only("everything");
        let text = format!(
            r#"{{"format": 1, "server": "everything", "configFingerprint": "{}", "tools": []}}"#,
            config_fingerprint(&server)
        );
        let old = Catalog::parse(Path::new("everything.json"), &text).unwrap();
        assert_eq!(
            (&old.prompts, &old.resources, &old.resource_templates),
            (&None, &None, &None)
        );
        assert!(old.is_stale(&server, SystemTime::now()), "to record them");
        let mut current = sample();
        current.config_fingerprint = Some(config_fingerprint(&server));
        assert!(!current.is_stale(&server, SystemTime::now()));
        current.resource_templates = None;
        assert!(current.is_stale(&server, SystemTime::now()));
        assert!(!current.lists_same(&sample()), "templates recorded or not");
        current.resource_templates = sample().resource_templates;
        current.fetched_at = None;
        assert!(
            current.lists_same(&sample()),
            "when and how it was listed aside"
        );
    }

    #[test]
    fn a_server_without_prompts_or_resources_is_recorded_as_having_none() {
        let mut catalog = sample();
        catalog.prompts = Some(Vec::new().into());
        let text = catalog.text();
        assert!(text.contains("\"prompts\": []"), "{text}");
        assert!(text.contains("\"resourceTemplates\": []"), "{text}");
        assert_eq!(Catalog::parse(Path::new("x.json"), &text).unwrap(), catalog);
    }

    #[test]
    fn stale_means_another_launch_config_or_past_the_servers_ttl() {
        let server = ServerConfig::catalog_only("everything");
        let mut catalog = sample();
        let at = humantime::parse_rfc3339("2026-11-29T12:00:00Z").unwrap();
        let later = |secs| at + Duration::from_secs(secs);
        assert!(
            catalog.is_stale(&server, at),
            "fingerprint abc is not this config's"
        );
        catalog.config_fingerprint = Some(config_fingerprint(&server));
        assert!(
            !catalog.is_stale(&server, later(1_000_000)),
            "no ttlMs: fresh for ever"
        );

        catalog.ttl_ms = Some(60_000);
        assert!(!catalog.is_stale(&server, later(59)));
        assert!(catalog.is_stale(&server, later(60)));
        catalog.ttl_ms = Some(0);
        assert!(catalog.is_stale(&server, at));
        catalog.ttl_ms = Some(60_000);
        catalog.fetched_at = Some("yesterday".into());
        assert!(
            catalog.is_stale(&server, at),
            "an unreadable fetchedAt cannot be fresh"
        );
    }

    #[test]
    fn round_trip_keeps_everything_including_unknown_tool_keys() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = sample();
        let path = catalog.write(dir.path()).unwrap();
        assert_eq!(path, dir.path().join("everything.json"));
        let loaded = Catalog::load(&path).unwrap().unwrap();
        assert_eq!(loaded, catalog);
        assert_eq!(loaded.tools[0].value()["x-extra"]["kept"], true);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "catalog is owner-only, mode {mode:o}");
        }
    }

    #[test]
    fn minimal_catalog_from_another_program_loads() {
        let text = r#"{"format": 1, "server": "x", "tools": [{"name": "a", "inputSchema": {"type": "object"}}, {"bad": 1}]}"#;
        let catalog = Catalog::parse(Path::new("x.json"), text).unwrap();
        let tools = catalog.tool_defs();
        assert_eq!(tools.len(), 1, "the malformed tool is skipped");
        assert_eq!(tools[0].name, "a");
    }

    #[test]
    fn newer_format_is_a_clear_error() {
        let text = r#"{"format": 2, "server": "x", "tools": [], "somethingNew": {}}"#;
        let err = Catalog::parse(Path::new("/c/x.json"), text).unwrap_err();
        assert!(matches!(err, CatalogError::NewerFormat { found: 2, .. }));
        let msg = err.to_string();
        assert!(
            msg.contains("/c/x.json") && msg.contains("upgrade"),
            "{msg}"
        );
    }

    #[test]
    fn broken_catalogs_are_errors_not_panics() {
        for text in [
            "",
            "{",
            "[]",
            r#"{"server": "x", "tools": []}"#,
            r#"{"format": "1", "server": "x", "tools": []}"#,
            r#"{"format": 1, "tools": []}"#,
            r#"{"format": 0, "server": "x", "tools": []}"#,
        ] {
            let err = Catalog::parse(Path::new("c.json"), text).unwrap_err();
            assert!(
                matches!(err, CatalogError::Invalid { .. }),
                "{text}: {err:?}"
            );
        }
    }

    #[test]
    fn a_newer_catalog_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let newer = r#"{"format": 3, "server": "everything", "tools": []}"#;
        std::fs::write(dir.path().join("everything.json"), newer).unwrap();
        assert!(matches!(
            sample().write(dir.path()),
            Err(CatalogError::NewerFormat { found: 3, .. })
        ));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("everything.json")).unwrap(),
            newer
        );
    }

    #[test]
    fn an_unusable_catalog_is_kept_aside_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("everything.json");
        let broken = r#"{"format": 1, "server": "everything", "tools": [{"na"#;
        std::fs::write(&path, broken).unwrap();
        sample().write(dir.path()).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[0], "everything.json");
        assert!(names[1].starts_with("everything.json.bad-20"), "{names:?}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(&names[1])).unwrap(),
            broken
        );
        assert_eq!(Catalog::load(&path).unwrap().unwrap(), sample());
    }

    #[test]
    fn a_catalog_naming_another_server_is_not_taken_for_this_one() {
        let dir = tempfile::tempdir().unwrap();
        let other = r#"{"format": 1, "server": "time", "tools": []}"#;
        std::fs::write(dir.path().join("everything.json"), other).unwrap();
        let err = Catalog::load_server(dir.path(), "everything").unwrap_err();
        assert!(
            matches!(&err, CatalogError::WrongServer { found, .. } if found == "time"),
            "{err:?}"
        );
        assert!(err.to_string().contains("skipped"), "{err}");
        assert!(
            Catalog::load_server(dir.path(), "nothing")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn missing_file_is_none() {
        assert!(
            Catalog::load(Path::new("/nonexistent/x.json"))
                .unwrap()
                .is_none()
        );
    }
}
