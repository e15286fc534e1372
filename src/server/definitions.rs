//! The three meta-tools: constant definitions, byte-identical for the life of the process and
//! across configs, so the client's prompt cache stays valid.

use std::sync::LazyLock;

use rmcp::model::Tool;

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
