//! The protocol's own keys in a message's `_meta` (the 2026-07-28 schema's request,
//! notification and result meta objects): who sent the message, in which revision, with which
//! capabilities, on which subscription. They belong to one hop, so a result meta-server passes
//! on loses its upstream's: its client talks to meta-server (a 2026-07-28 client negotiated with
//! it, and would be told it talks to another server), and a 2025-11-25 client has no use for
//! them (a server's stamp can carry an icon of kilobytes). The server's own keys stay.

use rmcp::model::MetaObject;

/// The per-message keys of the protocol.
const HOP_KEYS: [&str; 6] = [
    "io.modelcontextprotocol/serverInfo",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/logLevel",
    "io.modelcontextprotocol/subscriptionId",
];

/// `meta` without the upstream's per-message keys; none at all when nothing else was in it.
pub(super) fn strip(meta: &mut Option<MetaObject>) {
    let Some(MetaObject(fields)) = meta else {
        return;
    };
    for key in HOP_KEYS {
        fields.shift_remove(key);
    }
    if fields.is_empty() {
        *meta = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_upstreams_stamps_go_and_its_own_keys_stay() {
        let meta = |value: serde_json::Value| serde_json::from_value::<MetaObject>(value).unwrap();
        let mut stamped = Some(meta(json!({
            "io.modelcontextprotocol/serverInfo": {"name": "mcp-time", "version": "1",
                "icons": [{"src": "data:image/png;base64,AAAA"}]},
            "com.example/trace": "t-1",
            "io.modelcontextprotocol/related-task": {"taskId": "x"}
        })));
        strip(&mut stamped);
        assert_eq!(
            stamped,
            Some(meta(json!({
                "com.example/trace": "t-1",
                "io.modelcontextprotocol/related-task": {"taskId": "x"}
            })))
        );
        let mut only_stamp = Some(meta(
            json!({"io.modelcontextprotocol/serverInfo": {"name": "x", "version": "1"}}),
        ));
        strip(&mut only_stamp);
        assert_eq!(only_stamp, None);
    }
}
