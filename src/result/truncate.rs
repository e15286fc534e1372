//! PLACEHOLDER until the boundary-truncation module lands: line cuts only.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    Json,
    Ndjson,
    Markdown,
    Code,
    Text,
}

pub fn detect(text: &str) -> ContentKind {
    match text.trim_start().chars().next() {
        Some('{' | '[') => ContentKind::Json,
        _ => ContentKind::Text,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    JsonElement,
    Line,
    Section,
    Paragraph,
    Sentence,
    Char,
}

impl Boundary {
    pub fn as_str(self) -> &'static str {
        match self {
            Boundary::JsonElement => "json-element",
            Boundary::Line => "line",
            Boundary::Section => "section",
            Boundary::Paragraph => "paragraph",
            Boundary::Sentence => "sentence",
            Boundary::Char => "char",
        }
    }
}

pub struct Cut {
    pub shown: String,
    pub next_offset: usize,
    pub boundary: Boundary,
    pub detail: Option<String>,
}

pub fn cut(text: &str, fits: &dyn Fn(&str) -> bool) -> Cut {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let (mut lo, mut hi) = (0usize, chars.len());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let end = chars.get(mid).map_or(text.len(), |c| c.0);
        if fits(&text[..end]) {
            lo = mid
        } else {
            hi = mid - 1
        }
    }
    let end = chars.get(lo).map_or(text.len(), |c| c.0);
    Cut {
        shown: text[..end].to_owned(),
        next_offset: lo,
        boundary: Boundary::Char,
        detail: None,
    }
}

pub fn page(text: &str, from: usize, max_chars: usize) -> (String, usize) {
    let page: String = text.chars().skip(from).take(max_chars).collect();
    let n = page.chars().count();
    (page, from + n)
}
