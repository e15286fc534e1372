//! Whether a URI is one a resource template describes. RFC 6570 level 1 is enough for the
//! templates servers publish: `{var}` stands for one or more characters other than `/`, `?`
//! and `#` (what simple expansion leaves unescaped); `{+var}` (level 2) for one or more of any
//! character. A template with any other expression (`{?q}`, `{/path}`, `{a,b}`) matches
//! nothing: it is still listed, and its URIs are not routed.

/// One piece of a parsed template.
#[derive(Debug, PartialEq)]
enum Part {
    Literal(String),
    /// A variable; `reserved` (`{+var}`) may hold `/`, `?` and `#` too.
    Var {
        reserved: bool,
    },
}

/// A resource template's `uriTemplate`, parsed for matching.
#[derive(Debug, PartialEq)]
pub(super) struct UriTemplate(Vec<Part>);

impl UriTemplate {
    /// The template, or `None` when it has an expression this does not match (see the module).
    pub(super) fn parse(template: &str) -> Option<Self> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let close = rest[open..].find('}')? + open;
            let expression = &rest[open + 1..close];
            let (reserved, name) = match expression.strip_prefix('+') {
                Some(name) => (true, name),
                None => (false, expression),
            };
            let plain = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '%';
            if name.is_empty() || !name.chars().all(plain) {
                return None;
            }
            parts.push(Part::Var { reserved });
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return None;
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Some(Self(parts))
    }

    /// Whether `uri` is one this template expands to. Linear in the URI per part.
    pub(super) fn matches(&self, uri: &str) -> bool {
        let bytes = uri.as_bytes();
        // Where in `uri` the parts matched so far can end.
        let mut at = vec![false; bytes.len() + 1];
        at[0] = true;
        for part in &self.0 {
            let mut next = vec![false; bytes.len() + 1];
            match part {
                Part::Literal(text) => {
                    for (start, _) in at.iter().enumerate().filter(|(_, ok)| **ok) {
                        if bytes[start..].starts_with(text.as_bytes()) {
                            next[start + text.len()] = true;
                        }
                    }
                }
                Part::Var { reserved } => {
                    // A variable begun at any reachable start runs until a character it
                    // cannot hold; every end past its first character is reachable.
                    let mut running = false;
                    for (i, byte) in bytes.iter().enumerate() {
                        running |= at[i];
                        if !reserved && matches!(byte, b'/' | b'?' | b'#') {
                            running = false;
                        } else if running {
                            next[i + 1] = true;
                        }
                    }
                }
            }
            at = next;
        }
        at[bytes.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(template: &str, uri: &str) -> bool {
        UriTemplate::parse(template).expect(template).matches(uri)
    }

    #[test]
    fn a_variable_is_one_segment() {
        let t = "demo://resource/dynamic/text/{resourceId}";
        assert!(matches(t, "demo://resource/dynamic/text/3"));
        assert!(matches(t, "demo://resource/dynamic/text/a.b%20c"));
        assert!(!matches(t, "demo://resource/dynamic/text/"), "empty");
        assert!(
            !matches(t, "demo://resource/dynamic/text/3/4"),
            "two segments"
        );
        assert!(!matches(t, "demo://resource/dynamic/text/3?x"));
        assert!(!matches(t, "demo://resource/dynamic/blob/3"));
        assert!(!matches(t, "xdemo://resource/dynamic/text/3"));
    }

    #[test]
    fn variables_and_literals_interleave_with_backtracking() {
        assert!(matches("file:///{dir}/{name}.md", "file:///docs/a.b.md"));
        assert!(!matches("file:///{dir}/{name}.md", "file:///docs/a.txt"));
        assert!(matches("x://{a}{b}", "x://ab"));
        assert!(!matches("x://{a}{b}", "x://a"));
        assert!(matches("{scheme}://fixed", "s://fixed"));
        assert!(matches("plain://uri", "plain://uri") && !matches("plain://uri", "plain://ur"));
    }

    #[test]
    fn a_reserved_variable_spans_segments() {
        assert!(matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(matches(
            "git://{repo}/blob/{+path}",
            "git://r/blob/src/main.rs"
        ));
        assert!(!matches("file:///{+path}", "file:///"));
    }

    #[test]
    fn other_expressions_are_not_matched() {
        for template in [
            "x://{?q}",
            "x://{/p}",
            "x://{a,b}",
            "x://{#f}",
            "x://{}",
            "x://{a",
            "x://a}",
        ] {
            assert_eq!(UriTemplate::parse(template), None, "{template}");
        }
    }

    #[test]
    fn a_long_uri_is_matched_in_linear_time_per_part() {
        let uri = format!("x://{}", "a".repeat(200_000));
        assert!(!matches("x://{a}{b}{c}{d}{e}{f}/end", &uri));
        assert!(matches("x://{a}{b}{c}{d}{e}{f}", &uri));
    }
}
