//! Merging imported servers into meta-server's own config: existing servers win, meta-server's
//! own entry is never imported, and the result must load.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::json::{parse_object, replace_section, servers_key};
use super::{ClientError, Imported, is_meta_server};
use crate::config::Settings;

/// The outcome of merging: the new text and what happened to each server.
#[derive(Debug, Clone, Default)]
pub struct Merge {
    /// meta-server's config file.
    pub path: PathBuf,
    /// Its text before, `None` if it did not exist.
    pub before: Option<String>,
    pub after: String,
    /// Servers added.
    pub added: Vec<String>,
    /// Servers meta-server's config already had: its entry was kept.
    pub existing: Vec<String>,
    /// Servers left out, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Servers meta-server cannot serve as they are, with the reason: not imported, and left
    /// in the client's file by `install`, so nothing is stranded.
    pub left: Vec<(String, String)>,
    /// Remarks on added servers (what did not carry over exactly).
    pub notes: Vec<(String, String)>,
}

impl Merge {
    /// Whether the config file changes.
    pub fn changed(&self) -> bool {
        self.before.as_deref() != Some(self.after.as_str())
    }
}

/// Adds `servers` to the config at `path` whose current text is `before`.
pub fn merge(
    path: &Path,
    before: Option<&str>,
    servers: &[Imported],
) -> Result<Merge, ClientError> {
    let blank = before.is_none_or(|t| t.trim().is_empty());
    let mut root = if blank {
        Map::new()
    } else {
        parse_object(path, before.unwrap_or_default())?
    };
    let section = servers_key(&root);
    let mut section_value = match root.remove(section) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err(ClientError::Invalid {
                path: path.to_owned(),
                location: format!("\"{section}\""),
                message: "must be an object mapping server names to entries".into(),
            });
        }
    };
    // The settings the section gives; a config that does not load at all is an error.
    let check = |servers: &Map<String, Value>| {
        let mut doc = root.clone();
        doc.insert(section.to_owned(), Value::Object(servers.clone()));
        Settings::parse(path, &Value::Object(doc).to_string())
    };
    // A config that does not load now would be blamed on the import.
    check(&section_value)?;

    let mut out = Merge {
        path: path.to_owned(),
        before: before.map(str::to_owned),
        ..Merge::default()
    };
    for server in servers {
        let name = server.name.clone();
        if is_meta_server(&server.entry) {
            out.skipped.push((name, "runs meta-server itself".into()));
            continue;
        }
        if section_value.contains_key(&name) {
            out.existing.push(name);
            continue;
        }
        section_value.insert(name.clone(), server.entry.clone());
        let settings = check(&section_value)?;
        if let Some(skipped) = settings.skipped.iter().find(|s| s.key == name) {
            section_value.remove(&name);
            out.left.push((name, skipped.reason.clone()));
            continue;
        }
        out.added.push(name.clone());
        out.notes
            .extend(server.notes.iter().map(|n| (name.clone(), n.clone())));
    }
    out.after = if blank {
        let mut doc = Map::new();
        doc.insert(section.to_owned(), Value::Object(section_value));
        let mut text = serde_json::to_string_pretty(&Value::Object(doc))
            .expect("a JSON value always serializes");
        text.push('\n');
        text
    } else {
        replace_section(
            path,
            before.unwrap_or_default(),
            section,
            &Value::Object(section_value),
        )?
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn imported(name: &str, entry: Value) -> Imported {
        Imported {
            name: name.into(),
            entry,
            notes: vec![],
        }
    }

    const P: &str = "/cfg/config.json";

    #[test]
    fn new_file_gets_every_server() {
        let m = merge(
            Path::new(P),
            None,
            &[imported(
                "time",
                json!({"command": "uvx", "args": ["mcp-server-time"]}),
            )],
        )
        .unwrap();
        assert_eq!(m.added, ["time"]);
        let v: Value = serde_json::from_str(&m.after).unwrap();
        assert_eq!(
            v,
            json!({"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}})
        );
        assert!(m.changed());
    }

    #[test]
    fn existing_servers_and_other_keys_are_kept() {
        let before = "{\n  \"metaServer\": {\"timeoutSecs\": 30},\n  \"mcpServers\": {\n    \"time\": {\"command\": \"mine\"}\n  }\n}\n";
        let m = merge(
            Path::new(P),
            Some(before),
            &[
                imported("time", json!({"command": "theirs"})),
                imported("memory", json!({"command": "npx"})),
                imported(
                    "meta-server",
                    json!({"command": "/x/meta-server", "args": ["serve"]}),
                ),
            ],
        )
        .unwrap();
        assert_eq!(m.added, ["memory"]);
        assert_eq!(m.existing, ["time"]);
        assert_eq!(m.skipped[0].0, "meta-server");
        assert!(
            m.after
                .starts_with("{\n  \"metaServer\": {\"timeoutSecs\": 30},\n"),
            "{}",
            m.after
        );
        let v: Value = serde_json::from_str(&m.after).unwrap();
        assert_eq!(v["mcpServers"]["time"]["command"], "mine");
        assert_eq!(v["mcpServers"]["memory"]["command"], "npx");
        assert!(v["mcpServers"].get("meta-server").is_none());
    }

    #[test]
    fn legacy_sse_servers_are_imported_and_unservable_ones_left_out() {
        let m = merge(
            Path::new(P),
            None,
            &[
                imported("old", json!({"type": "sse", "url": "http://x/sse"})),
                imported("ws", json!({"type": "websocket", "url": "ws://x"})),
            ],
        )
        .unwrap();
        assert_eq!(m.added, ["old"]);
        assert_eq!(m.left.len(), 1);
        assert_eq!(m.left[0].0, "ws");
        assert!(m.left[0].1.contains("websocket"), "{}", m.left[0].1);
        let v: Value = serde_json::from_str(&m.after).unwrap();
        assert!(v["mcpServers"].get("ws").is_none(), "not imported");
        let settings = Settings::parse(Path::new(P), &m.after).unwrap();
        assert!(settings.skipped.is_empty());
        assert_eq!(settings.servers[0].name, "old");
    }

    #[test]
    fn a_broken_config_is_reported_not_overwritten() {
        let err = merge(Path::new(P), Some("{\"mcpServers\": []}"), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("mcpServers") && err.contains(P), "{err}");
    }
}
