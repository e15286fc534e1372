//! Content-kind detection from a bounded prefix (plus one validating JSON scan when the text
//! looks like JSON), so it stays cheap on inputs of tens of megabytes.

use super::{ContentKind, json};

/// How much of the text the line heuristics look at.
const SAMPLE_BYTES: usize = 64 * 1024;
/// How many non-blank lines the line heuristics look at.
const SAMPLE_LINES: usize = 200;

/// What kind of text `text` is: JSON if it starts with `{` or `[` and is one valid JSON value
/// (checked by one scan), else decided from the first lines.
pub fn detect(text: &str) -> ContentKind {
    if json::scan(text).is_some() {
        return ContentKind::Json;
    }
    detect_non_json(text)
}

/// The kind of a text already known not to be a JSON document.
pub(super) fn detect_non_json(text: &str) -> ContentKind {
    let lines = sample_lines(text);
    if lines.len() >= 2 && lines.iter().all(|l| l.starts_with('{') && l.ends_with('}')) {
        return ContentKind::Ndjson;
    }
    let (mut markdown, mut code) = (0usize, 0usize);
    let mut in_fence = false;
    for line in &lines {
        if is_fence(line) {
            in_fence = !in_fence;
            markdown += 3;
            continue;
        }
        if in_fence {
            continue;
        }
        markdown += markdown_score(line);
        code += code_score(line);
    }
    let n = lines.len().max(1);
    if markdown >= 3 && markdown >= code {
        ContentKind::Markdown
    } else if code * 10 >= n * 3 {
        ContentKind::Code
    } else {
        ContentKind::Text
    }
}

/// Non-blank lines (right-trimmed) of the sample; a line cut by the sample's end is dropped.
fn sample_lines(text: &str) -> Vec<&str> {
    let end = text.floor_char_boundary(SAMPLE_BYTES);
    let sample = &text[..end];
    let complete = if end == text.len() {
        sample
    } else {
        sample.rfind('\n').map_or("", |i| &sample[..i])
    };
    complete
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim_start().is_empty())
        .take(SAMPLE_LINES)
        .collect()
}

/// A fenced-code delimiter line (three backticks or tildes).
pub(super) fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// The level of an ATX heading line (`# Title` .. `###### Title`), if it is one.
pub(super) fn heading_level(line: &str) -> Option<usize> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    let rest = &line[level..];
    ((1..=6).contains(&level) && (rest.is_empty() || rest.starts_with([' ', '\t'])))
        .then_some(level)
}

fn markdown_score(line: &str) -> usize {
    let t = line.trim_start();
    let mut score = 0;
    if heading_level(line).is_some() {
        score += 3;
    }
    let list = t.starts_with("- ") || t.starts_with("* ") || t.starts_with("+ ");
    let numbered = t.split_once(". ").is_some_and(|(n, _)| {
        !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit())
    });
    if list || numbered || t.starts_with("> ") || (t.starts_with('|') && t.ends_with('|')) {
        score += 1;
    }
    if t.contains("](") || t.contains("**") || t.matches('`').count() >= 2 {
        score += 1;
    }
    score
}

const CODE_STARTS: &[&str] = &[
    "fn ",
    "pub ",
    "let ",
    "use ",
    "impl ",
    "struct ",
    "enum ",
    "mod ",
    "def ",
    "class ",
    "import ",
    "from ",
    "return ",
    "if (",
    "for (",
    "while (",
    "function ",
    "const ",
    "var ",
    "#include",
    "#define",
    "package ",
    "func ",
    "async ",
    "export ",
    "#[",
    "//",
    "/*",
    "*/",
];

fn code_score(line: &str) -> usize {
    let t = line.trim_start();
    let indented = line.starts_with("    ") || line.starts_with('\t');
    let ends = t.ends_with([';', '{', '}', ')', ':', ',']) || t.ends_with("*/");
    let starts = CODE_STARTS.iter().any(|s| t.starts_with(s));
    usize::from(ends) + usize::from(starts) + usize::from(indented && !t.ends_with('.'))
}
