//! Building meta-tool results: structured content plus its compact text twin, or an error
//! result the model can act on.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub type Reply = CallToolResult;

/// An `isError: true` result carrying `message`.
pub fn error(message: impl Into<String>) -> Reply {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// A successful result with `structuredContent` and `text` as its content.
pub fn structured(value: &impl Serialize, text: String) -> Reply {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(serde_json::to_value(value).expect("result serializes"));
    result
}

/// Reads a tool's arguments into its `Args`; a mismatch is a message naming the tool.
pub fn parse_args<T: DeserializeOwned>(tool: &str, args: JsonObject) -> Result<T, String> {
    serde_json::from_value(Value::Object(args))
        .map_err(|e| format!("invalid arguments for {tool}: {e}"))
}
