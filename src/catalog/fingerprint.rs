//! Hashes that tell whether a catalog still matches its server: the launch config (without
//! secrets) and the tool list; and each tool's, prompt's, resource's and template's own, and
//! that of a server's instructions, which pin what the user approved.

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

/// What a fingerprint of this build starts with: it covers the whole object (version 2).
const VERSION_2: &str = "2:";

/// The fields a version-1 tool fingerprint covers (approvals made before version 2 hold them).
const PINNED_V1: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// A tool's fingerprint: `2:` and the SHA-256 of the whole tool object as received (hidden
/// characters included) as canonical JSON: name, title, description, schemas, annotations,
/// `_meta`, `icons`, `execution` and anything else it holds.
pub fn tool_fingerprint(tool: &RawTool) -> String {
    offer_fingerprint(&tool.value())
}

/// A tool's version-1 fingerprint: SHA-256 of its name, title, description, schemas and
/// annotations alone, without a version prefix (what approvals made before version 2 hold).
pub fn tool_fingerprint_v1(tool: &RawTool) -> String {
    let value = tool.value();
    let pinned: serde_json::Map<String, Value> = PINNED_V1
        .iter()
        .filter_map(|k| Some(((*k).to_owned(), canonical(value.get(*k)?))))
        .collect();
    hex_sha256(&Value::Object(pinned))
}

/// Whether `fingerprint` is of version 1 (made before fingerprints covered whole objects).
pub fn is_fingerprint_v1(fingerprint: &str) -> bool {
    !fingerprint.starts_with(VERSION_2)
}

/// The fingerprint of a prompt, resource template or a server's instructions (a string, or
/// null for none) as received, as canonical JSON.
pub fn offer_fingerprint(value: &Value) -> String {
    format!("{VERSION_2}{}", hex_sha256(&canonical(value)))
}

/// The fingerprint of a resource as received, less what changes with its contents (`size`,
/// `annotations.lastModified`), so a file that is written is not a changed resource.
pub fn resource_fingerprint(resource: &Value) -> String {
    let mut pinned = resource.clone();
    if let Some(fields) = pinned.as_object_mut() {
        fields.remove("size");
        if let Some(Value::Object(annotations)) = fields.get_mut("annotations") {
            annotations.remove("lastModified");
        }
    }
    offer_fingerprint(&pinned)
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
            lists: Default::default(),
            oauth: None,
            policy: Default::default(),
            roots: None,
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
    fn a_tool_fingerprint_covers_every_field_and_v1_what_it_does() {
        let tool = |v: Value| tool_fingerprint(&RawTool::from(v));
        let v1 = |v: Value| tool_fingerprint_v1(&RawTool::from(v));
        let base = json!({"name": "x", "description": "d", "inputSchema": {"type": "object"}});
        let same = tool(base.clone());
        assert!(same.starts_with("2:") && !is_fingerprint_v1(&same));
        assert!(is_fingerprint_v1(&v1(base.clone())));
        assert_eq!(
            same,
            tool(json!({"inputSchema": {"type": "object"}, "description": "d", "name": "x"}))
        );
        for (key, value) in [
            ("_meta", json!({"ui": {"resourceUri": "ui://x"}})),
            ("icons", json!([{"src": "https://tracker.example/p.png"}])),
            ("execution", json!({"taskSupport": "required"})),
        ] {
            let mut changed = base.clone();
            changed[key] = value;
            assert_ne!(same, tool(changed.clone()), "{key} is pinned");
            assert_eq!(v1(base.clone()), v1(changed), "{key} is not in v1");
        }
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
            assert_ne!(same, tool(changed.clone()), "{key}");
            assert_ne!(v1(base.clone()), v1(changed), "{key}");
        }
    }

    #[test]
    fn a_resource_fingerprint_leaves_out_what_changes_with_its_contents() {
        let base = json!({"uri": "file:///a", "name": "a", "size": 10,
            "annotations": {"lastModified": "2026-01-01T00:00:00Z", "audience": ["user"]}});
        let mut written = base.clone();
        written["size"] = json!(11);
        written["annotations"]["lastModified"] = json!("2026-01-02T00:00:00Z");
        assert_eq!(resource_fingerprint(&base), resource_fingerprint(&written));
        let mut renamed = base.clone();
        renamed["description"] = json!("<IMPORTANT>");
        assert_ne!(resource_fingerprint(&base), resource_fingerprint(&renamed));
        renamed = base.clone();
        renamed["annotations"]["audience"] = json!(["assistant"]);
        assert_ne!(resource_fingerprint(&base), resource_fingerprint(&renamed));
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
