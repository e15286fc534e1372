//! Whether a URI is one a resource template describes. RFC 6570 level 1 is enough for the
//! templates servers publish: `{var}` stands for one or more characters other than `/`, `?`
//! and `#` (what simple expansion leaves unescaped); `{+var}` (level 2) for one or more of any
//! character. A template with any other expression (`{?q}`, `{/path}`, `{a,b}`) matches
//! nothing: it is still listed, and its URIs are not routed.

use std::cell::OnceCell;

/// The longest URI matched against templates: a URI no server lists, longer than this, is
/// refused before any matching (HTTP servers commonly take request lines of 8 KiB).
pub(super) const MAX_URI_BYTES: usize = 8 << 10;

/// The work one URI's matching may take, in 64-bit word operations over its positions: far
/// above what real templates need (the probe's 500 templates of 20 parts, every variable
/// reachable, against an 8 KiB URI take 3.2 M).
const MAX_WORK: u64 = 1 << 22;

/// Why a URI was not matched against the templates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(in crate::server) enum MatchError {
    #[error(
        "the resource URI is {len} bytes long and no server lists it; URIs over {MAX_URI_BYTES} bytes are not matched against resource templates: read a URI that resources/list shows, or a shorter one"
    )]
    TooLong { len: usize },
    #[error(
        "matching this {len}-byte URI against the servers' {templates} resource templates takes more work than meta-server allows one URI; read a URI that resources/list shows, or a shorter one"
    )]
    TooMuchWork { len: usize, templates: usize },
}

impl From<MatchError> for rmcp::ErrorData {
    fn from(e: MatchError) -> Self {
        Self::invalid_params(e.to_string(), None)
    }
}

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

    /// Whether `uri` is one this template expands to, within `work`'s budget (`None`: spent).
    ///
    /// The positions of the URI a prefix of the template can end at are a bit set, so each
    /// part costs a pass over the URI's words: a variable fills runs of the characters it may
    /// hold from the positions it starts at (one addition with carries), a literal keeps the
    /// positions where each of its bytes follows. Linear in the URI per byte of template, a
    /// 64th of it in operations; a first or last literal that does not fit costs nothing more.
    fn matches_within(&self, subject: &Subject, work: &mut u64) -> Option<bool> {
        let uri = subject.uri;
        let mut parts = &self.0[..];
        if let Some(Part::Literal(last)) = parts.last()
            && !uri.ends_with(last.as_bytes())
        {
            return Some(false);
        }
        let mut at = vec![0u64; subject.words];
        match parts.first() {
            Some(Part::Literal(first)) if !uri.starts_with(first.as_bytes()) => return Some(false),
            Some(Part::Literal(first)) => {
                set(&mut at, first.len());
                parts = &parts[1..];
            }
            _ => set(&mut at, 0),
        }
        for part in parts {
            let cost = match part {
                Part::Literal(text) => text.len() as u64 + 1,
                Part::Var { .. } => 3,
            };
            *work = work.checked_sub(cost * subject.words as u64)?;
            at = match part {
                Part::Var { reserved } => {
                    let holds = if *reserved {
                        subject.chars()
                    } else {
                        subject.unreserved()
                    };
                    shl(&fill(holds, &at), 1)
                }
                Part::Literal(text) => {
                    for (j, byte) in text.bytes().enumerate() {
                        and_shr(&mut at, subject.positions_of(byte), j);
                    }
                    shl(&at, text.len())
                }
            };
            if at.iter().all(|w| *w == 0) {
                return Some(false);
            }
        }
        Some(get(&at, uri.len()))
    }

    /// Whether `uri` matches, without a work budget (tests).
    #[cfg(test)]
    pub(super) fn matches(&self, uri: &str) -> bool {
        let subject = Subject::new(uri.as_bytes());
        let mut unlimited = u64::MAX;
        (self.matches_within(&subject, &mut unlimited)).expect("no budget")
    }
}

/// The first of `templates` (each with its owner; `None`: not matchable) that `uri` matches,
/// within [`MAX_URI_BYTES`] and [`MAX_WORK`].
pub(super) fn first_match<'t, T>(
    templates: impl ExactSizeIterator<Item = (T, Option<&'t UriTemplate>)>,
    uri: &str,
) -> Result<Option<T>, MatchError> {
    let len = uri.len();
    if len > MAX_URI_BYTES {
        return Err(MatchError::TooLong { len });
    }
    let count = templates.len();
    let subject = Subject::new(uri.as_bytes());
    let mut work = MAX_WORK;
    for (owner, template) in templates {
        let Some(template) = template else {
            continue;
        };
        match template.matches_within(&subject, &mut work) {
            Some(true) => return Ok(Some(owner)),
            Some(false) => {}
            None => {
                return Err(MatchError::TooMuchWork {
                    len,
                    templates: count,
                });
            }
        }
    }
    Ok(None)
}

/// A URI as bit sets over its positions, each made when a template first needs it. Position
/// `p` is the boundary before byte `p` (so there are `len + 1`); a byte set has bit `p` for
/// byte `p`.
struct Subject<'a> {
    uri: &'a [u8],
    words: usize,
    /// Bytes a `{var}` may hold (not `/`, `?`, `#`).
    unreserved: OnceCell<Vec<u64>>,
    /// Every byte (what a `{+var}` may hold).
    chars: OnceCell<Vec<u64>>,
    /// Where each byte value occurs.
    bytes: OnceCell<Vec<Option<Vec<u64>>>>,
    none: Vec<u64>,
}

impl<'a> Subject<'a> {
    fn new(uri: &'a [u8]) -> Self {
        let words = uri.len() / 64 + 1;
        Self {
            uri,
            words,
            unreserved: OnceCell::new(),
            chars: OnceCell::new(),
            bytes: OnceCell::new(),
            none: vec![0; words],
        }
    }

    fn bits(&self, keep: impl Fn(u8) -> bool) -> Vec<u64> {
        let mut bits = vec![0u64; self.words];
        for (i, byte) in self.uri.iter().enumerate() {
            if keep(*byte) {
                set(&mut bits, i);
            }
        }
        bits
    }

    fn unreserved(&self) -> &[u64] {
        (self.unreserved).get_or_init(|| self.bits(|b| !matches!(b, b'/' | b'?' | b'#')))
    }

    fn chars(&self) -> &[u64] {
        self.chars.get_or_init(|| self.bits(|_| true))
    }

    fn positions_of(&self, byte: u8) -> &[u64] {
        let bytes = self.bytes.get_or_init(|| {
            let mut bytes: Vec<Option<Vec<u64>>> = vec![None; 256];
            for (i, b) in self.uri.iter().enumerate() {
                set(
                    bytes[*b as usize].get_or_insert_with(|| vec![0; self.words]),
                    i,
                );
            }
            bytes
        });
        bytes[byte as usize].as_deref().unwrap_or(&self.none)
    }
}

fn set(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

fn get(bits: &[u64], i: usize) -> bool {
    bits[i / 64] >> (i % 64) & 1 == 1
}

/// The bytes a variable started at a position of `from` runs over: from each such position on
/// through the run of `holds` it starts in. Adding a run's starts to the run carries through
/// it to its end, so `(holds + starts) ^ holds` marks each run from its first start on (and
/// the position past it), less the later starts, which the `| starts` puts back.
fn fill(holds: &[u64], from: &[u64]) -> Vec<u64> {
    let mut out = vec![0u64; holds.len()];
    let mut carry = false;
    for (i, out) in out.iter_mut().enumerate() {
        let starts = from[i] & holds[i];
        let (sum, over) = holds[i].overflowing_add(starts);
        let (sum, over_too) = sum.overflowing_add(u64::from(carry));
        carry = over || over_too;
        *out = holds[i] & ((sum ^ holds[i]) | starts);
    }
    out
}

/// `bits` moved `by` positions up (dropping what passes the end).
fn shl(bits: &[u64], by: usize) -> Vec<u64> {
    let (words, shift) = (by / 64, by % 64);
    let mut out = vec![0u64; bits.len()];
    for i in words..bits.len() {
        let low = bits[i - words] << shift;
        let high = match (shift, i.checked_sub(words + 1)) {
            (0, _) | (_, None) => 0,
            (_, Some(j)) => bits[j] >> (64 - shift),
        };
        out[i] = low | high;
    }
    out
}

/// Keeps in `at` the positions `p` where `bytes` has `p + by`.
fn and_shr(at: &mut [u64], bytes: &[u64], by: usize) {
    let (words, shift) = (by / 64, by % 64);
    for (i, word) in at.iter_mut().enumerate() {
        let low = bytes.get(i + words).map_or(0, |w| w >> shift);
        let high = match (shift, bytes.get(i + words + 1)) {
            (0, _) | (_, None) => 0,
            (_, Some(w)) => w << (64 - shift),
        };
        *word &= low | high;
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
        assert!(!matches("x://{a}a{b}a{c}/", &uri));
        assert!(matches("x:/{+a}a{b}a{c}", &uri));
    }

    fn first(templates: &[UriTemplate], uri: &str) -> Result<Option<usize>, MatchError> {
        first_match(templates.iter().map(Some).enumerate(), uri)
    }

    #[test]
    fn a_uri_over_the_limit_is_refused_before_any_matching() {
        let templates = [UriTemplate::parse("x://{+rest}").unwrap()];
        let fits = format!("x://{}", "a".repeat(MAX_URI_BYTES - 4));
        assert_eq!(first(&templates, &fits), Ok(Some(0)));
        let over = format!("{fits}a");
        let refused = first(&templates, &over).unwrap_err();
        assert_eq!(
            refused,
            MatchError::TooLong {
                len: MAX_URI_BYTES + 1
            }
        );
        assert!(
            refused
                .to_string()
                .contains("read a URI that resources/list shows")
        );
    }

    #[test]
    fn templates_past_the_work_budget_are_refused_not_matched_for_long() {
        // The probe's shape, about 20 parts each: every variable is reachable everywhere in the
        // URI, and only its last byte rules the template out.
        let hostile = |i: usize| {
            let vars: Vec<String> = (0..10).map(|v| format!("{{v{v}_{i}}}")).collect();
            UriTemplate::parse(&vars.join("a")).unwrap()
        };
        let uri = format!("{}/", "a".repeat(MAX_URI_BYTES - 1));
        let some: Vec<UriTemplate> = (0..100).map(hostile).collect();
        assert_eq!(first(&some, &uri), Ok(None), "within the budget");
        let many: Vec<UriTemplate> = (0..5_000).map(hostile).collect();
        assert_eq!(
            first(&many, &uri),
            Err(MatchError::TooMuchWork {
                len: MAX_URI_BYTES,
                templates: 5_000
            })
        );
        // A short URI against the same templates is matched to the end.
        assert_eq!(first(&many, "aaaa/"), Ok(None));
        let mut with_match = many;
        with_match.push(UriTemplate::parse("a{x}/").unwrap());
        assert_eq!(first(&with_match, "aaaa/"), Ok(Some(5_000)));
        assert_eq!(first(&with_match, &"a".repeat(40)), Ok(Some(0)));
        // Templates a first or last literal rules out cost nothing, whatever their number.
        let prefixed: Vec<UriTemplate> = (0..50_000)
            .map(|i| UriTemplate::parse(&format!("t{i}://{{a}}")).unwrap())
            .collect();
        assert_eq!(first(&prefixed, &uri), Ok(None));
    }

    /// The matcher this module had before (a boolean per position, byte by byte): slow but
    /// plainly right, the reference for the bit-parallel one.
    fn reference(template: &UriTemplate, uri: &str) -> bool {
        let bytes = uri.as_bytes();
        let mut at = vec![false; bytes.len() + 1];
        at[0] = true;
        for part in &template.0 {
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

    proptest::proptest! {
        #[test]
        fn the_bit_parallel_matcher_agrees_with_the_reference(
            parts in proptest::collection::vec(
                proptest::prop_oneof![
                    "[ab/]{1,3}",
                    proptest::strategy::Just("{v}".to_owned()),
                    proptest::strategy::Just("{+r}".to_owned()),
                ],
                0..6,
            ),
            uri in "[ab/?]{0,150}",
        ) {
            let template = UriTemplate::parse(&parts.concat()).unwrap();
            proptest::prop_assert_eq!(template.matches(&uri), reference(&template, &uri));
        }

        #[test]
        fn matches_agree_on_uris_the_template_makes(
            literal in "[a-z/]{0,70}",
            value in "[a-z]{1,80}",
            path in "[a-z/?]{1,140}",
        ) {
            let text = format!("{literal}{{v}}{literal}{{+p}}.md");
            let template = UriTemplate::parse(&text).unwrap();
            let uri = format!("{literal}{value}{literal}{path}.md");
            proptest::prop_assert!(template.matches(&uri));
            proptest::prop_assert_eq!(template.matches(&uri), reference(&template, &uri));
        }
    }
}
