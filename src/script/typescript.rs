//! TypeScript-style signatures of tools, rendered from their JSON Schemas, so the model writes a
//! script's `tools.call` right the first time. Readable rather than complete: what has no
//! TypeScript counterpart (formats, bounds, patterns) is left out, and anything unclear or
//! nested too deep is `unknown`.

use std::collections::HashSet;

use serde_json::{Map, Value};

/// Objects nested deeper than this render as `unknown`.
const MAX_DEPTH: usize = 8;
/// `$ref`s followed per schema; beyond, `unknown` (this ends reference cycles).
const MAX_REFS: usize = 32;

/// `declare function <name>(args: {...}): Promise<...>;` with the description as its doc
/// comment. The promise holds the output schema's type when there is one (a script gets the
/// structured content), else `unknown`.
pub fn declaration(
    name: &str,
    description: &str,
    input: &Map<String, Value>,
    output: Option<&Map<String, Value>>,
) -> String {
    let mut out = String::new();
    let ident = identifier(name);
    let mut doc = description.trim().to_owned();
    if ident != name {
        doc.push_str(&format!("\nCall as tools.call(\"{name}\", args)."));
    }
    push_doc(&mut out, &doc, "");
    let input_root = Value::Object(input.clone());
    let args = Renderer::new(&input_root).object(input, 0);
    let optional = input
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let output = match output {
        Some(schema) => {
            let root = Value::Object(schema.clone());
            Renderer::new(&root).render(&root, 0)
        }
        None => "unknown".into(),
    };
    out.push_str(&format!(
        "declare function {ident}(args{}: {args}): Promise<{output}>;",
        if optional { "?" } else { "" }
    ));
    out
}

/// `name` as a JavaScript identifier: characters that may not appear become `_`.
fn identifier(name: &str) -> String {
    let mut ident: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if ident.starts_with(|c: char| c.is_ascii_digit()) {
        ident.insert(0, '_');
    }
    ident
}

/// A property key: bare when it is an identifier, else quoted.
fn key(name: &str) -> String {
    if !name.is_empty() && identifier(name) == name {
        name.to_owned()
    } else {
        Value::from(name).to_string()
    }
}

/// Appends `text` as a `/** ... */` comment at `indent` (one line when it fits on one).
fn push_doc(out: &mut String, text: &str, indent: &str) {
    let text = text.replace("*/", "* /");
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    match lines.as_slice() {
        [] => {}
        [line] if !line.is_empty() => out.push_str(&format!("{indent}/** {line} */\n")),
        _ => {
            out.push_str(&format!("{indent}/**\n"));
            for line in lines {
                out.push_str(indent);
                out.push_str(" *");
                if !line.is_empty() {
                    out.push(' ');
                    out.push_str(line);
                }
                out.push('\n');
            }
            out.push_str(&format!("{indent} */\n"));
        }
    }
}

struct Renderer<'a> {
    /// The schema `$ref`s point into.
    root: &'a Value,
    refs: std::cell::Cell<usize>,
}

impl<'a> Renderer<'a> {
    fn new(root: &'a Value) -> Self {
        Self {
            root,
            refs: std::cell::Cell::new(0),
        }
    }

    fn render(&self, schema: &Value, depth: usize) -> String {
        let Some(obj) = schema.as_object() else {
            return if schema == &Value::Bool(false) {
                "never".into()
            } else {
                "unknown".into()
            };
        };
        if depth > MAX_DEPTH {
            return "unknown".into();
        }
        if let Some(target) = obj.get("$ref").and_then(Value::as_str) {
            self.refs.set(self.refs.get() + 1);
            if self.refs.get() > MAX_REFS {
                return "unknown".into();
            }
            return match target.strip_prefix('#').and_then(|p| self.root.pointer(p)) {
                Some(found) => self.render(found, depth),
                None => "unknown".into(),
            };
        }
        if let Some(value) = obj.get("const") {
            return value.to_string();
        }
        if let Some(values) = obj.get("enum").and_then(Value::as_array) {
            return union(values.iter().map(Value::to_string).collect());
        }
        for (keyword, join) in [("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")] {
            if let Some(members) = obj.get(keyword).and_then(Value::as_array) {
                let parts: Vec<String> =
                    members.iter().map(|m| self.render(m, depth + 1)).collect();
                return if join == " | " {
                    union(parts)
                } else {
                    parts.join(join)
                };
            }
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.typed(t, obj, depth),
            Some(Value::Array(types)) => union(
                types
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.typed(t, obj, depth))
                    .collect(),
            ),
            _ if obj.contains_key("properties") => self.object(obj, depth),
            _ => "unknown".into(),
        }
    }

    fn typed(&self, kind: &str, obj: &Map<String, Value>, depth: usize) -> String {
        match kind {
            "string" => "string".into(),
            "integer" | "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => match obj.get("items") {
                Some(Value::Array(tuple)) => format!(
                    "[{}]",
                    tuple
                        .iter()
                        .map(|t| self.render(t, depth))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Some(items) => {
                    let item = self.render(items, depth);
                    if item.contains(' ') && !item.starts_with('{') {
                        format!("({item})[]")
                    } else {
                        format!("{item}[]")
                    }
                }
                None => "unknown[]".into(),
            },
            "object" => self.object(obj, depth),
            _ => "unknown".into(),
        }
    }

    /// An object literal type, one property a line, each with its description and default.
    fn object(&self, obj: &Map<String, Value>, depth: usize) -> String {
        let properties = obj.get("properties").and_then(Value::as_object);
        let extra = match obj.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            Some(schema @ Value::Object(_)) => Some(self.render(schema, depth + 1)),
            _ if properties.is_none_or(Map::is_empty) => Some("unknown".into()),
            _ => None,
        };
        let Some(properties) = properties.filter(|p| !p.is_empty()) else {
            return match extra {
                Some(value) => format!("Record<string, {value}>"),
                None => "{}".into(),
            };
        };
        let required: HashSet<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let indent = "  ".repeat(depth + 1);
        let mut out = String::from("{\n");
        for (name, schema) in properties {
            let mut doc = schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim()
                .to_owned();
            if let Some(default) = schema.get("default") {
                if !doc.is_empty() {
                    doc.push(' ');
                }
                doc.push_str(&format!("(default: {default})"));
            }
            push_doc(&mut out, &doc, &indent);
            out.push_str(&format!(
                "{indent}{}{}: {};\n",
                key(name),
                if required.contains(name.as_str()) {
                    ""
                } else {
                    "?"
                },
                self.render(schema, depth + 1)
            ));
        }
        if let Some(value) = extra {
            out.push_str(&format!("{indent}[key: string]: {value};\n"));
        }
        out.push_str(&"  ".repeat(depth));
        out.push('}');
        out
    }
}

/// Members joined with ` | `, each once, in order (linear: an enum may hold 100,000s of values).
fn union(parts: Vec<String>) -> String {
    let mut seen = HashSet::with_capacity(parts.len());
    let mut out = String::new();
    for part in &parts {
        if seen.insert(part.as_str()) {
            if seen.len() > 1 {
                out.push_str(" | ");
            }
            out.push_str(part);
        }
    }
    if seen.is_empty() { "never".into() } else { out }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn renders_arguments_docs_defaults_and_output() {
        let input = object(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File to read"},
                "tail": {"type": "integer", "default": 10},
                "mode": {"enum": ["text", "base64"]},
                "tags": {"type": "array", "items": {"type": ["string", "null"]}},
                "content-type": {"type": "string"},
                "meta": {"type": "object", "additionalProperties": {"type": "number"}},
                "rows": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}
            },
            "required": ["path"]
        }));
        let output = object(json!({
            "type": "object",
            "properties": {"content": {"type": "string"}},
            "required": ["content"]
        }));
        let ts = declaration(
            "filesystem__read_text_file",
            "Read a file.",
            &input,
            Some(&output),
        );
        assert_eq!(
            ts,
            r#"/** Read a file. */
declare function filesystem__read_text_file(args: {
  /** File to read */
  path: string;
  /** (default: 10) */
  tail?: number;
  mode?: "text" | "base64";
  tags?: (string | null)[];
  "content-type"?: string;
  meta?: Record<string, number>;
  rows?: {
    id: number;
  }[];
}): Promise<{
  content: string;
}>;"#
        );
    }

    #[test]
    fn no_arguments_refs_and_odd_names() {
        let input = object(json!({"type": "object"}));
        let ts = declaration(
            "Ant-Design__list",
            "Line one.\n\nLine */ two.",
            &input,
            None,
        );
        assert_eq!(
            ts,
            "/**\n * Line one.\n *\n * Line * / two.\n * Call as tools.call(\"Ant-Design__list\", args).\n */\ndeclare function Ant_Design__list(args?: Record<string, unknown>): Promise<unknown>;"
        );
        let input = object(json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/node"}},
            "required": ["node"],
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}
        }));
        let ts = declaration("t", "", &input, None);
        assert!(ts.contains("next?: {"), "{ts}");
        assert!(ts.contains("unknown"), "a cycle ends in unknown: {ts}");
    }

    #[test]
    fn huge_enums_and_property_lists_render_in_linear_time() {
        // 300,000 values (each twice) and 100,000 required properties: with a quadratic
        // de-duplication this took minutes.
        let values: Vec<Value> = (0..600_000)
            .map(|i| json!(format!("v{}", i % 300_000)))
            .collect();
        let properties: Map<String, Value> = (0..100_000)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        let required: Vec<Value> = (0..100_000).map(|i| json!(format!("p{i}"))).collect();
        let input = object(json!({
            "type": "object",
            "properties": {"choice": {"enum": values}, "nested": {"type": "object", "properties": properties, "required": required}},
            "required": ["choice"]
        }));
        let ts = declaration("t", "", &input, None);
        let line = ts.lines().find(|l| l.contains("choice:")).unwrap();
        assert!(
            line.starts_with(r#"  choice: "v0" | "v1" | "#),
            "{}",
            &line[..40]
        );
        assert!(line.ends_with(r#" | "v299999";"#));
        assert_eq!(line.matches(" | ").count(), 299_999, "each value once");
        assert!(ts.contains("    p99999: number;\n"));
        assert!(!ts.contains("p1?:"), "required properties stay required");
    }
}
