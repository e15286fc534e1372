//! The call policy: what the `policy` blocks say of one call of an upstream tool, judged from
//! the tool's annotations (the server gives the strictest of those its catalog holds and those
//! approved or first seen). No I/O; asking the user is the server's.
//!
//! Annotations are read as MCP defines them: `readOnlyHint` is false unless given, and a tool
//! that is not read-only may destroy unless it says `destructiveHint: false`.

use serde_json::{Map, Value};

use crate::config::{Destructive, Settings};

/// Characters of arguments a confirmation shows; the rest is elided.
const SUMMARY_CHARS: usize = 300;

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

/// The arguments as a user reads them in a confirmation: compact JSON, at most
/// [`SUMMARY_CHARS`] characters, with control and invisible characters written as `\u{..}`
/// so nothing in them hides from the user.
pub fn summary(arguments: &Map<String, Value>) -> String {
    shown(&Value::Object(arguments.clone()).to_string())
}

/// `text` as a confirmation shows it: at most [`SUMMARY_CHARS`] characters, control and
/// invisible characters written as `\u{..}`.
pub fn shown(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == SUMMARY_CHARS {
            out.push_str(&format!("… ({} characters)", text.chars().count()));
            break;
        }
        if c.is_control() || crate::hidden::is_hidden(c) {
            out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        } else {
            out.push(c);
        }
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
        let args = json!({"path": "/tmp/a\u{202e}txt.exe", "content": "x\ny\u{E0041}"});
        let shown = summary(args.as_object().unwrap());
        assert_eq!(
            shown,
            r#"{"path":"/tmp/a\u{202e}txt.exe","content":"x\ny\u{e0041}"}"#
        );
        let long = json!({"content": "ü".repeat(1000)});
        let shown = summary(long.as_object().unwrap());
        assert!(
            shown.chars().count() < SUMMARY_CHARS + 30 && shown.ends_with("… (1014 characters)"),
            "{shown}"
        );
    }
}
