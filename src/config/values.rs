//! The leaf values of the config file: small types whose errors say what the value must be
//! and what kind of value was found, never quoting it (it may be a secret).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The JSON kind of a value, for errors.
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Why a leaf value of the config is not what its key takes; never quotes the value, which may
/// be a secret (an http URL, which is not, excepted).
#[derive(Debug, thiserror::Error)]
pub(super) enum ValueError {
    #[error("must be {what}, found {found}")]
    Kind {
        what: &'static str,
        found: &'static str,
    },
    #[error("must be {what}, but item {index} is {found}")]
    Item {
        what: &'static str,
        index: usize,
        found: &'static str,
    },
    #[error("must be {what}, but \"{key}\" is {found}")]
    Field {
        what: &'static str,
        key: String,
        found: &'static str,
    },
    #[error("must be {what}, found {number}")]
    Number {
        what: &'static str,
        number: serde_json::Number,
    },
    #[error("\"{0}\" must be an http(s) URL")]
    NotHttp(String),
}

/// "must be {what}, found {kind of found}".
pub(super) fn wrong(what: &'static str, found: &Value) -> ValueError {
    ValueError::Kind {
        what,
        found: kind(found),
    }
}

/// A string.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
pub(super) struct Str(pub(super) String);

impl TryFrom<Value> for Str {
    type Error = ValueError;
    fn try_from(value: Value) -> Result<Self, ValueError> {
        match value {
            Value::String(s) => Ok(Self(s)),
            other => Err(wrong("a string", &other)),
        }
    }
}

/// An array of strings (`args`, `allowTools`, ...).
#[derive(Deserialize, Default)]
#[serde(try_from = "Value")]
pub(super) struct Strs(pub(super) Vec<String>);

impl TryFrom<Value> for Strs {
    type Error = ValueError;
    fn try_from(value: Value) -> Result<Self, ValueError> {
        let items = match value {
            Value::Null => return Ok(Self::default()),
            Value::Array(items) => items,
            other => return Err(wrong("an array of strings", &other)),
        };
        let item = |(i, item)| match item {
            Value::String(s) => Ok(s),
            other => Err(ValueError::Item {
                what: "an array of strings",
                index: i + 1,
                found: kind(&other),
            }),
        };
        items
            .into_iter()
            .enumerate()
            .map(item)
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// An object of strings (`env`, `headers`); numbers and booleans are taken as their text.
#[derive(Deserialize, Default)]
#[serde(try_from = "Value")]
pub(super) struct StrMap(pub(super) BTreeMap<String, String>);

impl TryFrom<Value> for StrMap {
    type Error = ValueError;
    fn try_from(value: Value) -> Result<Self, ValueError> {
        let map = match value {
            Value::Null => return Ok(Self::default()),
            Value::Object(map) => map,
            other => return Err(wrong("an object of strings", &other)),
        };
        let pair = |(key, value)| match value {
            Value::String(s) => Ok((key, s)),
            Value::Number(n) => Ok((key, n.to_string())),
            Value::Bool(b) => Ok((key, b.to_string())),
            other => Err(ValueError::Field {
                what: "an object of strings",
                key,
                found: kind(&other),
            }),
        };
        map.into_iter()
            .map(pair)
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// `true` or `false`.
#[derive(Deserialize, Default)]
#[serde(try_from = "Value")]
pub(super) struct Flag(pub(super) bool);

impl TryFrom<Value> for Flag {
    type Error = ValueError;
    fn try_from(value: Value) -> Result<Self, ValueError> {
        match value {
            Value::Null => Ok(Self(false)),
            Value::Bool(b) => Ok(Self(b)),
            other => Err(wrong("true or false", &other)),
        }
    }
}

/// A whole number within `range`; `what` names the range in the error.
fn whole_in(
    value: Value,
    range: std::ops::RangeInclusive<u64>,
    what: &'static str,
) -> Result<u64, ValueError> {
    match value {
        Value::Number(number) => match number.as_u64() {
            Some(v) if range.contains(&v) => Ok(v),
            _ => Err(ValueError::Number { what, number }),
        },
        other => Err(wrong(what, &other)),
    }
}

/// A whole number above 0 (counts, seconds, tokens).
#[derive(Deserialize)]
#[serde(try_from = "Value")]
pub(super) struct Positive(pub(super) u64);

impl TryFrom<Value> for Positive {
    type Error = ValueError;
    fn try_from(value: Value) -> Result<Self, ValueError> {
        whole_in(value, 1..=u64::MAX, "a whole number above 0").map(Self)
    }
}

/// `maxMessageMb`: whole MiB, 1 to 4096 (4 GiB; also keeps the byte count in a `usize`).
#[derive(Deserialize)]
#[serde(try_from = "Value")]
pub(super) struct MessageMb(pub(super) usize);

impl TryFrom<Value> for MessageMb {
    type Error = ValueError;
    fn try_from(value: Value) -> Result<Self, ValueError> {
        let mb = whole_in(value, 1..=4096, "a whole number of MiB from 1 to 4096")?;
        Ok(Self(mb as usize))
    }
}

/// A TCP port, 1 to 65535.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
pub(super) struct Port(pub(super) u16);

impl TryFrom<Value> for Port {
    type Error = ValueError;
    fn try_from(value: Value) -> Result<Self, ValueError> {
        let port = whole_in(value, 1..=u16::MAX.into(), "a port number (1 to 65535)")?;
        Ok(Self(port as u16))
    }
}

/// An http:// or https:// URL.
#[derive(Deserialize)]
#[serde(try_from = "Value")]
pub(super) struct HttpUrl(pub(super) String);

impl TryFrom<Value> for HttpUrl {
    type Error = ValueError;
    fn try_from(value: Value) -> Result<Self, ValueError> {
        match value {
            Value::String(url) if url.starts_with("https://") || url.starts_with("http://") => {
                Ok(Self(url))
            }
            Value::String(url) => Err(ValueError::NotHttp(url)),
            other => Err(wrong("an http(s) URL", &other)),
        }
    }
}
