//! Text cutting: the longest fitting prefix ending at a line, then refined inside an overlong
//! line (sentence, word, char) or coarsened to a section or paragraph when that keeps enough.

use super::detect::{heading_level, is_fence};
use super::{Boundary, ContentKind, Cut, gallop};

/// Boundaries tried for a kind: `coarse` ones are preferred when they keep at least half of the
/// line cut; `fine` ones are searched in order, the first being the primary (line) level.
fn levels(kind: ContentKind) -> (&'static [Boundary], &'static [Boundary]) {
    use Boundary::*;
    match kind {
        ContentKind::Markdown => (&[Section, Paragraph], &[Line, Sentence, Word, Char]),
        ContentKind::Code => (&[Paragraph], &[Line, Word, Char]),
        ContentKind::Text => (&[], &[Line, Sentence, Word, Char]),
        ContentKind::Json | ContentKind::Ndjson => (&[], &[Line, Word, Char]),
    }
}

/// Cuts `text` (of the given kind, treated as plain lines) to a fitting prefix.
pub(super) fn cut(text: &str, kind: ContentKind, fits: &dyn Fn(&str) -> bool) -> Cut {
    let (coarse, fine) = levels(kind);
    let (mut pos, mut boundary) = refine(text, 0, text.len(), fine, fits);
    if pos > 0 && pos < text.len() && boundary == Boundary::Line {
        let markdown = kind == ContentKind::Markdown;
        for &level in coarse {
            if let Some(start) = last_block_start(text, pos, level, markdown)
                && start * 2 >= pos
            {
                (pos, boundary) = (start, level);
                break;
            }
        }
    }
    Cut {
        shown: text[..pos].to_owned(),
        next_offset: text[..pos].chars().count(),
        boundary,
        detail: None,
    }
}

/// The longest fitting prefix `text[..p]` with `start <= p <= end`, `p` a boundary of
/// `levels[0]` (or `end`), given that `text[..start]` fits; when the unit after `p` is longer
/// than `p` itself, the finer levels are tried inside it and win if they more than double `p`.
fn refine(
    text: &str,
    start: usize,
    end: usize,
    levels: &[Boundary],
    fits: &dyn Fn(&str) -> bool,
) -> (usize, Boundary) {
    let level = levels[0];
    let mut candidates = Candidates {
        text,
        level,
        cursor: start,
        end,
        found: Vec::new(),
    };
    let k = gallop(|k| candidates.get(k - 1).map(|p| fits(&text[..p])));
    let p = if k == 0 {
        start
    } else {
        candidates.found[k - 1]
    };
    if p == end {
        return (p, level);
    }
    let next = candidates.get(k).unwrap_or(end);
    if levels.len() > 1 && next - p > p {
        let (q, finer) = refine(text, p, next, &levels[1..], fits);
        if q - p > p {
            return (q, finer);
        }
    }
    (p, level)
}

/// Boundaries of one level in `(cursor, end]`, found lazily; `end` is always the last.
struct Candidates<'a> {
    text: &'a str,
    level: Boundary,
    cursor: usize,
    end: usize,
    found: Vec<usize>,
}

impl Candidates<'_> {
    fn get(&mut self, k: usize) -> Option<usize> {
        while self.found.len() <= k {
            if self.cursor >= self.end {
                return None;
            }
            let next = next_boundary(self.text, self.cursor, self.end, self.level);
            self.cursor = next.unwrap_or(self.end);
            self.found.push(self.cursor);
        }
        Some(self.found[k])
    }
}

/// The first boundary `p` of `level` with `from < p < end`, if any.
fn next_boundary(text: &str, from: usize, end: usize, level: Boundary) -> Option<usize> {
    let s = &text[from..end];
    let at = match level {
        Boundary::Line => s.find('\n').map(|i| i + 1),
        Boundary::Sentence => sentence_start(s),
        Boundary::Word => {
            let mut after_space = false;
            s.char_indices().find_map(|(i, c)| {
                let found = after_space && !c.is_whitespace();
                after_space = c.is_whitespace();
                found.then_some(i)
            })
        }
        _ => s.chars().next().map(char::len_utf8),
    };
    at.map(|i| from + i).filter(|&p| p < end)
}

/// Byte index in `s` where the first sentence after `s`'s start begins: after `.`, `!` or `?`
/// (with closing quotes or brackets) and whitespace, or right after a CJK full stop.
fn sentence_start(s: &str) -> Option<usize> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Text,
        Stop,
        Space,
    }
    let mut state = State::Text;
    for (i, c) in s.char_indices() {
        if state == State::Space && !c.is_whitespace() && i > 0 {
            return Some(i);
        }
        state = match (state, c) {
            (State::Stop | State::Space, c) if c.is_whitespace() => State::Space,
            (State::Stop, '"' | '\'' | ')' | ']' | '.' | '!' | '?') => State::Stop,
            (_, '.' | '!' | '?') => State::Stop,
            (_, '。' | '！' | '？') if i + c.len_utf8() < s.len() => {
                return Some(i + c.len_utf8());
            }
            _ => State::Text,
        };
    }
    None
}

/// The last start of a block of `level` (section or paragraph) in `(0, pos]`, where `pos` is a
/// line start. Markdown blocks are not looked for inside fenced code.
fn last_block_start(text: &str, pos: usize, level: Boundary, markdown: bool) -> Option<usize> {
    let (mut last, mut line_start) = (None, 0);
    let (mut in_fence, mut prev_blank, mut prev_fence_end) = (false, false, false);
    while line_start <= pos && line_start < text.len() {
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i);
        let line = &text[line_start..line_end];
        let blank = line.trim().is_empty();
        let fence = markdown && is_fence(line);
        let heading = markdown && !in_fence && heading_level(line).is_some();
        let starts = match level {
            Boundary::Section => heading,
            _ => {
                !in_fence
                    && !blank
                    && (prev_blank || prev_fence_end || heading || (fence && line_start > 0))
            }
        };
        if starts && line_start > 0 {
            last = Some(line_start);
        }
        prev_fence_end = fence && in_fence;
        if fence {
            in_fence = !in_fence;
        }
        prev_blank = blank;
        line_start = line_end + 1;
    }
    last
}
