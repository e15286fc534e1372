//! Boundary truncation: cutting a result's text at the most meaningful boundary for its kind
//! (JSON element, Markdown section, line, sentence, ...) and paging the rest.
//!
//! Pure functions over `&str`: no I/O, no token counting (the caller passes `fits`), no MCP.
//! Offsets in the API count chars (Unicode scalar values), as the result-lookup tools do.

mod detect;
mod json;
mod text;

#[cfg(test)]
mod tests;

pub use detect::detect;

/// What kind of text a result is, detected from the content itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    Json,
    Ndjson,
    Markdown,
    Code,
    Text,
}

/// Where a cut was made; `as_str()` gives "json-element", "line", "section", "paragraph",
/// "sentence", "word", "char".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    JsonElement,
    Line,
    Section,
    /// A paragraph, or in source code a block of lines between blank lines.
    Paragraph,
    Sentence,
    /// After a run of whitespace, inside a line too long to cut at a sentence.
    Word,
    Char,
}

impl Boundary {
    /// The name used in the truncation notice.
    pub fn as_str(self) -> &'static str {
        match self {
            Boundary::JsonElement => "json-element",
            Boundary::Line => "line",
            Boundary::Section => "section",
            Boundary::Paragraph => "paragraph",
            Boundary::Sentence => "sentence",
            Boundary::Word => "word",
            Boundary::Char => "char",
        }
    }
}

/// The outcome of [`cut`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// What to show the client. For JSON: still valid JSON (the largest collection shortened);
    /// otherwise a prefix of the original.
    pub shown: String,
    /// Char offset in the ORIGINAL text of the first content not shown; reading the original
    /// from here on recovers what was left out. Equals the total char count if nothing was cut.
    pub next_offset: usize,
    pub boundary: Boundary,
    /// Human-readable detail, e.g. "kept 120 of 5000 elements of /items" (JSON), or None.
    pub detail: Option<String>,
}

impl Cut {
    /// True when `shown` is the whole original.
    pub fn is_whole(&self, original: &str) -> bool {
        self.shown.len() == original.len()
    }
}

/// Cuts `text` so that `fits(shown)` holds, at the most meaningful boundary for its kind.
///
/// `fits` must be monotone (a shorter string never fits less); it is called O(log n) times, on
/// candidates about as long as the final cut (plus once on the whole text when that is needed to
/// know whether it fits). A text that fits is returned whole. If not even one char fits, `shown`
/// is empty.
pub fn cut(text: &str, fits: &dyn Fn(&str) -> bool) -> Cut {
    if let Some(scan) = json::scan(text) {
        if let Some(cut) = json::cut(text, &scan, fits) {
            return cut;
        }
        return text::cut(text, ContentKind::Json, fits);
    }
    text::cut(text, detect::detect_non_json(text), fits)
}

/// Splits `text[from..]` (char offsets) into a page of at most `max_chars` chars ending at a good
/// boundary, returning `(page_text, next_offset)`.
///
/// Boundaries, in order of preference: a line end, a JSON element end (after `,` `}` `]`),
/// whitespace, any char; a boundary counts only in the second half of the page, so a page is
/// never much shorter than `max_chars` (at least 1) unless the text ends. A page is empty only
/// when `from` is at (or past) the end; following `next_offset` from 0 rebuilds `text` exactly.
pub fn page(text: &str, from: usize, max_chars: usize) -> (String, usize) {
    let max_chars = max_chars.max(1);
    let Some((start, _)) = text.char_indices().nth(from) else {
        return (String::new(), from.min(text.chars().count()));
    };
    let rest = &text[start..];
    let end = match rest.char_indices().nth(max_chars) {
        None => return (rest.to_owned(), from + rest.chars().count()),
        Some((end, _)) => end,
    };
    let window = &rest[..end];
    let half = window
        .char_indices()
        .nth(max_chars / 2)
        .map_or(0, |(i, _)| i);
    let after = |found: Option<usize>| found.map(|i| i + 1).filter(|&i| i > half);
    let len = after(window.rfind('\n'))
        .or_else(|| after(window.rfind([',', '}', ']'])))
        .or_else(|| {
            let (i, c) = window
                .char_indices()
                .rev()
                .find(|(_, c)| c.is_whitespace())?;
            Some(i + c.len_utf8()).filter(|&i| i > half)
        })
        .unwrap_or(end);
    let page = &window[..len];
    (page.to_owned(), from + page.chars().count())
}

/// Largest `k` such that `ok(k)` holds, probing 1, 2, 4, ... then bisecting; `ok(0)` is assumed.
///
/// `ok` returns None past the last candidate (treated as not ok, and not counted as a call).
/// Calls `ok` about 2·log2(k) times, on candidates at most twice as far as the answer.
fn gallop(mut ok: impl FnMut(usize) -> Option<bool>) -> usize {
    let (mut lo, mut hi) = (0, 1);
    while ok(hi) == Some(true) {
        lo = hi;
        hi *= 2;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) == Some(true) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}
