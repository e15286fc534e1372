//! Lone UTF-16 surrogates in JSON text. JavaScript strings may hold them (half of an emoji cut
//! by `slice`), and `JSON.stringify` writes them as escapes (`"\ud83d"`), which serde rejects
//! as input: a script's result, or a whole request from a JavaScript client, would be lost.
//! Read as U+FFFD instead, as `String.prototype.toWellFormed` makes them.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, ReadBuf};

/// Rewrites in place each `\uXXXX` escape of a lone surrogate in `json` to `\ufffd` (the same
/// length); a high surrogate escape followed by a low one is a pair and stays. Returns whether
/// anything changed.
pub fn replace_lone(json: &mut [u8]) -> bool {
    let lone = lone_escapes(json);
    rewrite(json, &lone);
    !lone.is_empty()
}

/// `json` with [`replace_lone`] applied, copied only when it has an escape to rewrite.
pub fn well_formed(json: &[u8]) -> Option<Vec<u8>> {
    let lone = lone_escapes(json);
    (!lone.is_empty()).then(|| {
        let mut fixed = json.to_vec();
        rewrite(&mut fixed, &lone);
        fixed
    })
}

/// Parses JSON text, reading escapes of lone surrogates as U+FFFD.
pub fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    serde_json::from_str(text).or_else(|e| match well_formed(text.as_bytes()) {
        Some(fixed) => serde_json::from_slice(&fixed),
        None => Err(e),
    })
}

/// Where each `\uXXXX` escape of a lone surrogate in `json` starts.
fn lone_escapes(json: &[u8]) -> Vec<usize> {
    let unit = |at: usize| {
        json.get(at..at + 4)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
    };
    let high = |u: u16| (0xD800..0xDC00).contains(&u);
    let low = |u: u16| (0xDC00..0xE000).contains(&u);
    let mut lone = Vec::new();
    let mut i = 0;
    while let Some(at) = json
        .get(i..)
        .and_then(|rest| rest.iter().position(|&b| b == b'\\'))
    {
        i += at;
        // Any other escape (`\\`, `\"`, `\n`...) is two bytes: skipping both keeps an escaped
        // backslash followed by "ud83d" from being read as an escape.
        let Some(u) = unit(i + 2).filter(|_| json.get(i + 1) == Some(&b'u')) else {
            i += 2;
            continue;
        };
        if high(u) && json.get(i + 6..i + 8) == Some(b"\\u") && unit(i + 8).is_some_and(low) {
            i += 12;
            continue;
        }
        if high(u) || low(u) {
            lone.push(i);
        }
        i += 6;
    }
    lone
}

/// Writes `\ufffd` over the escapes starting at `lone`.
fn rewrite(json: &mut [u8], lone: &[usize]) {
    for &at in lone {
        json[at + 2..at + 6].copy_from_slice(b"fffd");
    }
}

/// Newline-framed JSON (MCP over stdio) with [`replace_lone`] applied to each complete line
/// before it is handed on. Escapes never span lines, so nothing is rewritten twice or missed.
pub struct WellFormedLines<R> {
    inner: R,
    /// Bytes read and not yet handed on, from `start`: complete lines up to `fixed` (rewritten),
    /// then the start of a line still being read.
    buf: Vec<u8>,
    start: usize,
    fixed: usize,
    eof: bool,
}

impl<R> WellFormedLines<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            start: 0,
            fixed: 0,
            eof: false,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for WellFormedLines<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.start < this.fixed {
                let n = (this.fixed - this.start).min(out.remaining());
                out.put_slice(&this.buf[this.start..this.start + n]);
                this.start += n;
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            this.buf.drain(..this.start);
            this.fixed -= this.start;
            this.start = 0;
            let mut chunk = [0; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let from = this.buf.len();
            this.buf.extend_from_slice(read.filled());
            let complete = if read.filled().is_empty() {
                this.eof = true;
                Some(this.buf.len())
            } else {
                this.buf[from..]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map(|at| from + at + 1)
            };
            if let Some(end) = complete {
                replace_lone(&mut this.buf[this.fixed..end]);
                this.fixed = end;
            }
        }
    }
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
        let mut clean = br#""\u00e9\ud83d\ude00""#.to_vec();
        assert!(!replace_lone(&mut clean));
        // Escapes cut short at the end, and other faults, stay as they are.
        for cut in [&b"\"\\ud8"[..], b"\\", b"\"\\u"] {
            let mut text = cut.to_vec();
            assert!(!replace_lone(&mut text));
            assert_eq!(text, cut);
        }
        assert!(from_json::<Value>(r#"{"a": "\ud83d"#).is_err());
    }

    /// Pieces that make escapes, pairs, lone halves and escaped backslashes when joined.
    const PARTS: [&str; 10] = [
        "\\", "u", "\\ud83d", "\\ude00", "\\udc00", "\\u00e9", "d800", "\"", "a", "\\\\",
    ];

    proptest::proptest! {
        /// Any bytes: no panic, the same length, and a second pass changes nothing. JSON that
        /// serde wrote from a Rust string (never a lone surrogate) is left as it is.
        #[test]
        fn the_rewrite_keeps_length_and_settles(
            parts in proptest::collection::vec(proptest::sample::select(&PARTS[..]), 0..24),
            text: String,
        ) {
            let bytes = parts.concat().into_bytes();
            let mut once = bytes.clone();
            replace_lone(&mut once);
            proptest::prop_assert_eq!(once.len(), bytes.len());
            let mut twice = once.clone();
            proptest::prop_assert!(!replace_lone(&mut twice));
            let mut json = serde_json::to_vec(&text).unwrap();
            proptest::prop_assert!(!replace_lone(&mut json));
        }
    }

    #[tokio::test]
    async fn lines_are_rewritten_whatever_the_reads_cut() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let text =
            "{\"q\": \"a\\ud83d b\\ud83d\\ude00\"}\n{\"r\": \"\\udc00\"}\n{\"s\": \"\\ud800\"}";
        let want = text
            .replace("\\ud83d b", "\\ufffd b")
            .replace("\\udc00", "\\ufffd")
            .replace("\\ud800", "\\ufffd");
        // A pipe of 3 bytes: every escape is split across reads somewhere.
        let (reader, mut writer) = tokio::io::duplex(3);
        let writing = tokio::spawn(async move {
            writer.write_all(text.as_bytes()).await.unwrap();
        });
        let mut got = String::new();
        WellFormedLines::new(reader)
            .read_to_string(&mut got)
            .await
            .unwrap();
        writing.await.unwrap();
        assert_eq!(got, want);
    }
}
