//! Hashes that tell whether a catalog still matches its server: the launch config (without
//! secrets) and the tool list; and each tool's own, which pins what the user approved.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::RawTool;
use crate::config::{ServerConfig, TransportConfig};

/// Hash of what launches the server, as written in the config (before `${VAR}` expansion).
/// Env and header *values* are left out, so secrets never reach a catalog.
pub fn config_fingerprint(server: &ServerConfig) -> String {
    let launch = match &server.transport {
        TransportConfig::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            json!({"command": command, "args": args, "cwd": cwd, "envKeys": env.keys().collect::<Vec<_>>()})
        }
        TransportConfig::Http { url, headers } => {
            json!({"url": url, "headerKeys": headers.keys().collect::<Vec<_>>()})
        }
        TransportConfig::Sse { url, headers } => {
            json!({"sse": url, "headerKeys": headers.keys().collect::<Vec<_>>()})
        }
    };
    hex_sha256(&launch)
}

/// SHA-256 of the tools as canonical JSON (object keys sorted), order of tools kept. Each
/// tool is parsed for it, and not kept.
pub fn tools_hash(tools: &[RawTool]) -> String {
    hex_sha256(&Value::Array(
        tools.iter().map(|t| canonical(&t.value())).collect(),
    ))
}

/// The fields of a tool that say what it is and does; its fingerprint covers these alone.
const PINNED: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// SHA-256 of a tool's name, title, description, input and output schema and annotations as
/// received (hidden characters included), as canonical JSON; other keys (`_meta`, `icons`) aside.
pub fn tool_fingerprint(tool: &RawTool) -> String {
    let value = tool.value();
    let pinned: serde_json::Map<String, Value> = PINNED
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), canonical(value.get(*k)?))))
        .collect();
    hex_sha256(&Value::Object(pinned))
}

fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<_> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn hex_sha256(value: &Value) -> String {
    crate::checksum::hex(&Sha256::digest(value.to_string().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn server(env_value: &str) -> ServerConfig {
        ServerConfig {
            name: "s".into(),
            key: "s".into(),
            description: None,
            transport: TransportConfig::Stdio {
                command: "node".into(),
                args: vec!["x.js".into()],
                env: BTreeMap::from([("TOKEN".into(), env_value.into())]),
                cwd: None,
            },
            always_load: false,
            prefix: true,
            idle_timeout: crate::config::DEFAULT_IDLE_TIMEOUT,
            call_timeout: crate::config::DEFAULT_CALL_TIMEOUT,
            tools: Default::default(),
            max_result_tokens: None,
            max_message_bytes: crate::config::DEFAULT_MAX_MESSAGE,
            oauth: None,
            policy: Default::default(),
        }
    }

    #[test]
    fn fingerprint_ignores_secret_values_but_not_launch() {
        assert_eq!(
            config_fingerprint(&server("a")),
            config_fingerprint(&server("b"))
        );
        let mut other = server("a");
        if let TransportConfig::Stdio { args, .. } = &mut other.transport {
            args.push("--flag".into());
        }
        assert_ne!(config_fingerprint(&server("a")), config_fingerprint(&other));
    }

    #[test]
    fn a_tool_fingerprint_covers_what_it_does_and_only_that() {
        let tool = |v: Value| tool_fingerprint(&RawTool::from(v));
        let base = json!({"name": "x", "description": "d", "inputSchema": {"type": "object"}});
        let same = tool(base.clone());
        assert_eq!(
            same,
            tool(json!({"inputSchema": {"type": "object"}, "description": "d", "name": "x"}))
        );
        let mut meta = base.clone();
        meta["_meta"] = json!({"v": 2});
        assert_eq!(same, tool(meta), "_meta is not pinned");
        for (key, value) in [
            ("name", json!("y")),
            ("title", json!("T")),
            ("description", json!("d\u{E0041}")),
            (
                "inputSchema",
                json!({"type": "object", "properties": {"a": {}}}),
            ),
            ("outputSchema", json!({"type": "object"})),
            ("annotations", json!({"destructiveHint": true})),
        ] {
            let mut changed = base.clone();
            changed[key] = value;
            assert_ne!(same, tool(changed), "{key}");
        }
    }

    #[test]
    fn tools_hash_ignores_key_order() {
        let a = vec![RawTool::from(
            serde_json::json!({"name": "x", "description": "d"}),
        )];
        let b: Vec<RawTool> =
            vec![serde_json::from_str(r#"{"description": "d", "name": "x"}"#).unwrap()];
        assert_eq!(tools_hash(&a), tools_hash(&b));
        assert_ne!(tools_hash(&a), tools_hash(&[]));
    }
}
