//! `${VAR}` and `${VAR:-default}` expansion, as Claude Code does it in `.mcp.json`.

/// A variable that is unset and has no default, by name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("${{{0}}} is not set")]
pub struct Unset(pub String);

/// Expands every `${VAR}` / `${VAR:-default}` in `text`; a `$` not followed by `{` stays as is.
///
/// Fails with the first variable that is unset and has no default.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, Unset> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match lookup(name).filter(|v| !v.is_empty() || default.is_none()) {
            Some(value) => out.push_str(&value),
            None => match default {
                Some(default) => out.push_str(default),
                None => return Err(Unset(name.to_owned())),
            },
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The names of the variables `text` refers to, in order (repeats included).
pub fn references(text: &str) -> Vec<String> {
    let names = std::cell::RefCell::new(Vec::new());
    let _ = expand(text, &|name| {
        names.borrow_mut().push(name.to_owned());
        Some(String::new())
    });
    names.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/u".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_set_default_and_literal() {
        assert_eq!(expand("${HOME}/x", &env).unwrap(), "/home/u/x");
        assert_eq!(expand("${NOPE:-7}", &env).unwrap(), "7");
        assert_eq!(expand("${EMPTY:-d}", &env).unwrap(), "d");
        assert_eq!(expand("${EMPTY}", &env).unwrap(), "");
        assert_eq!(expand("cost $5 ${", &env).unwrap(), "cost $5 ${");
        assert_eq!(
            expand("a${HOME}b${HOME}", &env).unwrap(),
            "a/home/ub/home/u"
        );
        assert_eq!(expand("${NOPE}", &env).unwrap_err(), Unset("NOPE".into()));
    }

    #[test]
    fn references_name_every_variable() {
        assert_eq!(references("a${X}b${Y:-d}${X}$Z"), ["X", "Y", "X"]);
        assert!(references("plain").is_empty());
    }
}
