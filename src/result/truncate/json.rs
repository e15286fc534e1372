//! JSON cutting: a span-tracking scanner (serde_json gives no offsets) that validates the whole
//! document in one pass and finds the largest collection, and a cut that drops that
//! collection's tail elements while keeping the original formatting of everything shown.

use super::{Boundary, Cut, gallop};

/// Deepest nesting accepted, as serde_json's default recursion limit (it rejects the 128th
/// level); deeper texts are cut as text, so a json-element cut always parses.
const MAX_DEPTH: usize = 127;

/// A collection (array or object) and, recursively, its largest child collection.
#[derive(Debug)]
pub(super) struct Collection {
    /// Byte index of `[` or `{`.
    open: usize,
    /// Byte index of the matching `]` or `}`.
    close: usize,
    count: usize,
    is_object: bool,
    /// How its parent reaches it: an array index or an object key (byte span of the raw key).
    step: Step,
    largest_child: Option<Box<Collection>>,
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Root,
    Index(usize),
    Key(usize, usize),
}

impl Collection {
    fn size(&self) -> usize {
        self.close + 1 - self.open
    }
}

/// One frame of the scanner's explicit stack (no recursion, so deep input cannot overflow).
struct Frame {
    open: usize,
    is_object: bool,
    count: usize,
    step: Step,
    /// Raw key span of the member being read, for objects.
    key: (usize, usize),
    largest_child: Option<Box<Collection>>,
}

/// Validates `text` as exactly one JSON array or object (surrounding whitespace allowed) and
/// returns its root collection with the chain of largest children; None if it is not that.
pub(super) fn scan(text: &str) -> Option<Collection> {
    let b = text.as_bytes();
    let mut i = ws(b, 0);
    if !matches!(b.get(i), Some(b'{' | b'[')) {
        return None;
    }
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        // A value starts at `i`.
        match *b.get(i)? {
            open @ (b'{' | b'[') => {
                if stack.len() == MAX_DEPTH {
                    return None;
                }
                let step = match stack.last() {
                    None => Step::Root,
                    Some(f) if f.is_object => Step::Key(f.key.0, f.key.1),
                    Some(f) => Step::Index(f.count),
                };
                let is_object = open == b'{';
                stack.push(Frame {
                    open: i,
                    is_object,
                    count: 0,
                    step,
                    key: (0, 0),
                    largest_child: None,
                });
                i = ws(b, i + 1);
                let empty_close = if is_object { b'}' } else { b']' };
                if b.get(i) != Some(&empty_close) {
                    if is_object {
                        i = key(b, i, stack.last_mut()?)?;
                    }
                    continue;
                }
                if let Some(root) = close_frame(b, i, &mut stack)? {
                    return (ws(b, i + 1) == b.len()).then_some(root);
                }
                i += 1;
            }
            b'"' => i = string(b, i)?,
            b't' => i = literal(b, i, b"true")?,
            b'f' => i = literal(b, i, b"false")?,
            b'n' => i = literal(b, i, b"null")?,
            b'-' | b'0'..=b'9' => i = number(b, i)?,
            _ => return None,
        }
        // After a value: separators and closes until the next value starts.
        loop {
            i = ws(b, i);
            let top = stack.last_mut()?;
            match b.get(i) {
                Some(b',') => {
                    top.count += 1;
                    i = ws(b, i + 1);
                    if top.is_object {
                        i = key(b, i, top)?;
                    }
                    break;
                }
                Some(b'}' | b']') => {
                    top.count += 1;
                    if let Some(root) = close_frame(b, i, &mut stack)? {
                        return (ws(b, i + 1) == b.len()).then_some(root);
                    }
                    i += 1;
                }
                _ => return None,
            }
        }
    }
}

/// Pops the top frame, whose close bracket is at `i`, into its parent's largest child.
/// Returns Some(root) when the root closed. None if the bracket does not match.
fn close_frame(b: &[u8], i: usize, stack: &mut Vec<Frame>) -> Option<Option<Collection>> {
    let frame = stack.pop()?;
    if b[i] != if frame.is_object { b'}' } else { b']' } {
        return None;
    }
    let done = Collection {
        open: frame.open,
        close: i,
        count: frame.count,
        is_object: frame.is_object,
        step: frame.step,
        largest_child: frame.largest_child,
    };
    let Some(parent) = stack.last_mut() else {
        return Some(Some(done));
    };
    if parent
        .largest_child
        .as_ref()
        .is_none_or(|c| done.size() > c.size())
    {
        parent.largest_child = Some(Box::new(done));
    }
    Some(None)
}

/// Reads `"key" :` at `i` into `frame.key`; returns the index where the member's value starts.
fn key(b: &[u8], i: usize, frame: &mut Frame) -> Option<usize> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let end = string(b, i)?;
    frame.key = (i, end);
    let colon = ws(b, end);
    (b.get(colon) == Some(&b':')).then(|| ws(b, colon + 1))
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = b.get(i) {
        i += 1;
    }
    i
}

/// Validates the string starting at the quote at `i`; returns the index after its closing quote.
fn string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => {
                i += 1;
                match *b.get(i)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 1,
                    b'u' => {
                        let unit = hex4(b, i + 1)?;
                        i += 5;
                        if (0xDC00..0xE000).contains(&unit) {
                            return None;
                        }
                        if (0xD800..0xDC00).contains(&unit) {
                            // A high surrogate must be followed by an escaped low one.
                            if b.get(i..i + 2)? != b"\\u" {
                                return None;
                            }
                            if !(0xDC00..0xE000).contains(&hex4(b, i + 2)?) {
                                return None;
                            }
                            i += 6;
                        }
                    }
                    _ => return None,
                }
            }
            0..0x20 => return None,
            _ => i += 1,
        }
    }
}

fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let digits = std::str::from_utf8(b.get(i..i + 4)?).ok()?;
    if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

/// Validates a number (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`) at `i`.
fn number(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |i: usize| i + b[i..].iter().take_while(|d| d.is_ascii_digit()).count();
    if b[i] == b'-' {
        i += 1;
    }
    match b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(i),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let end = digits(i);
        if end == i {
            return None;
        }
        i = end;
    }
    Some(i)
}

/// Index after the (already validated) value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> usize {
    match b[i] {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b[j] {
                    b'"' => {
                        j = skip_string(b, j);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            i + b[i..]
                .iter()
                .take_while(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
                .count()
        }
    }
}

fn skip_string(b: &[u8], mut i: usize) -> usize {
    i += 1;
    loop {
        match b[i] {
            b'"' => return i + 1,
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// The collection being shortened, located in the original text.
struct Target {
    open: usize,
    close: usize,
    count: usize,
    is_object: bool,
    pointer: String,
}

/// Cuts a scanned JSON document between elements of its largest collection, keeping the
/// original formatting of what is shown. None when not even one element fits (an empty
/// collection shows nothing; the caller cuts the text instead).
///
/// The largest collection: from the root, descend into the largest child collection while it
/// holds more than half of its parent's bytes. If not one of its elements fits, its parent is
/// cut instead, and so on up to the root.
pub(super) fn cut(text: &str, root: &Collection, fits: &dyn Fn(&str) -> bool) -> Option<Cut> {
    let mut chain = vec![(root, String::new())];
    while let Some((node, pointer)) = chain.last() {
        let Some(child) = node
            .largest_child
            .as_deref()
            .filter(|c| c.size() * 2 > node.size())
        else {
            break;
        };
        let mut pointer = pointer.clone();
        push_step(text, &mut pointer, child.step);
        chain.push((child, pointer));
    }
    chain.into_iter().rev().find_map(|(node, pointer)| {
        let target = Target {
            open: node.open,
            close: node.close,
            count: node.count,
            is_object: node.is_object,
            pointer,
        };
        cut_collection(text, target, fits)
    })
}

/// Cuts between the elements of `target`, keeping at least one. If not one fits whole and the
/// first is itself a non-empty collection, that element is cut instead (its parent keeps only it).
fn cut_collection(text: &str, mut target: Target, fits: &dyn Fn(&str) -> bool) -> Option<Cut> {
    if target.count == 0 {
        return None;
    }
    let b = text.as_bytes();
    // Byte ranges removed from the original by outer levels; per outer level, what the detail
    // says of it and where its first omitted element starts.
    let mut removed: Vec<(usize, usize)> = Vec::new();
    let mut outer: Vec<(Option<String>, usize)> = Vec::new();
    loop {
        let mut elems = Elems::new(b, &target);
        let tail_end = ws_back(b, target.close, target.open + 1);
        let shown = |elems: &mut Elems, k: usize| -> Option<String> {
            let from = if k == 0 {
                target.open + 1
            } else {
                elems.get(k - 1)?.2
            };
            let mut ranges = removed.clone();
            if k < target.count {
                ranges.push((from, tail_end));
            }
            Some(without(text, &ranges))
        };
        let kept = gallop(|k| {
            if k > target.count {
                return None;
            }
            shown(&mut elems, k).map(|s| fits(&s))
        });
        if kept == target.count && removed.is_empty() {
            return Some(Cut {
                shown: text.to_owned(),
                next_offset: text.chars().count(),
                boundary: Boundary::JsonElement,
                detail: None,
            });
        }
        if kept == 0
            && let Some((start, value, end)) = elems.get(0)
            && matches!(b[value], b'[' | b'{')
        {
            let mut pointer = target.pointer.clone();
            let step = if target.is_object {
                Step::Key(start, skip_string(b, start))
            } else {
                Step::Index(0)
            };
            push_step(text, &mut pointer, step);
            let inner = Target {
                open: value,
                close: end - 1,
                count: 0,
                is_object: b[value] == b'{',
                pointer,
            };
            let count = Elems::new(b, &inner).count();
            if count > 0 {
                let note = (target.count > 1)
                    .then(|| format!("only the first of {} of {}", noun(&target), place(&target)));
                let resume = elems.get(1).map_or(target.close, |e| e.0);
                outer.push((note, resume));
                removed.push((end, tail_end));
                target = Target { count, ..inner };
                continue;
            }
        }
        if kept == 0 {
            return None;
        }
        let shown = shown(&mut elems, kept)?;
        let next = match elems.get(kept) {
            Some((start, _, _)) => start,
            // Only with a non-monotone `fits`: the inner collection is whole after all.
            None => outer.last().map_or(target.close, |o| o.1),
        };
        let mut detail = format!("kept {kept} of {} of {}", noun(&target), place(&target));
        for (note, _) in outer
            .iter()
            .rev()
            .filter_map(|(n, r)| Some((n.as_ref()?, r)))
        {
            detail.push_str("; ");
            detail.push_str(note);
        }
        return Some(Cut {
            shown,
            next_offset: text[..next].chars().count(),
            boundary: Boundary::JsonElement,
            detail: Some(detail),
        });
    }
}

fn noun(t: &Target) -> String {
    let what = match (t.is_object, t.count) {
        (true, 1) => "member",
        (true, _) => "members",
        (false, 1) => "element",
        (false, _) => "elements",
    };
    format!("{} {what}", t.count)
}

fn place(t: &Target) -> String {
    match (t.pointer.is_empty(), t.is_object) {
        (false, _) => t.pointer.clone(),
        (true, true) => "the root object".to_owned(),
        (true, false) => "the root array".to_owned(),
    }
}

/// Appends one JSON Pointer reference token (RFC 6901: `~` as `~0`, `/` as `~1`).
fn push_step(text: &str, pointer: &mut String, step: Step) {
    match step {
        Step::Root => {}
        Step::Index(i) => {
            pointer.push('/');
            pointer.push_str(&i.to_string());
        }
        Step::Key(start, end) => {
            pointer.push('/');
            let key: String = serde_json::from_str(&text[start..end]).unwrap_or_default();
            pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
        }
    }
}

/// `text` without the given sorted, disjoint byte ranges.
fn without(text: &str, ranges: &[(usize, usize)]) -> String {
    let mut ranges = ranges.to_vec();
    ranges.sort_unstable();
    let removed: usize = ranges.iter().map(|(a, z)| z - a).sum();
    let mut out = String::with_capacity(text.len() - removed);
    let mut at = 0;
    for (a, z) in ranges {
        out.push_str(&text[at..a]);
        at = z;
    }
    out.push_str(&text[at..]);
    out
}

/// Start of the whitespace run that ends at `i` (not before `floor`).
fn ws_back(b: &[u8], mut i: usize, floor: usize) -> usize {
    while i > floor && matches!(b[i - 1], b' ' | b'\n' | b'\r' | b'\t') {
        i -= 1;
    }
    i
}

/// The elements of one collection, found lazily: `(start, value start, end)` byte spans, where
/// an object member starts at its key.
struct Elems<'a> {
    b: &'a [u8],
    is_object: bool,
    cursor: usize,
    close: usize,
    spans: Vec<(usize, usize, usize)>,
}

impl<'a> Elems<'a> {
    fn new(b: &'a [u8], t: &Target) -> Self {
        Elems {
            b,
            is_object: t.is_object,
            cursor: t.open + 1,
            close: t.close,
            spans: Vec::new(),
        }
    }

    fn get(&mut self, k: usize) -> Option<(usize, usize, usize)> {
        while self.spans.len() <= k {
            let b = self.b;
            let start = ws(b, self.cursor);
            if start >= self.close {
                return None;
            }
            let value = if self.is_object {
                ws(b, ws(b, skip_string(b, start)) + 1)
            } else {
                start
            };
            let end = skip_value(b, value);
            self.spans.push((start, value, end));
            let after = ws(b, end);
            self.cursor = if b[after] == b',' { after + 1 } else { after };
        }
        Some(self.spans[k])
    }

    /// How many elements there are (scanning them all, keeping none).
    fn count(mut self) -> usize {
        let mut n = 0;
        while self.get(0).is_some() {
            self.spans.clear();
            n += 1;
        }
        n
    }
}
