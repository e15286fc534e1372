//! An MCP object's whole JSON carried through an rmcp type that keeps only the fields it
//! knows (a tool's `execution`, an annotation or prompt-argument key of a server's own): in the
//! object's `_meta`, under a key of meta-server's that never leaves the process. The upstream
//! transport makes what a server lists carry itself, so its catalog keeps every field; the
//! session makes what it lists carry the catalog's objects, so its clients get every field.

use serde::Serialize;
use serde_json::{Map, Value};

/// The `_meta` key that carries the object: meta-server's own, taken out before the object is
/// written or sent.
const KEY: &str = "meta-server/verbatim";

/// Makes `item`, a JSON object, carry itself as it is now (nothing else is changed).
pub fn carry(item: &mut Value) {
    let Value::Object(fields) = item else {
        return;
    };
    let whole = Value::Object(fields.clone());
    let meta = fields
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if meta.is_null() {
        *meta = Value::Object(Map::new());
    }
    if let Value::Object(meta) = meta {
        meta.insert(KEY.to_owned(), whole);
    }
}

/// The object `typed` carries, as it was when it was made to carry it; `typed` as JSON when it
/// carries none. For an object nothing changed on the way (what an upstream listed).
pub fn take<T: Serialize>(typed: &T) -> Value {
    let mut value = serde_json::to_value(typed).expect("an MCP object serializes");
    match carried(&mut value) {
        Some(whole) => whole,
        None => value,
    }
}

/// `item`, a serialized object, with every field of the object it carries: its own fields as
/// they are (they may have been changed on the way: a name qualified, a text cleaned), the
/// carried object's other fields (at any depth) as they were, in the carried object's order.
/// Unchanged when it carries none.
pub fn complete(item: &mut Value) {
    if let Some(mut whole) = carried(item) {
        overlay(&mut whole, std::mem::take(item));
        *item = whole;
    }
}

/// `message`, the JSON text of a message, with every object in it that carries completed
/// (see [`complete`]); `None` when none does (the common case, told without parsing it).
pub fn complete_text(message: &str) -> Option<String> {
    if !message.contains(KEY) {
        return None;
    }
    let mut value: Value = serde_json::from_str(message).ok()?;
    complete_all(&mut value);
    Some(value.to_string())
}

/// The length of `typed` as compact JSON with every object in it as it was sent: what an object
/// carries is counted once, not beside its typed copy (a bound on what a server sent measures
/// this).
pub fn sent_len(typed: &impl Serialize) -> usize {
    let mut value = serde_json::to_value(typed).expect("an MCP object serializes");
    complete_all(&mut value);
    crate::budget::json_len(&value)
}

/// Completes every object in `value` that carries, at any depth.
pub fn complete_all(value: &mut Value) {
    complete(value);
    match value {
        Value::Object(fields) => fields.values_mut().for_each(complete_all),
        Value::Array(items) => items.iter_mut().for_each(complete_all),
        _ => {}
    }
}

/// The carried object, taken out of `item` (and `item`'s `_meta` with it when nothing else is
/// left in it).
fn carried(item: &mut Value) -> Option<Value> {
    let fields = item.as_object_mut()?;
    let Some(Value::Object(meta)) = fields.get_mut("_meta") else {
        return None;
    };
    let whole = meta.shift_remove(KEY)?;
    if meta.is_empty() {
        fields.shift_remove("_meta");
    }
    Some(whole)
}

/// Writes `top` over `base`: objects key by key (recursively), arrays of the same length item
/// by item; anything else `top` replaces.
fn overlay(base: &mut Value, top: Value) {
    match (base, top) {
        (Value::Object(base), Value::Object(top)) => {
            for (key, value) in top {
                match base.get_mut(&key) {
                    Some(under) => overlay(under, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (Value::Array(base), Value::Array(top)) if base.len() == top.len() => {
            for (under, value) in base.iter_mut().zip(top) {
                overlay(under, value);
            }
        }
        (base, top) => *base = top,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{Prompt, Tool};
    use serde_json::json;

    #[test]
    fn an_object_carried_through_an_rmcp_type_comes_back_whole() {
        let sent = json!({
            "name": "click",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": false, "category": "input"},
            "execution": {"taskSupport": "forbidden"},
            "_meta": {"com.example/x": 1}
        });
        let mut carrying = sent.clone();
        carry(&mut carrying);
        let tool: Tool = serde_json::from_value(carrying).unwrap();
        assert_eq!(take(&tool), sent);
        let plain: Tool = serde_json::from_value(sent.clone()).unwrap();
        assert_ne!(take(&plain), sent, "rmcp's Tool alone loses fields");
        let page = json!({"tools": [tool]});
        let as_sent = json!({"tools": [sent]});
        assert_eq!(sent_len(&page), as_sent.to_string().len(), "counted once");
    }

    #[test]
    fn a_completed_object_keeps_what_changed_and_gains_what_its_type_lost() {
        let mut listed = json!({
            "name": "k8s-diagnose",
            "arguments": [
                {"name": "keyword", "required": true},
                {"name": "namespace", "required": false, "default": "all"}
            ],
            "_meta": null
        });
        carry(&mut listed);
        let mut prompt: Prompt = serde_json::from_value(listed).unwrap();
        prompt.name = "kubernetes__k8s-diagnose".into();
        let mut out = serde_json::to_value(&prompt).unwrap();
        complete(&mut out);
        assert_eq!(
            out,
            json!({
                "name": "kubernetes__k8s-diagnose",
                "arguments": [
                    {"name": "keyword", "required": true},
                    {"name": "namespace", "required": false, "default": "all"}
                ],
                "_meta": null
            })
        );
        let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "arguments", "_meta"], "the carried order");

        let mut message = json!({"jsonrpc": "2.0", "id": 1, "result": {"prompts": [prompt]}});
        let text = message.to_string();
        complete_all(&mut message);
        assert_eq!(complete_text(&text), Some(message.to_string()));
        assert_eq!(message["result"]["prompts"][0], out);
        assert_eq!(complete_text(&out.to_string()), None, "none carries");

        let mut plain = json!({"name": "p", "_meta": {"a": 1}});
        let before = plain.clone();
        complete(&mut plain);
        assert_eq!(plain, before, "nothing carried, nothing changed");
    }
}
