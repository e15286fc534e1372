//! Result handling: every result passes through here before it reaches the client. Over the
//! route's soft limit a result is cut at a meaningful boundary, kept whole in the store, and
//! followed by a truncation notice whose recovery hint works; over the hard limit it is refused
//! with an error that says what to do. The only module that decides what is cut.

mod lookup;
pub mod notice;
pub mod truncate;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{CallToolResult, ContentBlock, Resource, ResourceContents};
use serde_json::Value;

use crate::budget::{Limits, Route, TokenCounter};

use crate::store;
pub use crate::store::{Owner, ResultStore, SpillStore, StoreError, Stored};
pub use lookup::{LookupError, Match, Page, search_text};
pub use notice::{LOOKUP_TOOL, Notice};

/// URI scheme under which stored results are MCP resources.
pub const RESOURCE_PREFIX: &str = "meta-server://results/";
/// Bytes of a result counted exactly to learn its bytes-per-token ratio.
const RATIO_SAMPLE: usize = 64 << 10;
/// Tokens kept free for the notice and resource link.
const NOTICE_RESERVE: usize = 200;
/// Characters of the cut's detail kept in the notice's reason.
const MAX_DETAIL_CHARS: usize = 200;

/// The resource URI of a stored result.
pub fn resource_uri(id: &str) -> String {
    format!("{RESOURCE_PREFIX}{id}")
}

/// The stored-result id in a resource URI.
pub fn resource_id(uri: &str) -> Option<&str> {
    uri.strip_prefix(RESOURCE_PREFIX)
}

/// Shapes results to their budgets and serves stored results back.
pub struct ResultHandler {
    store: Arc<dyn ResultStore>,
    counter: Arc<dyn TokenCounter>,
    counts: Counts,
}

/// What result handling has stored since start, for `/metrics`.
#[derive(Debug, Default)]
pub struct Counts {
    /// Full results stored.
    pub stored: AtomicU64,
    /// Their bytes.
    pub stored_bytes: AtomicU64,
    /// Results cut without their full version kept (the store was unreachable).
    pub unkept: AtomicU64,
}

/// A result's tokens by part, with each part's tokens-per-byte ratio.
struct Size {
    text: (usize, f64),
    structured: (usize, f64),
    binary_bytes: usize,
}

impl Size {
    fn total(&self) -> usize {
        self.text.0 + self.structured.0 + self.binary_bytes / 4
    }
}

/// The text-like parts of a result, as one document.
struct Parts {
    /// Text blocks joined by newlines.
    text: String,
    /// Index of the first text block, where the cut text goes.
    first_text: Option<usize>,
    /// `structuredContent` holds the same data as the text.
    structured_duplicates_text: bool,
}

impl ResultHandler {
    pub fn new(store: Arc<dyn ResultStore>, counter: Arc<dyn TokenCounter>) -> Self {
        Self {
            store,
            counter,
            counts: Counts::default(),
        }
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Stores `stored` for `owner`, counting what was kept.
    async fn keep(&self, owner: &Owner, stored: Stored) -> Result<String, StoreError> {
        let bytes = stored.size() as u64;
        let id = self.store.put(owner, stored).await?;
        self.counts.stored.fetch_add(1, Ordering::Relaxed);
        self.counts.stored_bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(id)
    }

    pub fn store(&self) -> &dyn ResultStore {
        self.store.as_ref()
    }

    pub fn counter(&self) -> &dyn TokenCounter {
        self.counter.as_ref()
    }

    /// Whether `result` is within `soft` tokens as [`Self::shape`] counts them (its text, its
    /// `structuredContent` unless that repeats the text, its binary content), so shaping
    /// would leave it whole.
    pub fn fits(&self, result: &CallToolResult, soft: usize) -> bool {
        let parts = parts(result);
        let structured = result.structured_content.as_ref().map(Value::to_string);
        let extra = structured
            .as_deref()
            .filter(|_| !parts.structured_duplicates_text);
        let binary: usize = result.content.iter().map(binary_len).sum();
        self.size(&parts, extra, binary, soft)
            .is_none_or(|size| size.total() <= soft)
    }

    /// The tokens of a result's parts; `None` when its bytes alone show it is within `soft`
    /// (tokens never outnumber bytes, so small results skip counting entirely).
    fn size(
        &self,
        parts: &Parts,
        extra_structured: Option<&str>,
        binary_bytes: usize,
        soft: usize,
    ) -> Option<Size> {
        let bytes = parts.text.len() + extra_structured.map_or(0, str::len) + binary_bytes;
        (bytes > soft).then(|| Size {
            text: self.measure(&parts.text),
            structured: extra_structured.map_or((0, 0.0), |s| self.measure(s)),
            binary_bytes,
        })
    }

    /// Passes `result` of `tool` through the limits of its route; what is stored is `owner`'s.
    /// When the store cannot be reached, over-budget text is still cut, with a notice that
    /// says its full version could not be kept.
    pub async fn shape(
        &self,
        tool: &str,
        route: &Route,
        limits: Limits,
        owner: &Owner,
        mut result: CallToolResult,
    ) -> CallToolResult {
        let parts = parts(&result);
        let structured = result.structured_content.as_ref().map(Value::to_string);
        let extra_structured = structured
            .as_deref()
            .filter(|_| !parts.structured_duplicates_text);
        let binary_bytes: usize = result.content.iter().map(binary_len).sum();
        let Some(size) = self.size(&parts, extra_structured, binary_bytes, limits.soft) else {
            return result;
        };
        let total = size.total();
        if total <= limits.soft {
            return result;
        }
        let ((text_tokens, text_ratio), (structured_tokens, structured_ratio)) =
            (size.text, size.structured);
        if total > limits.hard {
            return error(format!(
                "the result of {tool} is about {total} tokens, over the hard limit of {} tokens for {route}; \
                 nothing was returned. Narrow the call (a smaller range, a page, head/tail or limit arguments) \
                 or raise maxResultTokens for this server",
                limits.hard
            ));
        }
        let reason = |what: &str, tokens: usize| {
            format!(
                "{what} is {tokens} tokens, over the {}-token budget for {route}",
                limits.soft
            )
        };
        let mut appended: Vec<ContentBlock> = Vec::new();
        let mut failures: Vec<String> = Vec::new();

        // Binary content goes to the store whole and is replaced by a reference.
        for block in &mut result.content {
            if binary_len(block) == 0 {
                continue;
            }
            match self.stash_binary(tool, owner, block).await {
                Ok(reference) => *block = reference,
                Err(StoreError::Unavailable(why)) => {
                    self.counts.unkept.fetch_add(1, Ordering::Relaxed);
                    *block = ContentBlock::text(format!(
                        "[binary content of {tool} ({} bytes of base64) left out: it is over the budget for {route}, and it could not be kept for reading back ({why})]",
                        binary_len(block)
                    ));
                }
                Err(e) => failures.push(e.to_string()),
            }
        }

        // Structured content that is not a copy of the text gets at most half the budget.
        let budget = limits.soft.saturating_sub(NOTICE_RESERVE).max(2);
        let text_share = budget - structured_tokens.min(budget / 2);
        let structured_share = budget - text_tokens.min(text_share);
        if let Some(first) = parts.first_text
            && text_tokens > text_share
        {
            match self
                .cut_and_store(
                    tool,
                    owner,
                    &parts.text,
                    (text_tokens, text_ratio),
                    text_share,
                    &reason("the result", text_tokens),
                )
                .await
            {
                Ok((shown, notice, link)) => {
                    if parts.structured_duplicates_text {
                        result.structured_content = result
                            .structured_content
                            .take()
                            .and_then(|s| same_shape(s, &parts.text, &shown));
                    }
                    let mut kept = Vec::with_capacity(result.content.len());
                    for (i, block) in result.content.drain(..).enumerate() {
                        if i == first {
                            kept.push(ContentBlock::text(shown.clone()));
                        } else if block.as_text().is_none() {
                            kept.push(block);
                        }
                    }
                    result.content = kept;
                    appended.push(ContentBlock::text(notice.render()));
                    appended.extend(link);
                }
                Err(e) => failures.push(e.to_string()),
            }
        }

        if let Some(structured) = extra_structured
            && structured_tokens > structured_share
        {
            let reason = reason("structuredContent", structured_tokens);
            match self
                .cut_and_store(
                    tool,
                    owner,
                    structured,
                    (structured_tokens, structured_ratio),
                    structured_share,
                    &reason,
                )
                .await
            {
                Ok((shown, notice, link)) => {
                    result.structured_content = serde_json::from_str::<Value>(&shown)
                        .ok()
                        .filter(Value::is_object);
                    appended.push(ContentBlock::text(notice.render()));
                    appended.extend(link);
                }
                Err(e) => failures.push(e.to_string()),
            }
        }

        if !failures.is_empty() {
            return error(format!(
                "the result of {tool} is over the {}-token budget for {route} and could not be stored for reading back ({}); \
                 nothing was returned rather than a silent cut. Narrow the call and try again",
                limits.soft,
                failures.join("; ")
            ));
        }
        result.content.extend(appended);
        result
    }

    /// Stores `text` whole, cuts it to `budget` tokens, and builds its notice and resource
    /// link; without a reachable store, the notice says the full text was not kept (no link).
    async fn cut_and_store(
        &self,
        tool: &str,
        owner: &Owner,
        text: &str,
        (tokens, ratio): (usize, f64),
        budget: usize,
        reason: &str,
    ) -> Result<(String, Notice, Option<ContentBlock>), StoreError> {
        let (cut, returned) = self.cut_to(text, ratio, budget);
        // The cut already scanned the whole text; telling the rest apart needs only a prefix.
        let mime = if cut.boundary == truncate::Boundary::JsonElement {
            "application/json"
        } else {
            match truncate::detect(sample(text)) {
                truncate::ContentKind::Ndjson => "application/x-ndjson",
                truncate::ContentKind::Markdown => "text/markdown",
                _ => "text/plain",
            }
        };
        let kept = self
            .keep(owner, Stored::text(tool, mime, text.to_owned()))
            .await;
        let mut reason = reason.to_owned();
        if let Some(detail) = &cut.detail {
            // The detail can name a JSON Pointer, whose keys come from the result itself.
            reason.push_str("; ");
            reason.extend(detail.chars().take(MAX_DETAIL_CHARS));
        }
        let id = match kept {
            Ok(id) => id,
            Err(StoreError::Unavailable(why)) => {
                self.counts.unkept.fetch_add(1, Ordering::Relaxed);
                let notice = Notice::unkept(
                    tool,
                    tokens,
                    returned,
                    cut.boundary.as_str(),
                    reason,
                    &why,
                    cut.next_offset,
                );
                return Ok((cut.shown, notice, None));
            }
            Err(e) => return Err(e),
        };
        let notice = Notice::new(
            tool,
            tokens,
            returned,
            cut.boundary.as_str(),
            reason,
            &id,
            cut.next_offset,
        );
        let mut link = Resource::new(resource_uri(&id), id.clone());
        link.description = Some(format!("Full result of {tool} ({tokens} tokens)"));
        link.mime_type = Some(mime.to_owned());
        link.size = Some(text.len() as u64);
        Ok((cut.shown, notice, Some(ContentBlock::resource_link(link))))
    }

    /// Tokens of `text` and its tokens-per-byte ratio: exact up to `RATIO_SAMPLE` bytes, above
    /// that extrapolated from a sample of that size (counting 10 MB exactly takes seconds).
    fn measure(&self, text: &str) -> (usize, f64) {
        let head = sample(text);
        let sampled = self.counter.count(head);
        let ratio = sampled as f64 / head.len().max(1) as f64;
        if head.len() == text.len() {
            (sampled, ratio)
        } else {
            ((text.len() as f64 * ratio).ceil() as usize, ratio)
        }
    }

    /// Cuts `text` to at most `budget` tokens; returns the cut and its exact token count.
    ///
    /// Counting every candidate prefix exactly costs tens of milliseconds on a large result, so
    /// the boundary search uses this text's own bytes-per-token ratio (measured on a sample) and
    /// only the chosen cut is counted exactly; if it overshoots, the target shrinks and the
    /// search runs again.
    fn cut_to(&self, text: &str, ratio: f64, budget: usize) -> (truncate::Cut, usize) {
        // A little headroom: the sample's ratio is rarely exact, and each retry rescans the text.
        let mut target = budget * 97 / 100;
        for _ in 0..4 {
            let estimate = |s: &str| (s.len() as f64 * ratio).ceil() as usize;
            let cut = truncate::cut(text, &|s: &str| estimate(s) <= target);
            let tokens = self.counter.count(&cut.shown);
            if tokens <= budget {
                return (cut, tokens);
            }
            target = (target as f64 * budget as f64 / tokens as f64 * 0.95) as usize;
        }
        let cut = truncate::cut(text, &|s: &str| {
            s.len() <= budget || self.counter.count(s) <= budget
        });
        let tokens = self.counter.count(&cut.shown);
        (cut, tokens)
    }

    /// Moves an image, audio clip or binary resource into the store; returns the reference block.
    async fn stash_binary(
        &self,
        tool: &str,
        owner: &Owner,
        block: &ContentBlock,
    ) -> Result<ContentBlock, StoreError> {
        let (data, mime) = match block {
            ContentBlock::Image(i) => (i.data.clone(), i.mime_type.clone()),
            ContentBlock::Audio(a) => (a.data.clone(), a.mime_type.clone()),
            ContentBlock::Resource(r) => match &r.resource {
                ResourceContents::BlobResourceContents {
                    blob, mime_type, ..
                } => (
                    blob.clone(),
                    mime_type
                        .clone()
                        .unwrap_or_else(|| "application/octet-stream".into()),
                ),
                _ => unreachable!("only blobs have a binary length"),
            },
            _ => unreachable!("only binary blocks are stashed"),
        };
        let size = data.len() / 4 * 3;
        let id = self
            .keep(owner, Stored::new(tool, &mime, store::Body::Blob(data)))
            .await?;
        let uri = resource_uri(&id);
        let mut link = Resource::new(uri.clone(), id.clone());
        link.mime_type = Some(mime.clone());
        link.size = Some(size as u64);
        link.description = Some(format!(
            "{mime} content of {tool} ({size} bytes), kept out of the result to save the budget; read it with resources/read {uri}"
        ));
        Ok(ContentBlock::resource_link(link))
    }
}

/// The first `RATIO_SAMPLE` bytes of `text`, ending on a char boundary.
fn sample(text: &str) -> &str {
    &text[..text.floor_char_boundary(RATIO_SAMPLE)]
}

fn error(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Base64 length of binary content in a block; 0 for text.
fn binary_len(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Image(i) => i.data.len(),
        ContentBlock::Audio(a) => a.data.len(),
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::BlobResourceContents { blob, .. } => blob.len(),
            _ => 0,
        },
        _ => 0,
    }
}

fn parts(result: &CallToolResult) -> Parts {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.as_str()))
        .collect();
    let text = texts.join("\n");
    let structured_duplicates_text = result
        .structured_content
        .as_ref()
        .is_some_and(|s| !text.is_empty() && duplicates(s, &text));
    Parts {
        first_text: result.content.iter().position(|b| b.as_text().is_some()),
        text,
        structured_duplicates_text,
    }
}

/// Whether `structured` carries the same data as `text`: the text is that JSON, or the
/// structure holds most of the text as one of its strings (server-filesystem's
/// `{"content": text}`).
fn duplicates(structured: &Value, text: &str) -> bool {
    match structured {
        Value::Object(map) => {
            map.values().any(|v| holds_text(v, text)) || json_equals(text, structured)
        }
        other => json_equals(text, other),
    }
}

fn holds_text(value: &Value, text: &str) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.len() * 2 >= text.len() && text.contains(s))
}

fn json_equals(text: &str, value: &Value) -> bool {
    let t = text.trim_start();
    (t.starts_with('{') || t.starts_with('['))
        && serde_json::from_str::<Value>(text).is_ok_and(|parsed| &parsed == value)
}

/// The structured content cut the same way as the text it duplicates; `None` if that is impossible.
fn same_shape(structured: Value, original: &str, shown: &str) -> Option<Value> {
    match structured {
        Value::Object(mut map) => {
            if let Some(slot) = map.values_mut().find(|v| holds_text(v, original)) {
                *slot = Value::String(shown.to_owned());
                return Some(Value::Object(map));
            }
            serde_json::from_str::<Value>(shown)
                .ok()
                .filter(Value::is_object)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::ByteEstimate;
    use rmcp::model::ImageContent;
    use serde_json::json;

    fn handler() -> ResultHandler {
        let store = SpillStore::new(std::time::Duration::from_secs(60), 64 << 20, 1 << 20);
        ResultHandler::new(Arc::new(store), Arc::new(ByteEstimate))
    }

    fn route() -> Route {
        Route::CallTool {
            server: "fs".into(),
        }
    }

    fn me() -> &'static Owner {
        static SHARED: std::sync::LazyLock<Owner> = std::sync::LazyLock::new(Owner::shared);
        &SHARED
    }

    const LIMITS: Limits = Limits {
        soft: 1_000,
        hard: 100_000,
    };

    fn texts(result: &CallToolResult) -> Vec<String> {
        result
            .content
            .iter()
            .filter_map(|b| b.as_text().map(|t| t.text.clone()))
            .collect()
    }

    /// Follows the notice's recovery hint page by page and returns the whole text.
    async fn read_back(h: &ResultHandler, notice: &Value) -> String {
        let id = notice["resourceId"].as_str().unwrap();
        let (mut offset, mut out) = (0, String::new());
        loop {
            let page = h.page(id, me(), offset, None, None, 300).await.unwrap();
            assert!(page.content.len() <= 300 * 4 + 4);
            out.push_str(&page.content);
            if !page.has_more {
                return out;
            }
            assert!(page.next_offset > offset, "pages always advance");
            offset = page.next_offset;
        }
    }

    #[tokio::test]
    async fn small_results_pass_through_untouched() {
        let result = CallToolResult::success(vec![ContentBlock::text("hi")]);
        assert_eq!(
            handler()
                .shape("fs__read", &route(), LIMITS, me(), result.clone())
                .await,
            result
        );
    }

    #[tokio::test]
    async fn big_text_is_cut_stored_and_recoverable() {
        let h = handler();
        let text: String = (0..2000)
            .map(|i| format!("line {i}: héllo wörld\n"))
            .collect();
        let shaped = h
            .shape(
                "fs__read",
                &route(),
                LIMITS,
                me(),
                CallToolResult::success(vec![ContentBlock::text(text.clone())]),
            )
            .await;
        let blocks = texts(&shaped);
        assert_eq!(blocks.len(), 2, "cut text + notice");
        assert!(ByteEstimate.count(&blocks[0]) <= LIMITS.soft);
        let notice = Notice::parse(&blocks[1]).expect("notice parses");
        assert_eq!(notice["tool"], "fs__read");
        assert_eq!(notice["originalTokens"], ByteEstimate.count(&text));
        let next = notice["nextOffset"].as_u64().unwrap() as usize;
        assert_eq!(
            blocks[0],
            text.chars().take(next).collect::<String>(),
            "text is shown as a prefix"
        );
        let link = shaped
            .content
            .last()
            .unwrap()
            .as_resource_link()
            .expect("resource link");
        assert_eq!(resource_id(&link.uri), notice["resourceId"].as_str());
        assert_eq!(read_back(&h, &notice).await, text);
        let ResourceContents::TextResourceContents { text: whole, .. } = h
            .read_resource(resource_id(&link.uri).unwrap(), me())
            .await
            .unwrap()
        else {
            panic!("text resource");
        };
        assert_eq!(whole, text);
    }

    #[tokio::test]
    async fn duplicated_structured_content_is_cut_the_same_way() {
        let h = handler();
        let text = "abc def. ".repeat(1000);
        let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
        result.structured_content = Some(json!({"content": text}));
        let shaped = h
            .shape("fs__read_text_file", &route(), LIMITS, me(), result)
            .await;
        let blocks = texts(&shaped);
        assert_eq!(
            shaped.structured_content,
            Some(json!({"content": blocks[0]}))
        );
        assert_eq!(blocks.len(), 2, "one notice for the one document");
    }

    #[tokio::test]
    async fn separate_structured_content_gets_its_own_notice_and_stays_an_object() {
        let h = handler();
        let items: Vec<Value> = (0..500)
            .map(|i| json!({"id": i, "name": format!("item {i}")}))
            .collect();
        let mut result = CallToolResult::success(vec![ContentBlock::text("500 items found")]);
        result.structured_content = Some(json!({"items": items}));
        let shaped = h.shape("db__query", &route(), LIMITS, me(), result).await;
        let structured = shaped
            .structured_content
            .clone()
            .expect("structured content kept");
        assert!(structured.is_object());
        assert!(structured.to_string().len() <= LIMITS.soft * 4);
        let blocks = texts(&shaped);
        assert_eq!(blocks[0], "500 items found");
        let notice = Notice::parse(&blocks[1]).unwrap();
        assert!(
            notice["reason"]
                .as_str()
                .unwrap()
                .contains("structuredContent")
        );
        let original = json!({"items": items}).to_string();
        assert_eq!(read_back(&h, &notice).await, original);
    }

    #[tokio::test]
    async fn over_the_hard_limit_is_a_loud_error() {
        let h = handler();
        let text = "x".repeat(500_000);
        let limits = Limits {
            soft: 1_000,
            hard: 50_000,
        };
        let shaped = h
            .shape(
                "fs__read",
                &route(),
                limits,
                me(),
                CallToolResult::success(vec![ContentBlock::text(text)]),
            )
            .await;
        assert_eq!(shaped.is_error, Some(true));
        let msg = &texts(&shaped)[0];
        for needle in [
            "fs__read",
            "125000 tokens",
            "50000",
            "call_tool on server \"fs\"",
            "maxResultTokens",
            "Narrow",
        ] {
            assert!(msg.contains(needle), "{needle} missing in {msg}");
        }
    }

    #[tokio::test]
    async fn images_over_budget_go_to_the_store() {
        let h = handler();
        let data = "iVBORw0KGgo".repeat(1000);
        let result = CallToolResult::success(vec![
            ContentBlock::text("a chart"),
            ContentBlock::Image(ImageContent::new(data.clone(), "image/png")),
        ]);
        let shaped = h.shape("plot__draw", &route(), LIMITS, me(), result).await;
        assert_eq!(texts(&shaped), ["a chart"]);
        let link = shaped.content[1]
            .as_resource_link()
            .expect("image replaced by a link");
        assert_eq!(link.mime_type.as_deref(), Some("image/png"));
        let id = resource_id(&link.uri).unwrap();
        let ResourceContents::BlobResourceContents { blob, .. } =
            h.read_resource(id, me()).await.unwrap()
        else {
            panic!("blob resource");
        };
        assert_eq!(blob, data);
        let err = h
            .page(id, me(), 0, None, None, 100)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("binary") && err.contains("resources/read"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn pages_search_and_pointers_read_the_stored_text() {
        let h = handler();
        let doc = json!({"meta": {"n": 2}, "items": [{"name": "ä"}, {"name": "needle here"}]})
            .to_string();
        let id = h
            .store
            .put(me(), Stored::text("t", "application/json", doc.clone()))
            .await
            .unwrap();
        let page = h.page(&id, me(), 0, Some(10), None, 1000).await.unwrap();
        assert_eq!(
            page.content,
            doc.chars().take(page.next_offset).collect::<String>()
        );
        assert!(page.has_more && page.total == doc.chars().count());
        let one = h
            .page(&id, me(), 0, None, Some("/items/1/name"), 1000)
            .await
            .unwrap();
        assert_eq!(one.content, "needle here");
        let err = h
            .page(&id, me(), 0, None, Some("/nope"), 1000)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("/nope"), "{err}");
        let err = h
            .page(&id, me(), 10_000, None, None, 1000)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("past the end"), "{err}");
        let (matches, total) = h.search(&id, me(), "needle", 0, 10).await.unwrap();
        assert_eq!(total, 1);
        let from: String = doc.chars().skip(matches[0].offset).collect();
        assert!(
            from.starts_with("needle"),
            "offset points at the match: {from}"
        );
        let (_, total) = h.search(&id, me(), "[unclosed", 0, 10).await.unwrap();
        assert_eq!(total, 0, "an invalid regex is searched literally");
        let huge = format!("({}", "ab".repeat(250_000));
        let err = h
            .search(&id, me(), &huge, 0, 10)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("too large") && err.contains("500001 bytes"),
            "{err}"
        );
    }
}
