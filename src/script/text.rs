//! Text out of QuickJS. A JavaScript string may hold lone surrogates (half of an emoji cut by
//! `slice`), which UTF-8 cannot: they become U+FFFD, as `String.prototype.toWellFormed` makes
//! them, rather than failing the script's result, its arguments or its logs.

use rquickjs::Ctx;
use serde::de::DeserializeOwned;

/// Parses JSON text that `JSON.stringify` wrote. It escapes lone surrogates (`"\ud83d"`), which
/// serde rejects; those escapes are read as U+FFFD.
pub(super) fn from_json<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    serde_json::from_str(text).or_else(|e| match replace_lone_surrogates(text) {
        Some(fixed) => serde_json::from_str(&fixed),
        None => Err(e),
    })
}

/// A JavaScript string as Rust text, lone surrogates as U+FFFD.
pub(super) fn rust_string<'js>(ctx: &Ctx<'js>, s: rquickjs::String<'js>) -> String {
    s.to_string().unwrap_or_else(|_| {
        ctx.json_stringify(s)
            .ok()
            .flatten()
            .and_then(|json| json.to_string().ok())
            .and_then(|json| from_json(&json).ok())
            .unwrap_or_default()
    })
}

/// `json` with each `\uXXXX` escape of a lone surrogate replaced by `\ufffd`, or `None` if it
/// has none. A high surrogate escape followed by a low one is a pair and stays.
fn replace_lone_surrogates(json: &str) -> Option<String> {
    let unit = |at: usize| {
        json.get(at..at + 4)
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
    };
    let high = |u: u16| (0xD800..0xDC00).contains(&u);
    let low = |u: u16| (0xDC00..0xE000).contains(&u);
    let bytes = json.as_bytes();
    let mut out = String::new();
    let (mut i, mut copied) = (0, 0);
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        // Any other escape (`\\`, `\"`, `\n`...) is two bytes: skipping both keeps an escaped
        // backslash followed by "ud83d" from being read as an escape.
        let Some(u) = unit(i + 2).filter(|_| bytes.get(i + 1) == Some(&b'u')) else {
            i += 2;
            continue;
        };
        if high(u) && json.get(i + 6..i + 8) == Some("\\u") && unit(i + 8).is_some_and(low) {
            i += 12;
            continue;
        }
        if high(u) || low(u) {
            out.push_str(&json[copied..i]);
            out.push_str("\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&json[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn lone_surrogate_escapes_read_as_replacement_characters() {
        let v: Value = from_json(r#"{"a": "x\ud83d", "b": ["\udc00y"], "\ud800": 1}"#).unwrap();
        assert_eq!(
            v,
            json!({"a": "x\u{FFFD}", "b": ["\u{FFFD}y"], "\u{FFFD}": 1})
        );
        // A pair stays a pair; an escaped backslash before "ud83d" is text, not an escape.
        let v: Value = from_json(r#"["\ud83d\ude00", "\\ud83d", "\\\ud83d"]"#).unwrap();
        assert_eq!(v, json!(["😀", "\\ud83d", "\\\u{FFFD}"]));
        assert_eq!(replace_lone_surrogates(r#""\u00e9\ud83d\ude00""#), None);
        // Other faults stay faults.
        assert!(from_json::<Value>(r#"{"a": "\ud83d"#).is_err());
    }
}
