//! Text from servers (tool descriptions, error descriptions, results) made safe to print on a
//! terminal: control characters, bidi controls and the other hidden characters
//! ([`crate::hidden`]) are shown as escapes, so a server cannot recolour or rewrite the screen,
//! set the title, ring the bell, make links, reorder text or hide words from the reader (`tools
//! review` shows the tag characters a text holds).

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character but newline and tab, and every bidi control and other
/// hidden character, shown escaped (`\x1b`, `\u{202e}`): for multi-line output.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_with(text, |c| c == '\n' || c == '\t')
}

/// Like [`escape`], with newlines and tabs escaped too: for one-line fields, where a newline
/// could forge a line of its own.
pub fn escape_line(text: &str) -> Cow<'_, str> {
    escape_with(text, |_| false)
}

/// JSON as serde_json writes it, with the characters it leaves raw that terminals act on or
/// show as nothing (DEL, C1 controls, bidi controls, the other hidden characters) written as
/// `\uXXXX` (a surrogate pair beyond the BMP): the same JSON value. They can only occur inside
/// strings, where that escape means the same character.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    // Below U+0020, serde escapes what is in strings; the rest is the layout's whitespace.
    let raw = |c: char| c >= '\u{7f}' && unsafe_char(c);
    if !json.chars().any(raw) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if raw(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape_with(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| unsafe_char(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            c if !unsafe_char(c) || keep(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// C0 and C1 controls and DEL (`char::is_control`), and the hidden characters (the bidi
/// embedding, override, isolate and mark characters among them).
fn unsafe_char(c: char) -> bool {
    c.is_control() || crate::hidden::is_hidden(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_are_shown_escaped() {
        let hostile = "red \x1b[31mtext\x1b[0m, link \x1b]8;;https://evil\x07here\x1b]8;;\x07, \
                       bell \x07, csi \u{9b}2J, del \x7f, nul \0, cr \rover, rlo \u{202e}txt.exe\u{202c}, \
                       isolate \u{2066}x\u{2069}, mark \u{200f}";
        let shown = escape(hostile);
        assert_eq!(
            shown,
            "red \\x1b[31mtext\\x1b[0m, link \\x1b]8;;https://evil\\x07here\\x1b]8;;\\x07, \
             bell \\x07, csi \\u{9b}2J, del \\x7f, nul \\x00, cr \\rover, rlo \\u{202e}txt.exe\\u{202c}, \
             isolate \\u{2066}x\\u{2069}, mark \\u{200f}"
        );
        assert!(!shown.chars().any(unsafe_char));
        // Escaping twice changes nothing: the escapes are printable.
        assert_eq!(escape(&shown), shown);
        assert_eq!(
            escape("a\u{E0069}\u{00AD}b"),
            "a\\u{e0069}\\u{ad}b",
            "hidden words show"
        );
    }

    #[test]
    fn lines_keep_newlines_and_tabs_one_line_fields_do_not() {
        assert!(matches!(
            escape("a\n\tb é 日本"),
            Cow::Borrowed("a\n\tb é 日本")
        ));
        assert_eq!(
            escape_line("a\nserver: logged in\tx"),
            "a\\nserver: logged in\\tx"
        );
        assert!(matches!(escape_line("plain"), Cow::Borrowed("plain")));
    }

    #[test]
    fn json_keeps_its_value_and_loses_the_raw_controls() {
        let value = serde_json::json!({"d": "\x1b[31m \u{9b} \x7f \u{202e} \x07 ok é \u{E0069}"});
        let text = serde_json::to_string_pretty(&value).unwrap();
        assert!(text.contains('\u{202e}'), "serde leaves bidi controls raw");
        let safe = escape_json(&text);
        assert!(!safe.chars().any(|c| unsafe_char(c) && c != '\n'), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
        assert!(matches!(escape_json("{\"a\": 1}"), Cow::Borrowed(_)));
    }
}
