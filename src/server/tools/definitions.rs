//! The three meta-tools: constant definitions, byte-identical for the life of the process and
//! across configs, so the client's prompt cache stays valid.

use std::sync::LazyLock;

use rmcp::model::{CallToolResult, ContentBlock, Tool};

static DEFINITIONS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("definitions.json")).expect("meta-tool definitions parse")
});

pub const SEARCH_TOOLS: &str = "search_tools";
pub const GET_TOOL_DETAILS: &str = "get_tool_details";
pub const CALL_TOOL: &str = "call_tool";

/// `search_tools`, `get_tool_details`, `call_tool`, in that order.
pub fn definitions() -> &'static [Tool] {
    &DEFINITIONS
}

/// The compiled output schema of each meta-tool that declares one.
static OUTPUT_SCHEMAS: LazyLock<Vec<(&'static str, jsonschema::Validator)>> = LazyLock::new(|| {
    definitions()
        .iter()
        .filter_map(|tool| {
            let schema = serde_json::Value::Object((**tool.output_schema.as_ref()?).clone());
            let validator = jsonschema::validator_for(&schema).expect("output schema compiles");
            Some((tool.name.as_ref(), validator))
        })
        .collect()
});

/// `result` if it satisfies meta-tool `tool`'s declared output schema (error results need
/// not); otherwise an error result, so a client never sees structured content that breaks the
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
            let schema = serde_json::Value::Object((*tool.input_schema).clone());
            jsonschema::validator_for(&schema).expect("input schema compiles");
            if let Some(out) = &tool.output_schema {
                jsonschema::validator_for(&serde_json::Value::Object((**out).clone()))
                    .expect("output schema compiles");
            }
        }
    }
}
