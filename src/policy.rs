//! The call policy: what the `policy` blocks say of one call of an upstream tool, judged from
//! the tool's annotations (the server gives the strictest of those its catalog holds and those
//! approved or first seen). No I/O; asking the user is the server's.
//!
//! Annotations are read as MCP defines them: `readOnlyHint` is false unless given, and a tool
//! that is not read-only may destroy unless it says `destructiveHint: false`.

use serde_json::{Map, Value};

use crate::config::{Destructive, Settings};

/// Characters of a tool or server name a confirmation shows; the rest is elided.
const NAME_CHARS: usize = 300;
/// Characters of one argument's key a confirmation shows (its path, for a nested one).
const KEY_CHARS: usize = 80;
/// Characters of one argument's value (its JSON, escaped) a confirmation shows.
const VALUE_CHARS: usize = 160;
/// Arguments a confirmation shows, one a line; the rest are counted.
const MAX_LINES: usize = 24;
/// How deep an object or array too long to show whole is opened, key by key.
const MAX_DEPTH: usize = 3;
/// Items of an array too long to show whole that are opened; the rest are counted.
const ARRAY_ITEMS: usize = 4;

/// What the policy says of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Call it.
    Allow,
    /// Ask the user first; `key` is the config key that asks (and would allow the call).
    Confirm { key: String },
    /// Refuse it, for this reason (which names the key that refuses).
    Deny(String),
}

/// What a tool's annotations say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    pub read_only: bool,
    pub destructive: bool,
}

impl Hints {
    /// Read from a tool object's `annotations` (MCP's defaults where they are missing).
    pub fn of(tool: &Value) -> Self {
        let hint = |key: &str| tool["annotations"][key].as_bool();
        let read_only = hint("readOnlyHint").unwrap_or(false);
        Self {
            read_only,
            destructive: !read_only && hint("destructiveHint").unwrap_or(true),
        }
    }
}

/// The config key of `name` in server `server`'s `policy` block.
pub fn server_key(settings: &Settings, server: &str, name: &str) -> String {
    let key = settings.server(server).map_or(server, |s| s.key.as_str());
    format!("mcpServers.\"{key}\".policy.{name}")
}

/// Whether any `policy` key applies to calls of `server`'s tools: whether [`judge`] would
/// stop the call with the hints that risk most; when it would not, it allows every call
/// whatever its hints, so they need not be read.
pub fn applies(settings: &Settings, server: &str) -> bool {
    let riskiest = Hints {
        read_only: false,
        destructive: true,
    };
    judge(settings, server, server, riskiest) != Verdict::Allow
}

/// Judges a call of `qualified` (a tool of `server` with `hints`): a server's own keys first,
/// then `metaServer.policy`'s; `readOnly` before `destructive`.
pub fn judge(settings: &Settings, server: &str, qualified: &str, hints: Hints) -> Verdict {
    let own = settings
        .server(server)
        .map(|s| s.policy)
        .unwrap_or_default();
    let read_only = match (own.read_only, settings.policy.read_only) {
        (Some(on), _) => on.then(|| server_key(settings, server, "readOnly")),
        (None, Some(true)) => Some("metaServer.policy.readOnly".to_owned()),
        (None, _) => None,
    };
    if let Some(key) = read_only
        && !hints.read_only
    {
        return Verdict::Deny(format!(
            "refused: {qualified} is not annotated read-only (readOnlyHint) and {key} is true, so only read-only tools of \"{server}\" may be called. Nothing was done; use a read-only tool, or ask the user to set {} to false.",
            server_key(settings, server, "readOnly")
        ));
    }
    if !hints.destructive {
        return Verdict::Allow;
    }
    let (destructive, key) = match (own.destructive, settings.policy.destructive) {
        (Some(d), _) => (d, server_key(settings, server, "destructive")),
        (None, Some(d)) => (d, "metaServer.policy.destructive".to_owned()),
        (None, None) => return Verdict::Allow,
    };
    match destructive {
        Destructive::Allow => Verdict::Allow,
        Destructive::Confirm => Verdict::Confirm { key },
        Destructive::Deny => Verdict::Deny(format!(
            "refused: {qualified} may change or delete data (its annotations do not say destructiveHint: false) and {key} is \"deny\". Nothing was done; ask the user to set {} to \"confirm\" or \"allow\" if it should run.",
            server_key(settings, server, "destructive")
        )),
    }
}

/// The arguments as a user reads them in a confirmation: one line per argument, `key: value`,
/// each value its compact JSON cut to [`VALUE_CHARS`] with its full length said, and control
/// and invisible characters written as `\u{..}` so nothing in them hides from the user.
///
/// Every key is shown, whatever the size of the others: values shown whole (paths, names,
/// flags) come first, then those cut; an object or array too long to show whole is opened
/// (`edits[0].newText`; an array's first [`ARRAY_ITEMS`] items) up to [`MAX_DEPTH`] levels,
/// after every argument above it. Past [`MAX_LINES`] lines, the rest are counted. Keys that are not plain identifiers are quoted as
/// JSON, so no key can pass for another.
pub fn summary(arguments: &Map<String, Value>) -> String {
    let mut lines: Vec<Line> = Vec::new();
    let mut more = 0;
    // Breadth first: every argument is shown before anything nested in one.
    let mut queue: std::collections::VecDeque<(String, &Value, usize)> = arguments
        .iter()
        .map(|(key, value)| (key_segment(key), value, 0))
        .collect();
    while let Some((path, value, depth)) = queue.pop_front() {
        if lines.len() == MAX_LINES {
            more += 1;
            continue;
        }
        let json = Json::of(value);
        let opened = match value {
            Value::Object(map) if json.cut && depth < MAX_DEPTH && !map.is_empty() => {
                let children = map
                    .iter()
                    .map(|(key, v)| (format!("{path}.{}", key_segment(key)), v));
                queue.extend(children.map(|(p, v)| (p, v, depth + 1)));
                true
            }
            Value::Array(items) if json.cut && depth < MAX_DEPTH && !items.is_empty() => {
                let children = items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{path}[{i}]"), v));
                queue.extend(children.take(ARRAY_ITEMS).map(|(p, v)| (p, v, depth + 1)));
                more += items.len().saturating_sub(ARRAY_ITEMS);
                true
            }
            _ => false,
        };
        if !opened {
            lines.push(Line { depth, path, json });
        }
    }
    if lines.is_empty() && more == 0 {
        return "  (none)".to_owned();
    }
    // Within a level, values shown whole first; otherwise the client's order.
    lines.sort_by_key(|line| (line.depth, line.json.cut));
    let mut out: Vec<String> = lines
        .iter()
        .map(|line| {
            let key = match cut_escaped(&line.path, KEY_CHARS) {
                (key, true) => key,
                (key, false) => format!("{key}…"),
            };
            match line.json.cut {
                false => format!("  {key}: {}", line.json.shown),
                true => format!(
                    "  {key}: {}… ({} characters)",
                    line.json.shown, line.json.chars
                ),
            }
        })
        .collect();
    if more > 0 {
        out.push(format!("  … and {more} more not shown"));
    }
    out.join("\n")
}

/// One argument (or a part of one) as a confirmation shows it.
struct Line {
    depth: usize,
    path: String,
    json: Json,
}

/// A value's compact JSON as shown: its start (escaped, at most [`VALUE_CHARS`] characters),
/// whether that is all of it, and its length in characters.
struct Json {
    shown: String,
    cut: bool,
    chars: usize,
}

impl Json {
    /// Written once into a counter that keeps only the start, so a value of megabytes is
    /// never copied whole.
    fn of(value: &Value) -> Self {
        let mut start = Start::default();
        // Writing into memory cannot fail.
        let _ = serde_json::to_writer(&mut start, value);
        let text = String::from_utf8_lossy(&start.kept);
        let (shown, whole) = cut_escaped(&text, VALUE_CHARS);
        let cut = !whole || start.chars > text.chars().count();
        Self {
            shown,
            cut,
            chars: start.chars,
        }
    }
}

/// The first bytes of what is written (enough for [`VALUE_CHARS`] characters, each escaped)
/// and how many characters were written in all.
#[derive(Default)]
struct Start {
    kept: Vec<u8>,
    /// Set once a character did not fit: nothing after it is kept.
    full: bool,
    chars: usize,
}

impl std::io::Write for Start {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // UTF-8: every byte that is not a continuation byte starts a character.
        self.chars += bytes.iter().filter(|b| (**b & 0xC0) != 0x80).count();
        if self.full {
            return Ok(bytes.len());
        }
        let room = (VALUE_CHARS * 4).saturating_sub(self.kept.len());
        let mut end = room.min(bytes.len());
        if end < bytes.len() {
            self.full = true;
            // Whole characters only.
            while end > 0 && (bytes[end] & 0xC0) == 0x80 {
                end -= 1;
            }
        }
        self.kept.extend_from_slice(&bytes[..end]);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A key as one segment of an argument's path: bare when it is a plain identifier, else
/// quoted as JSON.
fn key_segment(key: &str) -> String {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        key.to_owned()
    } else {
        Value::String(key.to_owned()).to_string()
    }
}

/// `text` escaped as [`shown`] escapes it, cut to at most `limit` characters of the escaped
/// form (an escape is never split); whether it is whole.
fn cut_escaped(text: &str, limit: usize) -> (String, bool) {
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let piece = escaped(c);
        let len = piece.chars().count();
        if used + len > limit {
            return (out, false);
        }
        used += len;
        out.push_str(&piece);
    }
    (out, true)
}

/// `c` as a confirmation shows it: control and invisible characters as `\u{..}`.
fn escaped(c: char) -> std::borrow::Cow<'static, str> {
    if c.is_control() || crate::hidden::is_hidden(c) {
        format!("\\u{{{:04x}}}", c as u32).into()
    } else {
        String::from(c).into()
    }
}

/// `text` as a confirmation shows it: at most [`NAME_CHARS`] characters, control and
/// invisible characters written as `\u{..}`.
pub fn shown(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == NAME_CHARS {
            out.push_str(&format!("… ({} characters)", text.chars().count()));
            break;
        }
        out.push_str(&escaped(c));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;

    fn settings(text: &str) -> Settings {
        Settings::parse(Path::new("/cfg/config.json"), text).unwrap()
    }

    const WRITE: Hints = Hints {
        read_only: false,
        destructive: true,
    };
    const CREATE: Hints = Hints {
        read_only: false,
        destructive: false,
    };
    const READ: Hints = Hints {
        read_only: true,
        destructive: false,
    };

    #[test]
    fn hints_follow_the_mcp_defaults() {
        assert_eq!(Hints::of(&json!({"name": "x"})), WRITE, "no annotations");
        let of = |a: Value| Hints::of(&json!({"name": "x", "annotations": a}));
        assert_eq!(of(json!({"destructiveHint": false})), CREATE);
        assert_eq!(
            of(json!({"readOnlyHint": true, "destructiveHint": true})),
            READ
        );
        assert_eq!(of(json!({"readOnlyHint": "yes"})), WRITE, "not a boolean");
    }

    #[test]
    fn a_server_key_wins_over_the_global_one_and_names_itself() {
        let s = settings(
            r#"{"metaServer": {"policy": {"destructive": "deny"}},
                "mcpServers": {"fs": {"command": "x", "policy": {"destructive": "confirm"}},
                               "My Mem": {"command": "x"}, "open": {"command": "x", "policy": {"destructive": "allow"}}}}"#,
        );
        assert_eq!(
            judge(&s, "fs", "fs__write", WRITE),
            Verdict::Confirm {
                key: "mcpServers.\"fs\".policy.destructive".into()
            }
        );
        let Verdict::Deny(why) = judge(&s, "My-Mem", "My-Mem__delete", WRITE) else {
            panic!("the global deny holds");
        };
        assert!(
            why.contains("metaServer.policy.destructive is \"deny\"")
                && why.contains("mcpServers.\"My Mem\".policy.destructive"),
            "{why}"
        );
        assert_eq!(judge(&s, "open", "open__rm", WRITE), Verdict::Allow);
        assert_eq!(judge(&s, "fs", "fs__mkdir", CREATE), Verdict::Allow);
        assert_eq!(judge(&s, "fs", "fs__read", READ), Verdict::Allow);
        let none = settings(r#"{"mcpServers": {"fs": {"command": "x"}}}"#);
        assert_eq!(judge(&none, "fs", "fs__write", WRITE), Verdict::Allow);
    }

    #[test]
    fn a_server_no_key_applies_to_is_allowed_every_call() {
        let s = settings(
            r#"{"metaServer": {"policy": {"destructive": "allow", "readOnly": false}},
                "mcpServers": {"fs": {"command": "x"}, "ro": {"command": "x", "policy": {"readOnly": true}},
                               "ask": {"command": "x", "policy": {"destructive": "confirm"}},
                               "open": {"command": "x", "policy": {"destructive": "allow"}}}}"#,
        );
        let none = settings(r#"{"mcpServers": {"fs": {"command": "x"}}}"#);
        for (settings, server, applies) in [
            (&s, "fs", false),
            (&s, "open", false),
            (&s, "ro", true),
            (&s, "ask", true),
            (&none, "fs", false),
        ] {
            assert_eq!(super::applies(settings, server), applies, "{server}");
            let verdicts: Vec<Verdict> = [READ, CREATE, WRITE]
                .into_iter()
                .map(|hints| judge(settings, server, "t", hints))
                .collect();
            let all_allowed = verdicts.iter().all(|v| *v == Verdict::Allow);
            assert!(applies || all_allowed, "{server}: {verdicts:?}");
            assert!(!applies || !all_allowed, "{server}: {verdicts:?}");
        }
    }

    #[test]
    fn read_only_refuses_every_tool_not_annotated_read_only() {
        let s = settings(
            r#"{"metaServer": {"policy": {"readOnly": true}},
                "mcpServers": {"fs": {"command": "x"}, "rw": {"command": "x", "policy": {"readOnly": false, "destructive": "confirm"}}}}"#,
        );
        assert_eq!(judge(&s, "fs", "fs__read", READ), Verdict::Allow);
        for hints in [CREATE, WRITE] {
            let Verdict::Deny(why) = judge(&s, "fs", "fs__mkdir", hints) else {
                panic!("readOnly refuses");
            };
            assert!(
                why.contains("metaServer.policy.readOnly is true")
                    && why.contains("set mcpServers.\"fs\".policy.readOnly to false"),
                "{why}"
            );
        }
        assert_eq!(judge(&s, "rw", "rw__mkdir", CREATE), Verdict::Allow);
        assert!(matches!(
            judge(&s, "rw", "rw__rm", WRITE),
            Verdict::Confirm { .. }
        ));
    }

    #[test]
    fn policy_blocks_are_checked() {
        let bad = |text: &str| {
            Settings::parse(Path::new("/cfg/config.json"), text)
                .unwrap_err()
                .to_string()
        };
        let e = bad(r#"{"metaServer": {"policy": {"destructive": "ask"}}, "mcpServers": {}}"#);
        assert!(
            e.contains("metaServer.policy.destructive")
                && e.contains("\"allow\", \"confirm\" or \"deny\""),
            "{e}"
        );
        let e = bad(r#"{"metaServer": {"policy": {"readonly": true}}, "mcpServers": {}}"#);
        assert!(
            e.contains("metaServer.policy.readonly") && e.contains("readOnly"),
            "{e}"
        );
        let s =
            settings(r#"{"mcpServers": {"s": {"command": "x", "policy": {"destructive": 1}}}}"#);
        assert_eq!(s.skipped.len(), 1);
        assert!(
            s.skipped[0]
                .reason
                .contains("mcpServers.\"s\".policy.destructive")
                && s.skipped[0].reason.contains("found a number"),
            "{:?}",
            s.skipped
        );
    }

    #[test]
    fn a_summary_is_short_and_hides_nothing() {
        let args = json!({"path": "/tmp/a\u{202e}txt.exe", "content": "x\ny\u{E0041}\u{7f}"});
        let shown = summary(args.as_object().unwrap());
        assert_eq!(
            shown,
            "  path: \"/tmp/a\\u{202e}txt.exe\"\n  content: \"x\\ny\\u{e0041}\\u{007f}\""
        );
        assert_eq!(summary(&Map::new()), "  (none)");
    }

    /// The finding of issue 38 (M4): a long `content` sent before `path` pushed the path out
    /// of the confirmation, and the user accepted a write to `.bashrc`.
    #[test]
    fn every_key_is_shown_whatever_the_size_of_the_others() {
        let args = json!({
            "content": "x".repeat(1 << 20),
            "path": "/home/u/.bashrc",
            "mode": 420,
            "append": false,
        });
        let shown = summary(args.as_object().unwrap());
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            lines[..3],
            [
                "  path: \"/home/u/.bashrc\"",
                "  mode: 420",
                "  append: false"
            ],
            "short values first: {shown}"
        );
        assert!(
            lines[3].starts_with("  content: \"xxx")
                && lines[3].ends_with(&format!("… ({} characters)", (1 << 20) + 2)),
            "{shown}"
        );
        assert!(shown.chars().count() < 300, "{shown}");
    }

    #[test]
    fn nested_values_are_opened_after_the_arguments_and_the_total_is_bounded() {
        let args = json!({
            "edits": [{"oldText": "a".repeat(500), "newText": "b", "target": {"path": "/etc/passwd", "body": "c".repeat(500)}}],
            "path": "/x",
            "weird key\n: \"ok\"": 1,
            "many": (0..1000).collect::<Vec<_>>(),
        });
        let shown = summary(args.as_object().unwrap());
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines[0], "  path: \"/x\"");
        assert_eq!(
            lines[1], "  \"weird key\\n: \\\"ok\\\"\": 1",
            "a key cannot pass for another"
        );
        assert!(lines.contains(&"  edits[0].newText: \"b\""), "{shown}");
        assert!(
            lines.contains(&"  edits[0].target.path: \"/etc/passwd\""),
            "{shown}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("  edits[0].oldText: \"aaa")
                    && l.ends_with("… (502 characters)")),
            "{shown}"
        );
        assert!(
            lines.contains(&"  many[3]: 3") && !shown.contains("many[4]"),
            "{shown}"
        );
        assert_eq!(lines.last().unwrap(), &"  … and 996 more not shown");
        let many: Map<String, Value> = (0..100)
            .map(|i| (format!("k{i}"), json!("v".repeat(i))))
            .collect();
        let shown = summary(&many);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            (lines.len(), lines[MAX_LINES]),
            (MAX_LINES + 1, "  … and 76 more not shown")
        );
        assert!(shown.chars().count() < MAX_LINES * (KEY_CHARS + VALUE_CHARS + 40));
        // Keys of any length and values full of escapes stay within their bounds.
        let hostile = json!({"k\u{202e}".repeat(200): "\u{E0041}".repeat(10_000)});
        let shown = summary(hostile.as_object().unwrap());
        assert!(
            !shown.chars().any(|c| c == '\u{202e}' || c == '\u{E0041}'),
            "{shown}"
        );
        assert!(
            shown.chars().count() < KEY_CHARS + VALUE_CHARS + 40,
            "{shown}"
        );
    }
}
