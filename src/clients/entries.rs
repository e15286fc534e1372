//! meta-server's own config edited one server at a time (`add`, `remove`): the entry spliced
//! into the JSONC text, every other byte kept, and the result checked before anything is written.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::json::{parse_object, remove_entry, servers_key, set_entry};
use super::{ClientError, is_meta_server};
use crate::config::{Settings, server_identifier};

/// What a new config file holds before its first server.
const NEW_CONFIG: &str = "{\n  \"mcpServers\": {}\n}\n";

/// One server written into or taken out of meta-server's config.
#[derive(Debug, Clone)]
pub struct Edit {
    /// meta-server's config file.
    pub path: PathBuf,
    /// The server's key in the file.
    pub key: String,
    /// The entry it replaced or removed, if there was one.
    pub previous: Option<Value>,
    /// The new text of the file.
    pub after: String,
    /// The settings of the new text (checked).
    pub settings: Settings,
}

/// The config at `path` (text `before`, `None` if it does not exist yet) with `entry` as the
/// server `key`. A key that exists is refused unless `replace`. The result must load and serve
/// the new server; if not, the reason is the error and nothing changes.
pub fn add_server(
    path: &Path,
    before: Option<&str>,
    key: &str,
    entry: &Value,
    replace: bool,
) -> Result<Edit, ClientError> {
    let before = before
        .filter(|t| !t.trim().is_empty())
        .unwrap_or(NEW_CONFIG);
    let refused = |reason: String| ClientError::Refused {
        key: key.to_owned(),
        reason,
    };
    server_identifier(key).map_err(|e| refused(e.to_string()))?;
    if is_meta_server(entry) {
        return Err(refused(
            "it runs meta-server itself, which would then front itself".into(),
        ));
    }
    Settings::parse(path, before).map_err(ClientError::Broken)?;
    let (section, servers) = servers(path, before)?;
    let previous = servers.get(key).cloned();
    if previous.is_some() && !replace {
        return Err(ClientError::Exists {
            key: key.to_owned(),
            path: path.to_owned(),
        });
    }
    let after = set_entry(path, before, section, key, entry)?;
    let settings = Settings::parse(path, &after).map_err(|e| refused(e.to_string()))?;
    if let Some(skipped) = settings.skipped.iter().find(|s| s.key == key) {
        return Err(refused(skipped.reason.clone()));
    }
    Ok(Edit {
        path: path.to_owned(),
        key: key.to_owned(),
        previous,
        after,
        settings,
    })
}

/// The config at `path` (text `before`) without the server `name` (its key, or the identifier
/// its tools are qualified with). The result must still load.
pub fn remove_server(path: &Path, before: &str, name: &str) -> Result<Edit, ClientError> {
    let (section, servers) = servers(path, before)?;
    let key = servers
        .keys()
        .find(|k| *k == name)
        .or_else(|| {
            servers
                .keys()
                .find(|k| server_identifier(k).is_ok_and(|id| id == name))
        })
        .cloned()
        .ok_or_else(|| ClientError::UnknownServer {
            name: name.to_owned(),
            path: path.to_owned(),
            configured: servers.keys().cloned().collect::<Vec<_>>().join(", "),
        })?;
    let after = remove_entry(path, before, section, &key)?.ok_or_else(|| ClientError::Invalid {
        path: path.to_owned(),
        location: format!("{section}.\"{key}\""),
        message: "could not be removed from the text".into(),
    })?;
    let settings = Settings::parse(path, &after).map_err(|e| ClientError::Refused {
        key: key.clone(),
        reason: format!("the config would not load without it: {e}"),
    })?;
    Ok(Edit {
        path: path.to_owned(),
        previous: servers.get(&key).cloned(),
        key,
        after,
        settings,
    })
}

/// The servers section of `text` (`mcpServers`, or VS Code's `servers` when only it is there)
/// and its entries.
fn servers(
    path: &Path,
    text: &str,
) -> Result<(&'static str, serde_json::Map<String, Value>), ClientError> {
    let mut root = parse_object(path, text)?;
    let section = servers_key(&root);
    match root.remove(section) {
        None | Some(Value::Null) => Ok((section, serde_json::Map::new())),
        Some(Value::Object(servers)) => Ok((section, servers)),
        Some(_) => Err(ClientError::Invalid {
            path: path.to_owned(),
            location: format!("\"{section}\""),
            message: "must be an object mapping server names to entries".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const P: &str = "/cfg/config.json";

    #[test]
    fn a_server_is_added_to_a_new_file_and_to_a_commented_one() {
        let edit = add_server(Path::new(P), None, "time", &json!({"command": "t"}), false).unwrap();
        assert_eq!(
            edit.after,
            "{\n  \"mcpServers\": {\n    \"time\": {\n      \"command\": \"t\"\n    }\n  }\n}\n"
        );
        assert_eq!(edit.settings.servers[0].name, "time");
        let text = "// mine\n{\"metaServer\": {\"trust\": \"off\"}, /* x */ \"mcpServers\": {\"a\": {\"command\": \"a\"},},}\n";
        let edit = add_server(
            Path::new(P),
            Some(text),
            "b",
            &json!({"url": "http://h/mcp"}),
            false,
        )
        .unwrap();
        assert!(
            edit.after.starts_with(
                "// mine\n{\"metaServer\": {\"trust\": \"off\"}, /* x */ \"mcpServers\": {"
            ),
            "{}",
            edit.after
        );
        assert_eq!(edit.settings.servers.len(), 2);
    }

    #[test]
    fn an_existing_name_is_refused_unless_replaced() {
        let text = r#"{"mcpServers": {"a": {"command": "old"}}}"#;
        let err = add_server(
            Path::new(P),
            Some(text),
            "a",
            &json!({"command": "new"}),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("\"a\"") && err.contains("--force"), "{err}");
        let edit = add_server(
            Path::new(P),
            Some(text),
            "a",
            &json!({"command": "new"}),
            true,
        )
        .unwrap();
        assert_eq!(edit.previous, Some(json!({"command": "old"})));
        assert!(matches!(&edit.settings.servers[0].transport,
            crate::config::TransportConfig::Stdio { command, .. } if command == "new"));
    }

    #[test]
    fn a_bad_name_or_entry_is_refused_with_the_reason_and_nothing_written() {
        let text = r#"{"mcpServers": {"My Server": {"command": "x"}}}"#;
        for (key, entry, says) in [
            ("a__b", json!({"command": "x"}), "__"),
            ("meta", json!({"command": "x"}), "reserved"),
            ("My-Server", json!({"command": "x"}), "same name"),
            (
                "w",
                json!({"type": "websocket", "url": "ws://x"}),
                "websocket",
            ),
            (
                "m",
                json!({"command": "/usr/bin/meta-server", "args": ["serve"]}),
                "meta-server itself",
            ),
        ] {
            let err = add_server(Path::new(P), Some(text), key, &entry, false)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{key}: {err}");
        }
        let err = add_server(
            Path::new(P),
            Some("{\"mcpServers\": [}"),
            "a",
            &json!({"command": "x"}),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("does not load"), "{err}");
    }

    #[test]
    fn a_server_is_removed_by_key_or_identifier() {
        let text = "{\n  \"mcpServers\": {\n    // first\n    \"My Server\": {\"command\": \"x\"},\n    \"b\": {\"command\": \"y\"}\n  }\n}\n";
        let edit = remove_server(Path::new(P), text, "My-Server").unwrap();
        assert_eq!(edit.key, "My Server");
        assert_eq!(
            edit.after,
            "{\n  \"mcpServers\": {\n    // first\n    \"b\": {\"command\": \"y\"}\n  }\n}\n"
        );
        let err = remove_server(Path::new(P), text, "c")
            .unwrap_err()
            .to_string();
        assert!(err.contains("My Server, b"), "{err}");
    }

    #[test]
    fn a_removal_that_breaks_the_config_is_refused() {
        let text = r#"{"metaServer": {"http": {"tokens": [{"name": "ci", "token": "${T}", "servers": ["a"]}]}}, "mcpServers": {"a": {"command": "x"}}}"#;
        let err = remove_server(Path::new(P), text, "a")
            .unwrap_err()
            .to_string();
        assert!(err.contains("would not load without it"), "{err}");
    }
}
