//! A read view of one catalog tool: the fields search and the meta-tools need.

use std::fmt;
use std::sync::LazyLock;

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::RawTool;

/// One tool as found in a catalog. `raw` is the object exactly as stored, shared with the
/// catalog rather than copied; only the name and title are read from it up front, the rest
/// (the description too: at 100k tools ~25 MB) when asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub title: Option<String>,
    /// The tool object as stored, less hidden characters (see [`crate::hidden`]).
    pub raw: RawTool,
    /// Hidden characters removed from the tool's texts; a tool with any is flagged.
    pub hidden: usize,
}

/// The schema of a tool that declares none: no arguments.
static NO_ARGUMENTS: LazyLock<Map<String, Value>> =
    LazyLock::new(|| Map::from_iter([("type".to_owned(), Value::from("object"))]));

/// Why an entry of a catalog's `tools` is not a usable tool.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("a tool must be a JSON object")]
    NotObject,
    #[error("a tool has no \"name\"")]
    NoName,
    #[error("tool \"{0}\" has an inputSchema that is not an object")]
    Schema(String),
    #[error("tool \"{0}\" has invisible characters in its name")]
    HiddenName(String),
}

impl ToolDef {
    /// What the model should know before it trusts this tool's texts; empty for most tools.
    pub fn flags(&self) -> Vec<String> {
        let params = self.params();
        let description = self.description();
        let texts = [self.title.as_deref().unwrap_or_default(), &description]
            .into_iter()
            .chain(params.iter().map(|p| p.description.as_str()));
        super::screen::flags("this tool's texts", self.hidden, texts)
    }

    /// Reads a tool object; needs at least a string `name`, and an `inputSchema` that is an
    /// object if there is one. Reads only those fields of the text.
    pub fn from_json(raw: &RawTool) -> Result<Self, ToolError> {
        let (raw, hidden) = raw.cleaned();
        let text = raw.text();
        let [name, title, annotations, schema] =
            fields(&text, &["name", "title", "annotations", "inputSchema"])
                .ok_or(ToolError::NotObject)?;
        let name = string(name)
            .filter(|n| !n.is_empty())
            .ok_or(ToolError::NoName)?;
        if name.chars().any(crate::hidden::is_hidden) {
            return Err(ToolError::HiddenName(crate::hidden::strip(&name).0));
        }
        let title = match title {
            Some(title) => string(Some(title)),
            None => annotations
                .and_then(|a| fields(a.get(), &["title"]))
                .and_then(|[title]| string(title)),
        };
        if schema.is_some_and(|s| !s.get().starts_with(['{', 'n'])) {
            return Err(ToolError::Schema(name));
        }
        Ok(Self {
            name,
            title,
            raw: raw.clone(),
            hidden,
        })
    }

    /// The description; empty when the tool has none (or one that is no string). Read now.
    pub fn description(&self) -> String {
        let text = self.raw.text();
        let [description] = fields(&text, &["description"]).unwrap_or_default();
        string(description).unwrap_or_default()
    }

    /// The whole tool object, parsed now (not kept).
    pub fn value(&self) -> Value {
        self.raw.value()
    }

    /// The input schema; `{"type": "object"}` when the tool declares none. Parsed now.
    pub fn input_schema(&self) -> Map<String, Value> {
        let text = self.raw.text();
        let [schema] = fields(&text, &["inputSchema"]).unwrap_or_default();
        schema
            .and_then(|s| serde_json::from_str(s.get()).ok())
            .unwrap_or_else(|| NO_ARGUMENTS.clone())
    }

    /// The first line (or sentence) of the description, at most `max` characters.
    pub fn summary(&self, max: usize) -> String {
        let description = self.description();
        let text = description.trim();
        let line = text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        if line.chars().count() <= max {
            return line.to_owned();
        }
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{}…", cut.trim_end())
    }

    /// Top-level parameters in schema order: (name, type, required, default, description).
    pub fn params(&self) -> Vec<Param> {
        let schema = self.input_schema();
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        props
            .iter()
            .map(|(name, schema)| Param {
                name: name.clone(),
                kind: type_of(schema),
                required: required.contains(&name.as_str()),
                default: schema.get("default").map(Value::to_string),
                description: schema
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            })
            .collect()
    }

    /// A compact argument signature, e.g. `(path*: string, limit: integer = 10)`; `*` = required.
    pub fn signature(&self) -> String {
        let parts: Vec<String> = self
            .params()
            .iter()
            .map(|p| {
                let mut s = format!(
                    "{}{}: {}",
                    p.name,
                    if p.required { "*" } else { "" },
                    p.kind
                );
                if let Some(d) = &p.default {
                    s.push_str(" = ");
                    s.push_str(d);
                }
                s
            })
            .collect();
        format!("({})", parts.join(", "))
    }
}

/// One top-level parameter of a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub kind: String,
    pub required: bool,
    pub default: Option<String>,
    pub description: String,
}

/// The string a field holds; `None` for a missing field or one of another type.
fn string(field: Option<&RawValue>) -> Option<String> {
    field.and_then(|f| serde_json::from_str(f.get()).ok())
}

/// The `name` of a tool object's text, if it has a string one.
pub(super) fn name_of(text: &str) -> Option<String> {
    let [name] = fields(text, &["name"])?;
    string(name)
}

/// The text of each of `keys` in the JSON object `text` (the last of a repeated key, as a
/// parsed object keeps), without parsing the other fields; `None` if `text` is no object.
fn fields<'a, const N: usize>(
    text: &'a str,
    keys: &[&str; N],
) -> Option<[Option<&'a RawValue>; N]> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_map(Fields(keys)).ok()
}

struct Fields<'k, const N: usize>(&'k [&'k str; N]);

impl<'de, const N: usize> Visitor<'de> for Fields<'_, N> {
    type Value = [Option<&'de RawValue>; N];

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = [None; N];
        while let Some(key) = map.next_key_seed(Key(self.0))? {
            match key {
                Some(i) => found[i] = Some(map.next_value()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

/// A key as its position among the wanted keys, compared without copying it.
struct Key<'k, const N: usize>(&'k [&'k str; N]);

impl<'de, const N: usize> DeserializeSeed<'de> for Key<'_, N> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_str(self)
    }
}

impl<const N: usize> Visitor<'_> for Key<'_, N> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|k| *k == key))
    }
}

fn type_of(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => match schema.get("items").map(type_of) {
            Some(inner) if inner != "any" => format!("{inner}[]"),
            _ => "array".into(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ if schema.get("enum").is_some() => "enum".into(),
        _ if schema.get("anyOf").is_some() || schema.get("oneOf").is_some() => "union".into(),
        _ => "any".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signature_marks_required_types_and_defaults() {
        let tool = ToolDef::from_json(&RawTool::from(json!({
            "name": "read",
            "description": "Read a file.\nMore detail here.",
            "inputSchema": {"type": "object", "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"enum": ["a", "b"]}
            }, "required": ["path"]}
        })))
        .unwrap();
        assert_eq!(
            tool.signature(),
            "(path*: string, limit: integer = 10, tags: string[], mode: enum)"
        );
        assert_eq!(tool.summary(200), "Read a file.");
        assert_eq!(tool.summary(8), "Read a…");
    }

    #[test]
    fn missing_schema_means_no_arguments() {
        let tool = ToolDef::from_json(&RawTool::from(json!({"name": "ping"}))).unwrap();
        assert_eq!(tool.signature(), "()");
        assert!(ToolDef::from_json(&RawTool::from(json!({"description": "x"}))).is_err());
        assert!(
            ToolDef::from_json(&RawTool::from(json!({"name": "x", "inputSchema": 3}))).is_err()
        );
    }

    /// The fields read from the text are what reading the parsed object gave.
    #[test]
    fn fields_read_from_text_as_from_the_parsed_object() {
        let def = |text: &str| ToolDef::from_json(&serde_json::from_str(text).unwrap());
        let tool = def(
            r#"{"name": "n\u0061me", "description": 3, "annotations": {"title": "T"},
                "inputSchema": null, "x": [{"name": "inner"}], "name": "last"}"#,
        )
        .unwrap();
        assert_eq!(tool.name, "last", "a repeated key: the last one");
        assert_eq!(tool.title.as_deref(), Some("T"), "annotations.title");
        assert_eq!(tool.description(), "", "a description that is no string");
        assert_eq!(tool.input_schema(), *NO_ARGUMENTS);
        let titled = def(r#"{"name": "a", "title": null, "annotations": {"title": "T"}}"#).unwrap();
        assert_eq!(
            titled.title, None,
            "a title key, even null, hides annotations.title"
        );
        let escaped = def(r#"{"n\u0061me": "a", "title": "x\"y"}"#).unwrap();
        assert_eq!(
            (escaped.name.as_str(), escaped.title.as_deref()),
            ("a", Some("x\"y"))
        );
        for bad in [
            r#"[1]"#,
            r#""x""#,
            r#"{"name": ""}"#,
            r#"{"name": 1}"#,
            r#"{"name": "a", "inputSchema": []}"#,
            r#"{"name": "a", "inputSchema": "{}"}"#,
        ] {
            assert!(def(bad).is_err(), "{bad}");
        }
        let schema = def(r#"{"name": "a", "inputSchema": {"type": "object", "properties": {"p": {"type": "string"}}}}"#).unwrap();
        assert_eq!(schema.signature(), "(p: string)");
    }
}
