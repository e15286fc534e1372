//! JSON and JSONC client files (Claude Desktop, Claude Code, Cursor, VS Code, and meta-server's
//! own config): reading the servers section, and splicing a new one into the original text so
//! every other byte stays as it was. JSONC is read with `jsonc-parser`, whose syntax tree gives
//! the section's place in the text.

use std::ops::Range;
use std::path::Path;

use jsonc_parser::common::Ranged;
use jsonc_parser::{CollectOptions, ast};
use serde_json::{Map, Value};

use super::{ClientError, Imported};
use crate::config::jsonc;

/// `text` without the byte order mark editors on Windows start files with, and that mark's
/// length in bytes.
fn without_bom(text: &str) -> (&str, usize) {
    match text.strip_prefix('\u{feff}') {
        Some(rest) => (rest, text.len() - rest.len()),
        None => (text, 0),
    }
}

/// Parses `text` as JSON, allowing the comments and trailing commas VS Code accepts.
pub(super) fn parse(path: &Path, text: &str) -> Result<Value, ClientError> {
    let (text, _) = without_bom(text);
    jsonc_parser::parse_to_serde_value(text, &jsonc()).map_err(|e| ClientError::Syntax {
        path: path.to_owned(),
        format: "JSON",
        line: e.line_display(),
        column: e.column_display(),
        message: e.kind().to_string(),
    })
}

/// [`parse`], for a file whose top level must be an object.
pub(super) fn parse_object(
    path: &Path,
    text: &str,
) -> Result<serde_json::Map<String, Value>, ClientError> {
    match parse(path, text)? {
        Value::Object(root) => Ok(root),
        _ => Err(ClientError::Invalid {
            path: path.to_owned(),
            location: "the top level".into(),
            message: "must be an object".into(),
        }),
    }
}

/// The key of `root`'s servers section: `mcpServers`, or VS Code's `servers` when only it is
/// there.
pub(super) fn servers_key(root: &serde_json::Map<String, Value>) -> &'static str {
    if !root.contains_key("mcpServers") && root.contains_key("servers") {
        "servers"
    } else {
        "mcpServers"
    }
}

/// The servers under `section`, in file order, in meta-server's entry shape.
pub(super) fn servers(
    path: &Path,
    text: &str,
    section: &str,
) -> Result<Vec<Imported>, ClientError> {
    let root = parse(path, text)?;
    let Value::Object(root) = root else {
        return Err(invalid(path, "the top level", "must be an object"));
    };
    let servers = match root.get(section) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(servers)) => servers,
        Some(_) => {
            return Err(invalid(
                path,
                &format!("\"{section}\""),
                "must be an object mapping server names to entries",
            ));
        }
    };
    servers
        .iter()
        .map(|(name, entry)| {
            if !entry.is_object() {
                return Err(invalid(
                    path,
                    &format!("{section}.\"{name}\""),
                    "must be an object",
                ));
            }
            let mut notes = Vec::new();
            let entry = rewrite_variables(entry, &mut notes);
            notes.dedup();
            Ok(Imported {
                name: name.clone(),
                entry,
                notes,
            })
        })
        .collect()
}

fn invalid(path: &Path, location: &str, message: &str) -> ClientError {
    ClientError::Invalid {
        path: path.to_owned(),
        location: location.to_owned(),
        message: message.to_owned(),
    }
}

/// Turns the clients' variable syntax into meta-server's: `${env:VAR}` (VS Code, Cursor) becomes
/// `${VAR}`, `${userHome}` becomes `${HOME}`; variables only the client knows are noted.
fn rewrite_variables(value: &Value, notes: &mut Vec<String>) -> Value {
    match value {
        Value::String(s) => {
            let s = s.replace("${env:", "${").replace("${userHome}", "${HOME}");
            for client_only in ["${input:", "${workspaceFolder", "${config:", "${command:"] {
                if s.contains(client_only) {
                    notes.push(format!(
                        "uses {client_only}...}}, which only the client can fill in; replace it in meta-server's config"
                    ));
                }
            }
            Value::String(s)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| rewrite_variables(v, notes)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), rewrite_variables(v, notes)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `text` with the value of the top-level `section` replaced by `servers`; all other bytes are
/// kept. Without such a key, the document is re-serialized with the section added at the end.
pub(super) fn replace_section(
    path: &Path,
    text: &str,
    section: &str,
    servers: &Value,
) -> Result<String, ClientError> {
    let root = parse(path, text)?;
    if let Some(span) = section_span(text, section) {
        let indent = line_indent(text, span.start);
        let rendered = pretty(servers, &indent).replace('\n', &format!("\n{indent}"));
        let mut out = String::with_capacity(text.len() + rendered.len());
        out.push_str(&text[..span.start]);
        out.push_str(&rendered);
        out.push_str(&text[span.end..]);
        return Ok(out);
    }
    let mut root = match root {
        Value::Object(root) => root,
        _ => Map::new(),
    };
    root.insert(section.to_owned(), servers.clone());
    let mut out = pretty(&Value::Object(root), "  ");
    if text.ends_with('\n') || text.trim().is_empty() {
        out.push('\n');
    }
    Ok(out)
}

/// `text` with `entry` as the server `name` of the top-level `section`: in the place of an
/// entry of that name, else after the last one (the section is made when missing). Every other
/// byte is kept, comments and trailing commas included; the entry is written in the file's own
/// indentation.
pub(super) fn set_entry(
    path: &Path,
    text: &str,
    section: &str,
    name: &str,
    entry: &Value,
) -> Result<String, ClientError> {
    let (plain, bom) = without_bom(text);
    let root = cst(path, plain)?;
    let Some(top) = root.object_value() else {
        return Err(invalid(path, "the top level", "must be an object"));
    };
    let Some(servers) = top.object_value_or_create(section) else {
        return Err(invalid(
            path,
            &format!("\"{section}\""),
            "must be an object mapping server names to entries",
        ));
    };
    match servers.get(name) {
        Some(prop) => prop.set_value(input(entry)),
        None => {
            servers.append(name, input(entry));
        }
    }
    Ok(format!("{}{}", &text[..bom], root))
}

/// `text` without the server `name` of the top-level `section` (its comma too; comments around
/// it stay), every other byte kept; `None` when there is no such entry.
pub(super) fn remove_entry(
    path: &Path,
    text: &str,
    section: &str,
    name: &str,
) -> Result<Option<String>, ClientError> {
    let (plain, bom) = without_bom(text);
    let root = cst(path, plain)?;
    let Some(prop) = root
        .object_value()
        .and_then(|top| top.object_value(section))
        .and_then(|servers| servers.get(name))
    else {
        return Ok(None);
    };
    prop.remove();
    Ok(Some(format!("{}{}", &text[..bom], root)))
}

/// The concrete syntax tree of `text` (without its byte order mark): every byte of it, to edit.
fn cst(path: &Path, text: &str) -> Result<jsonc_parser::cst::CstRootNode, ClientError> {
    jsonc_parser::cst::CstRootNode::parse(text, &jsonc()).map_err(|e| ClientError::Syntax {
        path: path.to_owned(),
        format: "JSON",
        line: e.line_display(),
        column: e.column_display(),
        message: e.kind().to_string(),
    })
}

/// A JSON value as the syntax tree takes it (numbers as written by serde).
fn input(value: &Value) -> jsonc_parser::cst::CstInputValue {
    use jsonc_parser::cst::CstInputValue as In;
    match value {
        Value::Null => In::Null,
        Value::Bool(b) => In::Bool(*b),
        Value::Number(n) => In::Number(n.to_string()),
        Value::String(s) => In::String(s.clone()),
        Value::Array(items) => In::Array(items.iter().map(input).collect()),
        Value::Object(map) => In::Object(map.iter().map(|(k, v)| (k.clone(), input(v))).collect()),
    }
}

/// Pretty JSON with the given indent unit.
fn pretty(value: &Value, indent: &str) -> String {
    use serde::Serialize;
    let unit = if indent.is_empty() { "  " } else { indent };
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    value
        .serialize(&mut ser)
        .expect("a JSON value always serializes");
    String::from_utf8(buf).expect("serde_json writes UTF-8")
}

/// The whitespace that starts the line holding byte `at` (the indent of a top-level key).
fn line_indent(text: &str, at: usize) -> String {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// The byte range of the value of `key` in the top-level object of `text` (parsed already).
fn section_span(text: &str, key: &str) -> Option<Range<usize>> {
    let (plain, bom) = without_bom(text);
    let parsed = jsonc_parser::parse_to_ast(plain, &CollectOptions::default(), &jsonc()).ok()?;
    let Some(ast::Value::Object(root)) = parsed.value else {
        return None;
    };
    let value = &root
        .properties
        .iter()
        .find(|p| p.name.as_str() == key)?
        .value;
    let range = value.range();
    Some(range.start + bom..range.end + bom)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const P: &str = "/x/mcp.json";

    #[test]
    fn comments_and_trailing_commas_are_read_and_nothing_looser() {
        let text =
            "{\n  // note: \"x\"\n  \"a\": [1, 2,], /* c,} */ \"b\": \"//not a comment\",\n}";
        let v = parse(Path::new(P), text).unwrap();
        assert_eq!(v, json!({"a": [1, 2], "b": "//not a comment"}));
        assert!(parse(Path::new(P), "{'a': 1}").is_err());
        assert!(parse(Path::new(P), "{a: 0x1}").is_err());
    }

    #[test]
    fn the_section_after_comments_and_commas_is_spliced() {
        let text = "{\n  // \"mcpServers\": {}\n  \"a\": [1,],\n  /* } */ \"mcpServers\": {\"x\": {},}, // end\n}\n";
        let out = replace_section(Path::new(P), text, "mcpServers", &json!({})).unwrap();
        assert_eq!(
            out,
            "{\n  // \"mcpServers\": {}\n  \"a\": [1,],\n  /* } */ \"mcpServers\": {}, // end\n}\n"
        );
    }

    #[test]
    fn section_is_spliced_and_everything_else_kept() {
        let text = "{\n  \"numStartups\": 3,\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n  },\n  \"tail\": [1,2]\n}\n";
        let out = replace_section(
            Path::new(P),
            text,
            "mcpServers",
            &json!({"m": {"command": "/bin/m"}}),
        )
        .unwrap();
        assert_eq!(
            out,
            "{\n  \"numStartups\": 3,\n  \"mcpServers\": {\n    \"m\": {\n      \"command\": \"/bin/m\"\n    }\n  },\n  \"tail\": [1,2]\n}\n"
        );
    }

    #[test]
    fn a_byte_order_mark_is_read_and_kept() {
        let text = "\u{feff}{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}\n";
        let found = servers(Path::new(P), text, "mcpServers").unwrap();
        assert_eq!(found[0].name, "a");
        let out = replace_section(Path::new(P), text, "mcpServers", &json!({})).unwrap();
        assert_eq!(out, "\u{feff}{\"mcpServers\": {}}\n");
    }

    #[test]
    fn nested_key_of_the_same_name_is_not_the_section() {
        let text =
            r#"{"projects": {"/p": {"mcpServers": {"inner": {}}}}, "mcpServers": {"outer": {}}}"#;
        let span = section_span(text, "mcpServers").unwrap();
        assert_eq!(&text[span], r#"{"outer": {}}"#);
    }

    #[test]
    fn missing_section_is_added() {
        let out = replace_section(
            Path::new(P),
            "{\"theme\": \"dark\"}\n",
            "mcpServers",
            &json!({}),
        )
        .unwrap();
        assert_eq!(out, "{\n  \"theme\": \"dark\",\n  \"mcpServers\": {}\n}\n");
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let err = servers(
            Path::new(P),
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\" \"x\"}\n}}",
            "mcpServers",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(P) && err.contains("line 3, column"), "{err}");
    }

    #[test]
    fn an_entry_is_added_and_removed_and_every_other_byte_kept() {
        let text = "\u{feff}{\n  // my servers\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}, // the first\n    /* b is next */\n    \"b\": {\"url\": \"http://h/mcp\"},\n  },\n  \"other\": [1,],\n}\n";
        let entry = json!({"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}});
        let added = set_entry(Path::new(P), text, "mcpServers", "c", &entry).unwrap();
        assert_eq!(
            added,
            "\u{feff}{\n  // my servers\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}, // the first\n    /* b is next */\n    \"b\": {\"url\": \"http://h/mcp\"},\n    \"c\": {\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"srv\"],\n      \"env\": {\n        \"K\": \"v\",\n      },\n    },\n  },\n  \"other\": [1,],\n}\n",
            "in the file's own style: its indent, its trailing commas"
        );
        assert_eq!(
            parse(Path::new(P), &added).unwrap()["mcpServers"]["c"],
            entry
        );
        let removed = remove_entry(Path::new(P), &added, "mcpServers", "c")
            .unwrap()
            .unwrap();
        assert_eq!(removed, text, "adding then removing gives back the bytes");
        let replaced = set_entry(
            Path::new(P),
            text,
            "mcpServers",
            "a",
            &json!({"command": "y"}),
        )
        .unwrap();
        assert_eq!(
            replaced,
            text.replace("{\"command\": \"x\"}", "{\n      \"command\": \"y\"\n    }"),
            "replaced in its place, its comment kept"
        );
        assert_eq!(
            remove_entry(Path::new(P), text, "mcpServers", "zz").unwrap(),
            None
        );
    }

    #[test]
    fn a_missing_section_is_made_and_a_wrong_one_refused() {
        let out = set_entry(
            Path::new(P),
            "{\"metaServer\": {}}",
            "mcpServers",
            "a",
            &json!({"command": "x"}),
        )
        .unwrap();
        assert_eq!(
            parse(Path::new(P), &out).unwrap(),
            json!({"metaServer": {}, "mcpServers": {"a": {"command": "x"}}})
        );
        let err = set_entry(
            Path::new(P),
            "{\"mcpServers\": []}",
            "mcpServers",
            "a",
            &json!({}),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("mcpServers"), "{err}");
    }

    #[test]
    fn client_variables_become_meta_server_variables() {
        let text = r#"{"servers": {"s": {"command": "x", "env": {"T": "${env:TOKEN}", "H": "${userHome}/d"}, "args": ["${input:key}"]}}}"#;
        let s = servers(Path::new(P), text, "servers").unwrap();
        assert_eq!(
            s[0].entry["env"],
            json!({"T": "${TOKEN}", "H": "${HOME}/d"})
        );
        assert_eq!(s[0].notes.len(), 1);
        assert!(s[0].notes[0].contains("${input:"), "{:?}", s[0].notes);
    }
}
