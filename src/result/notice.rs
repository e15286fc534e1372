//! The truncation notice: the one place that writes it, same keys in the same order every time.
//! When the full result could not be kept, `resourceId` is null and the hint says so.

use serde::Serialize;

/// Name of the built-in tool that pages through stored results.
pub const LOOKUP_TOOL: &str = "meta__lookup_full_content";
/// First line of every notice.
pub const HEADER: &str = "--- TRUNCATION NOTICE ---";

/// What a notice says; serialized in field order.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    pub is_truncated: bool,
    pub tool: String,
    pub original_tokens: usize,
    pub returned_tokens: usize,
    pub returned_fraction: f64,
    pub boundary: String,
    pub reason: String,
    pub resource_id: Option<String>,
    pub next_offset: usize,
    pub recovery_hint: String,
}

impl Notice {
    pub fn new(
        tool: &str,
        original_tokens: usize,
        returned_tokens: usize,
        boundary: &str,
        reason: String,
        resource_id: &str,
        next_offset: usize,
    ) -> Self {
        let fraction = if original_tokens == 0 {
            1.0
        } else {
            (returned_tokens as f64 / original_tokens as f64 * 1000.0).round() / 1000.0
        };
        Self {
            is_truncated: true,
            tool: tool.to_owned(),
            original_tokens,
            returned_tokens,
            returned_fraction: fraction,
            boundary: boundary.to_owned(),
            reason,
            resource_id: Some(resource_id.to_owned()),
            next_offset,
            recovery_hint: recovery_hint(resource_id, next_offset),
        }
    }

    /// A notice for a cut whose full result could not be kept (`why`): nothing to read back.
    pub fn unkept(
        tool: &str,
        original_tokens: usize,
        returned_tokens: usize,
        boundary: &str,
        reason: String,
        why: &str,
        next_offset: usize,
    ) -> Self {
        let mut notice = Self::new(
            tool,
            original_tokens,
            returned_tokens,
            boundary,
            format!("{reason}; the full result could not be kept ({why})"),
            "",
            next_offset,
        );
        notice.resource_id = None;
        notice.recovery_hint = "the full result could not be kept, so there is nothing to read back; call the tool again with narrower arguments (a smaller range, a page, a limit), or again later".into();
        notice
    }

    /// The text block appended after the kept part.
    pub fn render(&self) -> String {
        format!(
            "{HEADER}\n{}",
            serde_json::to_string(self).expect("notice serializes")
        )
    }

    /// Reads a notice back from a rendered text block (used by tests and clients alike).
    pub fn parse(block: &str) -> Option<serde_json::Value> {
        let json = block.strip_prefix(HEADER)?.trim();
        serde_json::from_str(json).ok()
    }
}

/// The exact `call_tool` that continues reading at `offset`.
pub fn recovery_hint(resource_id: &str, offset: usize) -> String {
    let arguments = serde_json::json!({"resource_id": resource_id, "offset": offset});
    format!(
        "call_tool {}",
        serde_json::json!({"name": LOOKUP_TOOL, "arguments": arguments})
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notice_has_fixed_keys_in_order() {
        let notice = Notice::new(
            "fs__read",
            1000,
            163,
            "line",
            "too big".into(),
            "r-7f3a9c2e04b1d6a85e3c9f7b2a1d4e60",
            4242,
        );
        let text = notice.render();
        assert!(text.starts_with(
            "--- TRUNCATION NOTICE ---\n{\"isTruncated\":true,\"tool\":\"fs__read\","
        ));
        let parsed = Notice::parse(&text).unwrap();
        let keys: Vec<&str> = parsed
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "isTruncated",
                "tool",
                "originalTokens",
                "returnedTokens",
                "returnedFraction",
                "boundary",
                "reason",
                "resourceId",
                "nextOffset",
                "recoveryHint"
            ]
        );
        assert_eq!(parsed["returnedFraction"], 0.163);
        let hint = parsed["recoveryHint"].as_str().unwrap();
        let call: serde_json::Value =
            serde_json::from_str(hint.strip_prefix("call_tool ").unwrap()).unwrap();
        assert_eq!(call["name"], LOOKUP_TOOL);
        assert_eq!(
            call["arguments"]["resource_id"],
            "r-7f3a9c2e04b1d6a85e3c9f7b2a1d4e60"
        );
        assert_eq!(call["arguments"]["offset"], 4242);
    }

    #[test]
    fn an_unkept_result_has_the_same_keys_and_says_so() {
        let kept =
            Notice::parse(&Notice::new("t", 10, 5, "line", "r".into(), "r-1", 3).render()).unwrap();
        let unkept = Notice::unkept("t", 10, 5, "line", "r".into(), "store down", 3);
        let parsed = Notice::parse(&unkept.render()).unwrap();
        let keys =
            |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&parsed), keys(&kept));
        assert!(parsed["resourceId"].is_null());
        assert!(
            parsed["reason"]
                .as_str()
                .unwrap()
                .ends_with("the full result could not be kept (store down)")
        );
        assert!(
            parsed["recoveryHint"]
                .as_str()
                .unwrap()
                .contains("could not be kept")
        );
    }
}
