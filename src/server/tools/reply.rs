//! Building meta-tool results: structured content plus its compact text twin, or an error
//! result the model can act on; and keeping both within the result budget.

use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::result::ResultHandler;

pub type Reply = CallToolResult;

/// An `isError: true` result carrying `message`.
pub fn error(message: impl Into<String>) -> Reply {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// Characters an error result keeps of an error from elsewhere (an upstream, a connection):
/// about 2,000 tokens at worst, under the smallest client budget (Codex, 2,500 tokens).
pub const FOREIGN_ERROR_CHARS: usize = 2_000;

/// [`error`] with `message` cut to [`FOREIGN_ERROR_CHARS`], keeping its start (which names
/// the cause): every error result stays within the result budget, whatever its source.
pub fn foreign_error(message: impl Into<String>) -> Reply {
    let message = message.into();
    match message.char_indices().nth(FOREIGN_ERROR_CHARS) {
        None => error(message),
        Some((end, _)) => error(format!(
            "{}… (error cut; {} characters in all)",
            &message[..end],
            message.chars().count()
        )),
    }
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
        .map_err(|e| format!("invalid arguments for {tool}: {}", echo(&e.to_string())))
}

pub use crate::echo::echo;

/// `make(n)` for the largest `n` in `min..=max` whose reply fits `soft` tokens (shaping
/// leaves it whole), found with O(log max) replies made; `make(min)` when none fits. The
/// reply must grow with `n`.
pub fn fitted(
    results: &ResultHandler,
    soft: usize,
    min: usize,
    max: usize,
    make: impl Fn(usize) -> Reply,
) -> Reply {
    let whole = make(max);
    if max <= min || results.fits(&whole, soft) {
        return whole;
    }
    // Invariant: make(lo) fits or lo == min; make(hi) does not fit.
    let (mut lo, mut hi) = (min, max);
    let mut best = None;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let reply = make(mid);
        if results.fits(&reply, soft) {
            (lo, best) = (mid, Some(reply));
        } else {
            hi = mid;
        }
    }
    best.unwrap_or_else(|| make(lo))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_errors_are_cut_to_their_start() {
        let text = |r: &Reply| r.content[0].as_text().unwrap().text.clone();
        assert_eq!(text(&foreign_error("short")), "short");
        let long = format!("server \"x\" failed: {}", "e".repeat(10_000_000));
        let shown = text(&foreign_error(long));
        assert!(shown.starts_with("server \"x\" failed: eee"));
        assert!(shown.chars().count() < FOREIGN_ERROR_CHARS + 100);
        assert!(shown.ends_with("10000019 characters in all)"), "{shown}");
    }
}
