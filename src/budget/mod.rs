//! Token counting and per-route result budgets. No I/O.

/// Default soft limit of one result, in tokens.
pub const DEFAULT_RESULT_TOKENS: usize = 10_000;
/// Default hard limit: results above it are refused with an error, not stored.
pub const DEFAULT_HARD_TOKENS: usize = 5_000_000;
/// Texts longer than this many bytes are counted on a prefix and extrapolated.
const EXACT_COUNT_BYTES: usize = 256 << 10;

/// The length of `value` as compact JSON, counted without writing it anywhere.
pub fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Counts tokens of a text.
pub trait TokenCounter: Send + Sync {
    fn count(&self, text: &str) -> usize;
    /// Short name for reports, e.g. "o200k_base".
    fn name(&self) -> &'static str;
}

/// The `o200k_base` tokenizer (GPT-4o family), a good stand-in for today's models.
pub struct O200k;

impl TokenCounter for O200k {
    fn count(&self, text: &str) -> usize {
        let bpe = tiktoken_rs::o200k_base_singleton();
        if text.len() <= EXACT_COUNT_BYTES {
            return bpe.encode_ordinary(text).len();
        }
        // Counting tens of MB exactly takes seconds; a 256 KiB prefix gives the ratio.
        let end = text.floor_char_boundary(EXACT_COUNT_BYTES);
        let prefix = bpe.encode_ordinary(&text[..end]).len();
        (prefix as f64 * text.len() as f64 / end as f64).ceil() as usize
    }

    fn name(&self) -> &'static str {
        "o200k_base"
    }
}

/// A cheap estimate: one token per four bytes, rounded up.
pub struct ByteEstimate;

impl TokenCounter for ByteEstimate {
    fn count(&self, text: &str) -> usize {
        text.len().div_ceil(4)
    }

    fn name(&self) -> &'static str {
        "bytes/4"
    }
}

/// Where a result is going.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    SearchTools,
    GetToolDetails,
    CallTool { server: String },
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Route::SearchTools => f.write_str("search_tools"),
            Route::GetToolDetails => f.write_str("get_tool_details"),
            Route::CallTool { server } => write!(f, "call_tool on server \"{server}\""),
        }
    }
}

/// Limits for one route: over `soft`, cut and store; over `hard`, refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub soft: usize,
    pub hard: usize,
}

/// Known result limits of downstream clients, in tokens, matched on `clientInfo.name`.
///
/// | client | limit | source |
/// | --- | --- | --- |
/// | Claude Code (`claude-code`) | 25,000 tokens | MAX_MCP_OUTPUT_TOKENS default |
/// | Codex (`codex-mcp-client`) | ~10 KiB, taken as 2,500 tokens | tool output truncation |
pub fn client_limit(client_name: &str) -> Option<usize> {
    let name = client_name.to_ascii_lowercase();
    if name.contains("claude-code") || name == "claude code" {
        Some(25_000)
    } else if name.contains("codex") {
        Some(2_500)
    } else {
        None
    }
}

/// Budgets for every route, resolved once from config.
#[derive(Debug, Clone)]
pub struct Budgets {
    /// Soft limit for routes without their own (global `maxResultTokens` or the default).
    pub default_soft: usize,
    /// Per-server `maxResultTokens`.
    pub per_server: std::collections::HashMap<String, usize>,
    pub hard: usize,
}

impl Budgets {
    /// The limits on `route` for a downstream client whose own limit is `client`, when known:
    /// no budget goes above it.
    pub fn limits(&self, route: &Route, client: Option<usize>) -> Limits {
        let configured = match route {
            Route::CallTool { server } => self
                .per_server
                .get(server)
                .copied()
                .unwrap_or(self.default_soft),
            _ => self.default_soft,
        };
        let soft = client.map_or(configured, |c| configured.min(c));
        Limits {
            soft,
            hard: self.hard.max(soft),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_length_of_the_compact_text() {
        let value = serde_json::json!({"a": [1, "ü", null], "b": {"c": true}});
        assert_eq!(json_len(&value), value.to_string().len());
    }

    #[test]
    fn o200k_counts_real_tokens() {
        assert_eq!(O200k.count(""), 0);
        assert_eq!(O200k.count("hello world"), 2);
        let big = "lorem ipsum dolor sit amet ".repeat(60_000);
        let exact = tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(&big)
            .len();
        let estimated = O200k.count(&big);
        assert!(
            estimated.abs_diff(exact) * 100 <= exact,
            "{estimated} vs {exact}"
        );
        assert_eq!(ByteEstimate.count("abcde"), 2);
    }

    #[test]
    fn budgets_follow_server_config_and_client_caps() {
        let budgets = Budgets {
            default_soft: DEFAULT_RESULT_TOKENS,
            per_server: [("big".to_owned(), 40_000)].into(),
            hard: DEFAULT_HARD_TOKENS,
        };
        let big = Route::CallTool {
            server: "big".into(),
        };
        let other = Route::CallTool { server: "x".into() };
        assert_eq!(budgets.limits(&big, None).soft, 40_000);
        assert_eq!(budgets.limits(&other, None).soft, DEFAULT_RESULT_TOKENS);
        let claude = client_limit("claude-code");
        assert_eq!(
            budgets.limits(&big, claude).soft,
            25_000,
            "never above what the client keeps"
        );
        assert_eq!(budgets.limits(&other, claude).soft, DEFAULT_RESULT_TOKENS);
        let codex = client_limit("codex-mcp-client");
        assert_eq!(budgets.limits(&Route::SearchTools, codex).soft, 2_500);
        assert_eq!(client_limit("mcp"), None);
    }
}
