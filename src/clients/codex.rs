//! Codex's `config.toml`: `[mcp_servers.<name>]` tables with `command`/`args`/`env`/`cwd`, or
//! `url` with `http_headers`, `env_http_headers` and `bearer_token_env_var` for remote servers.
//! Edited with toml_edit, so comments and all other tables stay as they were.

use std::path::Path;

use serde_json::{Map, Value, json};
use toml_edit::{Array, DocumentMut, Item, Table, TableLike};

use super::{ClientError, ENTRY_NAME, Imported, MetaEntry, line_column};

fn parse(path: &Path, text: &str) -> Result<DocumentMut, ClientError> {
    text.parse::<DocumentMut>().map_err(|e| {
        let (line, column) = line_column(text, e.span().map_or(0, |s| s.start));
        ClientError::Syntax {
            path: path.to_owned(),
            format: "TOML",
            line,
            column,
            message: e.message().trim().to_owned(),
        }
    })
}

/// The `[mcp_servers.*]` entries, in file order, in meta-server's entry shape.
pub(super) fn servers(path: &Path, text: &str) -> Result<Vec<Imported>, ClientError> {
    let doc = parse(path, text)?;
    let Some(section) = doc.get("mcp_servers") else {
        return Ok(Vec::new());
    };
    let section = section
        .as_table_like()
        .ok_or_else(|| invalid(path, "mcp_servers".into(), "must be a table"))?;
    section
        .iter()
        .map(|(name, item)| {
            let at = format!("mcp_servers.{name}");
            let table = item
                .as_table_like()
                .ok_or_else(|| invalid(path, at.clone(), "must be a table"))?;
            convert(path, &at, table).map(|(entry, notes)| Imported {
                name: name.to_owned(),
                entry,
                notes,
            })
        })
        .collect()
}

fn invalid(path: &Path, location: String, message: &str) -> ClientError {
    ClientError::Invalid {
        path: path.to_owned(),
        location,
        message: message.to_owned(),
    }
}

/// One Codex server table as a meta-server entry, plus notes on what did not carry over.
fn convert(
    path: &Path,
    at: &str,
    table: &dyn TableLike,
) -> Result<(Value, Vec<String>), ClientError> {
    let string = |key: &str| -> Result<Option<String>, ClientError> {
        match table.get(key) {
            None => Ok(None),
            Some(item) => item
                .as_str()
                .map(|s| Some(s.to_owned()))
                .ok_or_else(|| invalid(path, format!("{at}.{key}"), "must be a string")),
        }
    };
    let strings = |key: &str| -> Result<Option<Vec<String>>, ClientError> {
        let Some(item) = table.get(key) else {
            return Ok(None);
        };
        let bad = || invalid(path, format!("{at}.{key}"), "must be an array of strings");
        let array = item.as_array().ok_or_else(bad)?;
        array
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    };
    let string_map = |key: &str| -> Result<Map<String, Value>, ClientError> {
        let Some(item) = table.get(key) else {
            return Ok(Map::new());
        };
        let bad = || invalid(path, format!("{at}.{key}"), "must be a table of strings");
        let map = item.as_table_like().ok_or_else(bad)?;
        map.iter()
            .map(|(k, v)| Ok((k.to_owned(), json!(v.as_str().ok_or_else(bad)?))))
            .collect()
    };

    let mut entry = Map::new();
    let mut notes = Vec::new();
    if let Some(command) = string("command")? {
        entry.insert("command".into(), json!(command));
    }
    if let Some(args) = strings("args")? {
        entry.insert("args".into(), json!(args));
    }
    let env = string_map("env")?;
    if !env.is_empty() {
        entry.insert("env".into(), Value::Object(env));
    }
    if let Some(cwd) = string("cwd")? {
        entry.insert("cwd".into(), json!(cwd));
    }
    if let Some(url) = string("url")? {
        entry.insert("url".into(), json!(url));
        let mut headers = string_map("http_headers")?;
        for (name, var) in string_map("env_http_headers")? {
            let var = var.as_str().unwrap_or_default();
            headers.insert(name, json!(format!("${{{var}}}")));
        }
        if let Some(var) = string("bearer_token_env_var")? {
            headers.insert("Authorization".into(), json!(format!("Bearer ${{{var}}}")));
        }
        if !headers.is_empty() {
            entry.insert("headers".into(), Value::Object(headers));
        }
    }
    if table.get("enabled").and_then(Item::as_bool) == Some(false) {
        entry.insert("disabled".into(), json!(true));
    }
    if let Some(tools) = strings("enabled_tools")? {
        entry.insert("allowTools".into(), json!(tools));
    }
    if let Some(tools) = strings("disabled_tools")? {
        entry.insert("denyTools".into(), json!(tools));
    }
    let timeout = table
        .get("tool_timeout_sec")
        .and_then(|i| i.as_float().or_else(|| i.as_integer().map(|n| n as f64)));
    if let Some(secs) = timeout.filter(|s| *s > 0.0) {
        entry.insert("timeoutSecs".into(), json!(secs.ceil() as u64));
    }
    const TAKEN: &[&str] = &[
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "http_headers",
        "env_http_headers",
        "bearer_token_env_var",
        "enabled",
        "enabled_tools",
        "disabled_tools",
        "tool_timeout_sec",
    ];
    for (key, _) in table.iter() {
        if key == "env_vars" {
            notes.push("env_vars is not needed: servers inherit meta-server's environment".into());
        } else if !TAKEN.contains(&key) {
            notes.push(format!(
                "{key} has no meta-server equivalent and was left out"
            ));
        }
    }
    Ok((Value::Object(entry), notes))
}

/// The text with every `mcp_servers` entry removed and one `[mcp_servers.meta-server]` table
/// added where the first server was.
pub(super) fn with_only(
    path: &Path,
    text: &str,
    entry: &MetaEntry,
    keep: &[String],
) -> Result<String, ClientError> {
    let mut doc = parse(path, text)?;
    let kept: Vec<(String, Item)> = keep
        .iter()
        .filter_map(|name| {
            let item = doc.get("mcp_servers")?.as_table_like()?.get(name)?;
            Some((name.clone(), item.clone()))
        })
        .collect();
    let position = doc.get("mcp_servers").and_then(|item| {
        let table = item.as_table()?;
        if !table.is_implicit() {
            return table.position();
        }
        table
            .iter()
            .filter_map(|(_, t)| t.as_table().and_then(Table::position))
            .min()
    });
    let mut meta = Table::new();
    meta.insert("command", toml_edit::value(entry.command.as_str()));
    meta.insert(
        "args",
        toml_edit::value(entry.args.iter().map(String::as_str).collect::<Array>()),
    );
    meta.set_position(position);
    let mut servers = Table::new();
    servers.set_implicit(true);
    servers.insert(ENTRY_NAME, Item::Table(meta));
    for (name, item) in kept {
        servers.insert(&name, item);
    }
    doc.insert("mcp_servers", Item::Table(servers));
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Client;

    const FIXTURE: &str = include_str!("../../tests/fixtures/clients/codex_config.toml");

    fn read() -> Vec<Imported> {
        servers(Path::new("/h/.codex/config.toml"), FIXTURE).unwrap()
    }

    #[test]
    fn stdio_servers_with_env_subtables() {
        let s = read();
        let names: Vec<_> = s.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["filesystem", "github", "figma", "linear", "docs"]);
        assert_eq!(
            s[0].entry,
            json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/src"]})
        );
        assert_eq!(
            s[1].entry["env"],
            json!({"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"})
        );
        assert_eq!(s[1].entry["timeoutSecs"], 90);
        assert_eq!(s[1].entry["denyTools"], json!(["delete_repository"]));
        assert!(
            s[1].notes.iter().any(|n| n.contains("env_vars")),
            "{:?}",
            s[1].notes
        );
        assert!(
            s[1].notes.iter().any(|n| n.contains("startup_timeout_sec")),
            "{:?}",
            s[1].notes
        );
    }

    #[test]
    fn remote_servers_get_headers_from_tokens_and_env() {
        let s = read();
        assert_eq!(
            s[2].entry,
            json!({"url": "https://mcp.figma.com/mcp", "headers": {"X-Figma-Region": "eu", "Authorization": "Bearer ${FIGMA_TOKEN}"}})
        );
        assert_eq!(
            s[3].entry["headers"],
            json!({"X-Workspace": "${LINEAR_WORKSPACE}"})
        );
        assert_eq!(s[4].entry["disabled"], true);
    }

    #[test]
    fn install_keeps_everything_but_the_servers() {
        let entry = MetaEntry::new(
            Client::Codex,
            Path::new("/bin/meta-server"),
            Path::new("/c/config.json"),
        );
        let out = with_only(Path::new("/c.toml"), FIXTURE, &entry, &[]).unwrap();
        let doc: DocumentMut = out.parse().unwrap();
        let servers = doc["mcp_servers"].as_table().unwrap();
        assert_eq!(servers.len(), 1);
        assert_eq!(
            doc["mcp_servers"][ENTRY_NAME]["command"].as_str(),
            Some("/bin/meta-server")
        );
        assert!(
            out.starts_with(FIXTURE.split("[mcp_servers").next().unwrap()),
            "{out}"
        );
        assert!(
            out.contains("[profiles.fast]\nmodel = \"gpt-5-mini\"\n"),
            "{out}"
        );
        assert!(
            out.contains("[mcp_servers.meta-server]\ncommand = \"/bin/meta-server\"\nargs = [\"--config\", \"/c/config.json\", \"serve\"]\n"),
            "{out}"
        );
        assert!(
            !out.contains("GITHUB_TOKEN") && !out.contains("figma"),
            "{out}"
        );
        // The new table sits where the servers were: before the profile that followed them.
        assert!(
            out.find("[mcp_servers.meta-server]") < out.find("[profiles.fast]"),
            "{out}"
        );
    }

    #[test]
    fn servers_to_keep_keep_their_tables() {
        let entry = MetaEntry::new(Client::Codex, Path::new("/m"), Path::new("/c"));
        let out = with_only(Path::new("/c.toml"), FIXTURE, &entry, &["figma".into()]).unwrap();
        let doc: DocumentMut = out.parse().unwrap();
        let names: Vec<&str> = doc["mcp_servers"]
            .as_table()
            .unwrap()
            .iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(names, [ENTRY_NAME, "figma"]);
        let original: DocumentMut = FIXTURE.parse().unwrap();
        assert_eq!(
            doc["mcp_servers"]["figma"].to_string(),
            original["mcp_servers"]["figma"].to_string()
        );
    }

    #[test]
    fn a_file_without_servers_gets_the_entry_appended() {
        let entry = MetaEntry::new(Client::Codex, Path::new("/m"), Path::new("/c"));
        let out = with_only(Path::new("/c.toml"), "model = \"o3\"\n", &entry, &[]).unwrap();
        assert!(out.starts_with("model = \"o3\"\n"), "{out}");
        assert!(out.contains("[mcp_servers.meta-server]"), "{out}");
        assert!(
            servers(Path::new("/c.toml"), "model = \"o3\"\n")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn toml_errors_name_line_and_column() {
        let err = servers(
            Path::new("/c.toml"),
            "model = \"o3\"\n[mcp_servers.x]\ncommand = \n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("/c.toml") && err.contains("line 3, column"),
            "{err}"
        );
        let err = servers(Path::new("/c.toml"), "[mcp_servers.x]\nargs = \"a b\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("mcp_servers.x.args") && err.contains("array of strings"),
            "{err}"
        );
    }
}
