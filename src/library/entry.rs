//! One tool as the client sees it: its qualified name, its definition and its compiled input
//! schema.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::catalog::ToolDef;
use crate::skills::Skill;

/// Separator between server and tool in a qualified name.
pub const SEPARATOR: &str = "__";

/// One upstream tool as the client sees it.
pub struct Entry {
    /// `<server>__<tool>`, valid as an MCP tool name.
    pub qualified: String,
    pub server: String,
    pub def: ToolDef,
    /// Set when this entry is a skill rather than a tool.
    pub skill: Option<Arc<Skill>>,
    /// Boxed: most entries never compile theirs, and a validator is ~100 bytes inline.
    validator: OnceLock<Option<Box<jsonschema::Validator>>>,
}

impl Entry {
    pub fn new(qualified: String, server: String, def: ToolDef) -> Self {
        Self {
            qualified,
            server,
            def,
            skill: None,
            validator: OnceLock::new(),
        }
    }

    /// The compiled input schema; `None` if the upstream's schema does not compile.
    pub fn validator(&self) -> Option<&jsonschema::Validator> {
        self.validator
            .get_or_init(|| {
                let schema = Value::Object(self.def.input_schema());
                jsonschema::validator_for(&schema)
                    .map(Box::new)
                    .inspect_err(|e| {
                        tracing::warn!(tool = %self.qualified, "input schema does not compile, arguments go unchecked: {e}");
                    })
                    .ok()
            })
            .as_deref()
    }
}

/// `<server>__<tool>`, with characters outside `[A-Za-z0-9_.-]` in the tool name made `-`.
pub fn qualified_name(server: &str, tool: &str) -> String {
    let tool: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{server}{SEPARATOR}{tool}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_are_valid_mcp_tool_names() {
        assert_eq!(qualified_name("fs", "read_text_file"), "fs__read_text_file");
        assert_eq!(
            qualified_name("everything", "get-sum"),
            "everything__get-sum"
        );
        assert_eq!(qualified_name("x", "weird name/op:1"), "x__weird-name-op-1");
    }
}
