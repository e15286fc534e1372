//! Reading stored results back: boundary-aligned pages (optionally of a JSON Pointer's value),
//! pattern search with offsets, and whole resources.

use std::borrow::Cow;

use rmcp::model::ResourceContents;
use serde::Serialize;
use serde_json::Value;

use super::{ResultHandler, resource_uri, truncate};
use crate::store::{Body, Owner, Slice, StoreError, Stored};

/// Characters tried per budget token before the page is measured.
const CHARS_PER_TOKEN: usize = 4;
/// Bytes of context shown on each side of a match inside a very long line.
const WINDOW: usize = 150;
/// Lines longer than this are shown as a window around the match.
const LONG_LINE: usize = 400;
/// Bytes a compiled search pattern may take; a pattern over it is an error, never a panic.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("result {id} is binary ({mime}); read it with resources/read {uri}")]
    Binary {
        id: String,
        mime: String,
        uri: String,
    },
    #[error("offset {offset} is past the end of result {id}, which has {total} characters")]
    PastEnd {
        id: String,
        offset: usize,
        total: usize,
    },
    #[error(
        "result {id} is not JSON, so it cannot be read by JSON Pointer; page through it without \"pointer\""
    )]
    NotJson { id: String },
    #[error(
        "JSON Pointer \"{}\" matches nothing in result {id}; pointers look like /items/0/name",
        crate::echo::echo(.pointer)
    )]
    NoSuchPointer { id: String, pointer: String },
    #[error(
        "the pattern ({bytes} bytes) is too large to search with, as a regular expression or as text; search for a shorter part of it"
    )]
    PatternTooLarge { bytes: usize },
}

/// One page of a stored result. `content` is exactly the characters `offset..nextOffset`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    pub resource_id: String,
    pub offset: usize,
    pub next_offset: usize,
    pub has_more: bool,
    pub total: usize,
    pub content: String,
}

/// One match of a search in a stored result.
#[derive(Debug, Serialize)]
pub struct Match {
    /// Character offset of the match: pass it to the lookup tool to read from there.
    pub offset: usize,
    /// 1-based line number.
    pub line: usize,
    /// The matching line (with context lines), or a window around the match in a long line.
    pub text: String,
}

impl ResultHandler {
    /// A page of at most `budget` tokens (and `limit` chars, if given) starting at char `offset`.
    /// Without a pointer only the part of the result the page covers is read from the store.
    pub async fn page(
        &self,
        id: &str,
        owner: &Owner,
        offset: usize,
        limit: Option<usize>,
        pointer: Option<&str>,
        budget: usize,
    ) -> Result<Page, LookupError> {
        let mut max_chars = limit
            .unwrap_or(usize::MAX)
            .min(budget.saturating_mul(CHARS_PER_TOKEN))
            .max(1);
        let slice = match pointer.filter(|p| !p.is_empty()) {
            None => {
                let slice = self
                    .store
                    .slice(id, owner, offset, max_chars.saturating_add(1))
                    .await?;
                binary_check(id, &slice.stored)?;
                slice
            }
            Some(pointer) => {
                let stored = self.text_of(id, owner).await?;
                let value: Value = serde_json::from_str(stored.as_text().unwrap_or_default())
                    .map_err(|_| LookupError::NotJson { id: id.to_owned() })?;
                let found = value
                    .pointer(pointer)
                    .ok_or_else(|| LookupError::NoSuchPointer {
                        id: id.to_owned(),
                        pointer: pointer.to_owned(),
                    })?;
                let text = match found {
                    Value::String(s) => s.clone(),
                    other => serde_json::to_string_pretty(other).expect("value serializes"),
                };
                let derived = Stored::text(&stored.tool, "application/json", text);
                let total = derived.char_len();
                Slice {
                    stored: std::sync::Arc::new(derived),
                    start: 0,
                    total,
                }
            }
        };
        let total = slice.total;
        if offset > total {
            return Err(LookupError::PastEnd {
                id: id.to_owned(),
                offset,
                total,
            });
        }
        // Char offsets within the slice's text, which starts at char `slice.start`.
        let source = &slice.stored;
        let local = offset - slice.start.min(offset);
        let text = source.as_text().unwrap_or_default();
        let start = source.byte_offset(local);
        let (content, taken) = loop {
            // A window one char wider than the page lets the boundary search see what follows.
            let window = &text[start..source.byte_offset(local + max_chars + 1)];
            let (content, next) = truncate::page(window, 0, max_chars);
            let tokens = if content.len() <= budget {
                0
            } else {
                self.counter.count(&content)
            };
            if tokens <= budget || max_chars == 1 {
                break (content, next);
            }
            max_chars = (max_chars * budget / tokens * 9 / 10).clamp(1, max_chars - 1);
        };
        let next_offset = offset + taken;
        Ok(Page {
            resource_id: id.to_owned(),
            offset,
            next_offset,
            has_more: next_offset < total,
            total,
            content,
        })
    }

    /// Lines of a stored result matching `pattern` (a regex; taken literally if it is not one).
    pub async fn search(
        &self,
        id: &str,
        owner: &Owner,
        pattern: &str,
        context_lines: usize,
        max_matches: usize,
    ) -> Result<(Vec<Match>, usize), LookupError> {
        let stored = self.text_of(id, owner).await?;
        search_text(
            stored.as_text().unwrap_or_default(),
            pattern,
            context_lines,
            max_matches,
        )
    }

    /// The whole stored result as an MCP resource.
    pub async fn read_resource(
        &self,
        id: &str,
        owner: &Owner,
    ) -> Result<ResourceContents, LookupError> {
        let stored = self.store.get(id, owner).await?;
        let uri = resource_uri(id);
        Ok(match &stored.body {
            Body::Text(text) => ResourceContents::TextResourceContents {
                uri,
                mime_type: Some(stored.mime_type.clone()),
                text: text.clone(),
                meta: None,
            },
            Body::Blob(blob) => ResourceContents::BlobResourceContents {
                uri,
                mime_type: Some(stored.mime_type.clone()),
                blob: blob.clone(),
                meta: None,
            },
        })
    }

    async fn text_of(
        &self,
        id: &str,
        owner: &Owner,
    ) -> Result<std::sync::Arc<Stored>, LookupError> {
        let stored = self.store.get(id, owner).await?;
        binary_check(id, &stored)?;
        Ok(stored)
    }
}

/// A binary result cannot be paged or searched: it is read whole with `resources/read`.
fn binary_check(id: &str, stored: &Stored) -> Result<(), LookupError> {
    if stored.as_text().is_none() {
        return Err(LookupError::Binary {
            id: id.to_owned(),
            mime: stored.mime_type.clone(),
            uri: resource_uri(id),
        });
    }
    Ok(())
}

/// Lines of `text` matching `pattern` (a regex; taken literally if it is not one), with
/// `context_lines` around each, at most `max_matches` of them; also returns how many matched.
pub fn search_text(
    text: &str,
    pattern: &str,
    context_lines: usize,
    max_matches: usize,
) -> Result<(Vec<Match>, usize), LookupError> {
    let compile = |p: &str| {
        regex::RegexBuilder::new(p)
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
    };
    let regex = compile(pattern)
        .or_else(|_| compile(&regex::escape(pattern)))
        .map_err(|_| LookupError::PatternTooLarge {
            bytes: pattern.len(),
        })?;
    let (mut matches, mut total) = (Vec::new(), 0);
    let (mut chars, mut lines, mut scanned) = (0usize, 1usize, 0usize);
    let mut last_line_start = usize::MAX;
    for m in regex.find_iter(text) {
        if m.as_str().is_empty() {
            continue;
        }
        total += 1;
        if matches.len() == max_matches {
            continue;
        }
        let before = &text[scanned..m.start()];
        chars += before.chars().count();
        lines += before.bytes().filter(|&b| b == b'\n').count();
        scanned = m.start();
        let line_start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[m.start()..]
            .find('\n')
            .map_or(text.len(), |i| m.start() + i);
        if line_end - line_start > LONG_LINE {
            matches.push(Match {
                offset: chars,
                line: lines,
                text: window(text, m.start(), m.end()),
            });
        } else if line_start != last_line_start {
            last_line_start = line_start;
            matches.push(Match {
                offset: chars,
                line: lines,
                text: with_context(text, line_start, line_end, context_lines),
            });
        }
    }
    Ok((matches, total))
}

/// About `WINDOW` bytes either side of a match, on char boundaries, marked with ellipses.
fn window(text: &str, start: usize, end: usize) -> String {
    let from = text.floor_char_boundary(start.saturating_sub(WINDOW));
    let to = text.ceil_char_boundary(end + WINDOW);
    let lead: Cow<str> = if from > 0 { "…".into() } else { "".into() };
    let tail: Cow<str> = if to < text.len() {
        "…".into()
    } else {
        "".into()
    };
    format!("{lead}{}{tail}", &text[from..to])
}

/// The line `start..end` with up to `n` lines before and after it.
fn with_context(text: &str, start: usize, end: usize, n: usize) -> String {
    let mut from = start;
    for _ in 0..n {
        if from == 0 {
            break;
        }
        from = text[..from - 1].rfind('\n').map_or(0, |i| i + 1);
    }
    let mut to = end;
    for _ in 0..n {
        if to >= text.len() {
            break;
        }
        to = text[to + 1..].find('\n').map_or(text.len(), |i| to + 1 + i);
    }
    text[from..to].to_owned()
}
