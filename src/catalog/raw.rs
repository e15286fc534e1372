//! One catalog tool kept as its JSON text: a catalog of 10,000 tools holds 17 MB of text
//! rather than its trees of values, and a tool is parsed whole only when something needs it.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// A tool object's JSON text as read (or as serialized from a live `tools/list`), shared
/// rather than copied. It is written, compared and hashed as its parsed value, so the
/// formatting of the text never shows.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct RawTool(Arc<RawValue>);

impl RawTool {
    /// The JSON text.
    pub fn text(&self) -> &str {
        self.0.get()
    }

    /// The tool parsed whole, not kept. `Null` for a tool nested deeper than serde_json
    /// parses a value (128 levels): such text is accepted as raw JSON but cannot be read.
    pub fn value(&self) -> Value {
        serde_json::from_str(self.text()).unwrap_or(Value::Null)
    }
}

impl From<Value> for RawTool {
    fn from(value: Value) -> Self {
        let raw = serde_json::value::to_raw_value(&value).expect("a value serializes");
        Self(Arc::from(raw))
    }
}

/// As its value: a catalog is written exactly as when tools were kept as values.
impl Serialize for RawTool {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

impl PartialEq for RawTool {
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text() || self.value() == other.value()
    }
}

impl fmt::Debug for RawTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn written_and_compared_as_its_value_not_its_text() {
        let spaced: RawTool = serde_json::from_str(r#"{ "name" : "x",  "n": 1.50 }"#).unwrap();
        let compact = RawTool::from(json!({"name": "x", "n": 1.5}));
        assert_ne!(spaced.text(), compact.text());
        assert_eq!(spaced, compact);
        assert_eq!(
            serde_json::to_string(&spaced).unwrap(),
            r#"{"name":"x","n":1.5}"#
        );
        assert_ne!(spaced, RawTool::from(json!({"name": "y", "n": 1.5})));
    }
}
