//! The three meta-tools: constant definitions, byte-identical for the life of the process and
//! across configs, so the client's prompt cache stays valid. Each result's full shape is kept
//! in `results.json` and checked here; `tools/list` declares only its outline (the top-level
//! fields and their types), which keeps the surface small.

use std::sync::{Arc, LazyLock};

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool};
use serde_json::{Map, Value, json};

/// The full output schema of each meta-tool that has one.
static RESULTS: LazyLock<Map<String, Value>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("results.json")).expect("meta-tool result schemas parse")
});

static DEFINITIONS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    let mut tools: Vec<Tool> = serde_json::from_str(include_str!("definitions.json"))
        .expect("meta-tool definitions parse");
    for tool in &mut tools {
        tool.output_schema = RESULTS
            .get(tool.name.as_ref())
            .map(|s| Arc::new(outline(s)));
    }
    tools
});

/// The outline of an object schema: its top-level properties with their types only, and its
/// required ones. Whatever satisfies the schema satisfies its outline.
fn outline(schema: &Value) -> JsonObject {
    let properties: Map<String, Value> = schema["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, property)| (name.clone(), json!({"type": property["type"]})))
        .collect();
    let mut outline = JsonObject::new();
    outline.insert("type".into(), "object".into());
    outline.insert("properties".into(), properties.into());
    if let Some(required) = schema.get("required") {
        outline.insert("required".into(), required.clone());
    }
    outline
}

pub const SEARCH_TOOLS: &str = "search_tools";
pub const GET_TOOL_DETAILS: &str = "get_tool_details";
pub const CALL_TOOL: &str = "call_tool";

/// `search_tools`, `get_tool_details`, `call_tool`, in that order.
pub fn definitions() -> &'static [Tool] {
    &DEFINITIONS
}

/// The full output schema of meta-tool `tool`, if it has one (tests check results by it).
#[cfg(test)]
pub fn result_schema(tool: &str) -> Option<&'static Value> {
    RESULTS.get(tool)
}

/// The compiled full output schema of each meta-tool that has one.
static OUTPUT_SCHEMAS: LazyLock<Vec<(&'static str, jsonschema::Validator)>> = LazyLock::new(|| {
    RESULTS
        .iter()
        .map(|(tool, schema)| {
            let validator = jsonschema::validator_for(schema).expect("output schema compiles");
            (tool.as_str(), validator)
        })
        .collect()
});

/// `result` if it satisfies meta-tool `tool`'s full output schema (error results need not);
/// otherwise an error result, so a client never sees structured content that breaks the
/// schema. Meta-tools fit their results to the budget, so this is a last line of defence.
pub fn conform(tool: &str, result: CallToolResult) -> CallToolResult {
    let Some((_, schema)) = OUTPUT_SCHEMAS.iter().find(|(name, _)| *name == tool) else {
        return result;
    };
    if result.is_error == Some(true)
        || result
            .structured_content
            .as_ref()
            .is_some_and(|s| schema.is_valid(s))
    {
        return result;
    }
    tracing::warn!(
        tool,
        "a meta-tool result broke its output schema; answering with an error"
    );
    CallToolResult::error(vec![ContentBlock::text(format!(
        "the result of {tool} does not fit the result budget; ask for less (a lower limit, detail \"name\", fewer names)"
    ))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_tools_in_fixed_order_with_valid_schemas() {
        let names: Vec<_> = definitions().iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, [SEARCH_TOOLS, GET_TOOL_DETAILS, CALL_TOOL]);
        for tool in definitions() {
            let schema = Value::Object((*tool.input_schema).clone());
            jsonschema::validator_for(&schema).expect("input schema compiles");
        }
        assert!(OUTPUT_SCHEMAS.len() == 2 && RESULTS.keys().all(|t| names.contains(&t.as_str())));
    }

    #[test]
    fn a_declared_outline_accepts_what_the_full_schema_accepts_and_names_every_field() {
        for tool in definitions().iter().filter(|t| t.output_schema.is_some()) {
            let full = result_schema(&tool.name).unwrap();
            let outline = Value::Object((**tool.output_schema.as_ref().unwrap()).clone());
            let outline = jsonschema::validator_for(&outline).expect("outline compiles");
            let fields = full["properties"].as_object().unwrap();
            assert_eq!(outline_fields(tool), fields.keys().collect::<Vec<_>>());
            // A value of each field's type passes both; one of another type fails the outline.
            let sample = |kind: &str| match kind {
                "string" => json!("x"),
                "boolean" => json!(true),
                "array" => json!([]),
                "number" | "integer" => json!(1),
                _ => json!({}),
            };
            for (name, property) in fields {
                let kind = property["type"].as_str().unwrap();
                let required: Map<String, Value> = full["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(|r| (r.to_owned(), sample(fields[r]["type"].as_str().unwrap())))
                    .collect();
                let mut value = required.clone();
                value.insert(name.clone(), sample(kind));
                assert!(outline.is_valid(&Value::Object(value.clone())), "{name}");
                value.insert(name.clone(), json!(null));
                assert!(!outline.is_valid(&Value::Object(value)), "{name}");
            }
        }
    }

    fn outline_fields(tool: &Tool) -> Vec<&String> {
        tool.output_schema.as_ref().unwrap()["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect()
    }
}
