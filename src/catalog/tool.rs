//! A read view of one catalog tool: the fields search and the meta-tools need.

use std::sync::{Arc, LazyLock};

use serde_json::{Map, Value};

/// One tool as found in a catalog. `raw` is the object exactly as stored, shared with the
/// catalog rather than copied.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    pub raw: Arc<Value>,
}

/// The schema of a tool that declares none: no arguments.
static NO_ARGUMENTS: LazyLock<Map<String, Value>> =
    LazyLock::new(|| Map::from_iter([("type".to_owned(), Value::from("object"))]));

impl ToolDef {
    /// Reads a tool object; needs at least a string `name`.
    pub fn from_json(raw: &Arc<Value>) -> Result<Self, String> {
        let obj = raw.as_object().ok_or("a tool must be a JSON object")?;
        let name = obj
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or("a tool has no \"name\"")?;
        let title = obj
            .get("title")
            .or_else(|| obj.get("annotations").and_then(|a| a.get("title")))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if !matches!(
            obj.get("inputSchema"),
            None | Some(Value::Null | Value::Object(_))
        ) {
            return Err(format!(
                "tool \"{name}\" has an inputSchema that is not an object"
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            title,
            description: obj
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            raw: raw.clone(),
        })
    }

    /// The input schema; `{"type": "object"}` when the tool declares none.
    pub fn input_schema(&self) -> &Map<String, Value> {
        self.raw
            .get("inputSchema")
            .and_then(Value::as_object)
            .unwrap_or(&NO_ARGUMENTS)
    }

    /// The first line (or sentence) of the description, at most `max` characters.
    pub fn summary(&self, max: usize) -> String {
        let text = self.description.trim();
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
        let required: Vec<&str> = self
            .input_schema()
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(props) = self
            .input_schema()
            .get("properties")
            .and_then(Value::as_object)
        else {
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
        let tool = ToolDef::from_json(&Arc::new(json!({
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
        let tool = ToolDef::from_json(&Arc::new(json!({"name": "ping"}))).unwrap();
        assert_eq!(tool.signature(), "()");
        assert!(ToolDef::from_json(&Arc::new(json!({"description": "x"}))).is_err());
        assert!(ToolDef::from_json(&Arc::new(json!({"name": "x", "inputSchema": 3}))).is_err());
    }
}
