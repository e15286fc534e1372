//! JSON and JSONC client files (Claude Desktop, Claude Code, Cursor, VS Code, and meta-server's
//! own config): reading the servers section, and splicing a new one into the original text so
//! every other byte stays as it was.

use std::ops::Range;
use std::path::Path;

use serde_json::{Map, Value};

use super::{ClientError, Imported};

/// Parses `text` as JSON, allowing the comments and trailing commas VS Code accepts.
pub(super) fn parse(path: &Path, text: &str) -> Result<Value, ClientError> {
    let plain = strip_jsonc(text);
    serde_json::from_str(&plain).map_err(|e| ClientError::Syntax {
        path: path.to_owned(),
        format: "JSON",
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
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
    let plain = strip_jsonc(text);
    if let Some(span) = section_span(plain.as_bytes(), section) {
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

/// Blanks comments and trailing commas with spaces, so byte offsets (and line/column in
/// errors) stay those of the original text.
fn strip_jsonc(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    // Editors on Windows start files with a byte order mark: blanked like a comment.
    if text.starts_with('\u{feff}') {
        out[..3].fill(b' ');
    }
    let mut i = 0;
    let mut last_comma: Option<usize> = None;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = string_end(b, i).unwrap_or(b.len());
                last_comma = None;
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                for o in &mut out[i..end] {
                    if *o != b'\n' {
                        *o = b' ';
                    }
                }
                i = end;
                continue;
            }
            b',' => last_comma = Some(i),
            b'}' | b']' => {
                if let Some(c) = last_comma.take() {
                    out[c] = b' ';
                }
            }
            c if c.is_ascii_whitespace() => {}
            _ => last_comma = None,
        }
        i += 1;
    }
    // Only whole comments and a whole byte order mark were replaced by spaces: still UTF-8.
    String::from_utf8(out).expect("blanking whole characters keeps UTF-8")
}

/// The byte range of the value of `key` in the top-level object of valid JSON `s`.
fn section_span(s: &[u8], key: &str) -> Option<Range<usize>> {
    let mut i = skip_ws(s, 0);
    if s.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        i = skip_ws(s, i);
        match s.get(i)? {
            b',' => {
                i += 1;
                continue;
            }
            b'"' => {}
            _ => return None,
        }
        let key_end = string_end(s, i)?;
        let name = &s[i + 1..key_end - 1];
        i = skip_ws(s, key_end);
        if s.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(s, i + 1);
        let end = value_end(s, start)?;
        if name == key.as_bytes() {
            return Some(start..end);
        }
        i = end;
    }
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while s.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// Index just after the string starting at `start` (a `"`).
fn string_end(s: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// Index just after the value starting at `start`.
fn value_end(s: &[u8], start: usize) -> Option<usize> {
    match s.get(start)? {
        b'"' => string_end(s, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = start;
            while i < s.len() {
                match s[i] {
                    b'"' => {
                        i = string_end(s, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let mut i = start;
            while i < s.len() && !matches!(s[i], b',' | b'}' | b']') && !s[i].is_ascii_whitespace()
            {
                i += 1;
            }
            Some(i)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const P: &str = "/x/mcp.json";

    #[test]
    fn comments_and_trailing_commas_are_blanked_in_place() {
        let text =
            "{\n  // note: \"x\"\n  \"a\": [1, 2,], /* c,} */ \"b\": \"//not a comment\",\n}";
        let plain = strip_jsonc(text);
        assert_eq!(plain.len(), text.len());
        let v: Value = serde_json::from_str(&plain).unwrap();
        assert_eq!(v, json!({"a": [1, 2], "b": "//not a comment"}));
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
        let span = section_span(text.as_bytes(), "mcpServers").unwrap();
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
