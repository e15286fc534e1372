//! Characters a reader cannot see but a model reads: Unicode's default-ignorable code points
//! (tags, which spell out ASCII invisibly; zero-width characters; bidi controls; variation
//! selectors, a channel for smuggling bytes; the soft hyphen; Hangul fillers; ...), the line
//! and paragraph separators, the interlinear annotation controls, and control characters but
//! tab, line feed and carriage return. Upstream text (tools, prompts, resources, instructions,
//! relayed requests) is read without them, and what held any says how many were removed.

use serde_json::Value;

/// Whether `c` is invisible in text as shown to a user.
///
/// The default-ignorable ranges are Unicode's `Default_Ignorable_Code_Point`
/// (DerivedCoreProperties.txt); a test walks every code point against the property.
pub fn is_hidden(c: char) -> bool {
    matches!(c,
        // Default_Ignorable_Code_Point
        '\u{00AD}'                       // soft hyphen
        | '\u{034F}'                     // combining grapheme joiner
        | '\u{061C}'                     // Arabic letter mark
        | '\u{115F}'..='\u{1160}'        // Hangul fillers
        | '\u{17B4}'..='\u{17B5}'        // Khmer inherent vowels
        | '\u{180B}'..='\u{180F}'        // Mongolian variation selectors, vowel separator
        | '\u{200B}'..='\u{200F}'        // zero-width space, joiners, LRM, RLM
        | '\u{202A}'..='\u{202E}'        // bidi embeddings and overrides
        | '\u{2060}'..='\u{206F}'        // word joiner, invisible operators, bidi isolates, deprecated format controls
        | '\u{3164}'                     // Hangul filler
        | '\u{FE00}'..='\u{FE0F}'        // variation selectors
        | '\u{FEFF}'                     // zero-width no-break space
        | '\u{FFA0}'                     // halfwidth Hangul filler
        | '\u{FFF0}'..='\u{FFF8}'        // unassigned, ignorable
        | '\u{1BCA0}'..='\u{1BCA3}'      // shorthand format controls
        | '\u{1D173}'..='\u{1D17A}'      // musical formatting controls
        | '\u{E0000}'..='\u{E0FFF}'      // tags, variation selectors supplement
        // Not default-ignorable, yet unseen in a line of text
        | '\u{2028}'..='\u{2029}'        // line and paragraph separators
        | '\u{FFF9}'..='\u{FFFB}'        // interlinear annotation controls
        | '\u{0000}'..='\u{0008}'        // control characters (but tab, LF, CR)
        | '\u{000B}'..='\u{000C}'
        | '\u{000E}'..='\u{001F}'
        | '\u{007F}'..='\u{009F}'
    )
}

/// Whether `text` holds a hidden character: `text.chars().any(is_hidden)`, with blocks of
/// printable ASCII, tab, line feed and carriage return (most of any tool text) passed over
/// whole, which the compiler vectorizes.
pub fn holds_hidden(text: &str) -> bool {
    const BLOCK: usize = 32;
    let bytes = text.as_bytes();
    // Always a char boundary: blocks passed over are ASCII, the rest is read char by char.
    let mut at = 0;
    while at < bytes.len() {
        let end = bytes.len().min(at + BLOCK);
        let plain = bytes[at..end].iter().fold(true, |plain, &b| {
            plain & matches!(b, b' '..=b'~' | b'\t' | b'\n' | b'\r')
        });
        if plain {
            at = end;
            continue;
        }
        for c in text[at..].chars() {
            if is_hidden(c) {
                return true;
            }
            at += c.len_utf8();
            if at >= end {
                break;
            }
        }
    }
    false
}

/// Whether `c` is a variation selector (U+FE00-FE0F and the supplement), which picks how the
/// character before it is drawn, or smuggles bits in a run of them.
fn is_selector(c: char) -> bool {
    matches!(c, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}')
}

/// `text` without hidden characters, and how many were removed that could hide something. A
/// line or paragraph separator becomes a line feed (the words around it stay apart). A lone
/// emoji or text presentation selector after a visible character (the U+FE0F of ⚠️) is
/// removed without being counted: it hides nothing, and many descriptions hold one.
pub fn strip(text: &str) -> (String, usize) {
    let mut kept = String::with_capacity(text.len());
    let mut removed = 0;
    let mut chars = text.chars().peekable();
    let mut before: Option<char> = None;
    while let Some(c) = chars.next() {
        if !is_hidden(c) {
            kept.push(c);
            before = Some(c);
            continue;
        }
        let presentation = matches!(c, '\u{FE0E}' | '\u{FE0F}')
            && before.is_some_and(|b| !is_hidden(b))
            && !chars.peek().is_some_and(|n| is_selector(*n));
        if matches!(c, '\u{2028}' | '\u{2029}') {
            kept.push('\n');
        }
        removed += usize::from(!presentation);
        before = Some(c);
    }
    (kept, removed)
}

/// Removes hidden characters from `s`; returns how many (see [`strip`]).
pub fn strip_in_place(s: &mut String) -> usize {
    if !holds_hidden(s) {
        return 0;
    }
    let (kept, removed) = strip(s);
    *s = kept;
    removed
}

/// Removes hidden characters from every string and key in `value`; returns how many.
pub fn strip_value(value: &mut Value) -> usize {
    match value {
        Value::String(s) => strip_in_place(s),
        Value::Array(items) => items.iter_mut().map(strip_value).sum(),
        Value::Object(map) if map.keys().any(|k| holds_hidden(k)) => {
            let mut removed = 0;
            for (mut key, mut v) in std::mem::take(map) {
                removed += strip_in_place(&mut key) + strip_value(&mut v);
                map.insert(key, v);
            }
            removed
        }
        Value::Object(map) => map.values_mut().map(strip_value).sum(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use icu_properties::CodePointSetData;
    use icu_properties::props::DefaultIgnorableCodePoint;
    use serde_json::json;

    use super::*;

    #[test]
    fn holds_hidden_agrees_with_reading_char_by_char() {
        // Before, across and after a block of ASCII passed over whole.
        let (p31, p33) = ("x".repeat(31), "y".repeat(33));
        // Every hidden character and its neighbours, the first blocks whole, a sample of the rest.
        let near_hidden = |n: u32| {
            (n.saturating_sub(1)..=n + 1).any(|m| char::from_u32(m).is_some_and(is_hidden))
        };
        let chars = (0..=0x10FFFF)
            .filter(|&n| n < 0x3200 || n % 61 == 0 || near_hidden(n))
            .filter_map(char::from_u32);
        for c in chars {
            for text in [
                format!("{c}"),
                format!("{p31}{c}"),
                format!("é{c}{p33}é{p31}"),
            ] {
                assert_eq!(holds_hidden(&text), text.chars().any(is_hidden), "{text:?}");
            }
        }
        assert!(!holds_hidden(
            "a tool's description — with “quotes” and tabs\t\n"
        ));
        assert!(!holds_hidden(""));
    }

    /// The list is Unicode's property, code point by code point, plus the others named.
    #[test]
    fn hidden_is_the_default_ignorable_set_plus_separators_and_controls() {
        let ignorable = CodePointSetData::new::<DefaultIgnorableCodePoint>();
        let extra = |c: char| {
            matches!(c, '\u{2028}' | '\u{2029}' | '\u{FFF9}'..='\u{FFFB}')
                || (c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        };
        let mut count = 0;
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let expected = ignorable.contains(c) || extra(c);
            assert_eq!(is_hidden(c), expected, "U+{:04X}", c as u32);
            count += usize::from(expected);
        }
        assert!(count > 4_000, "{count}");
    }

    /// The characters the probe found passing (issue 38, L5).
    #[test]
    fn the_characters_that_used_to_pass_are_hidden() {
        for c in [
            '\u{FE00}', '\u{FE0F}', '\u{00AD}', '\u{034F}', '\u{115F}', '\u{1160}', '\u{3164}',
            '\u{FFA0}', '\u{2028}', '\u{2029}', '\u{206A}', '\u{206F}', '\u{FFF9}', '\u{FFFB}',
        ] {
            assert!(is_hidden(c), "U+{:04X}", c as u32);
        }
        for c in [
            'a', ' ', '\t', '\n', '\r', 'é', '漢', '☕', '\u{00A0}', '\u{3000}',
        ] {
            assert!(!is_hidden(c), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn an_emoji_presentation_selector_is_removed_but_not_counted() {
        assert_eq!(
            strip("\u{26A0}\u{FE0F} Note"),
            ("\u{26A0} Note".to_owned(), 0)
        );
        assert_eq!(
            strip("a\u{FE0F}\u{FE01}\u{FE0F}b").1,
            3,
            "a run smuggles bits"
        );
        assert_eq!(strip("\u{FE0F}a").1, 1, "after nothing to draw");
        assert_eq!(strip("a\u{200B}\u{FE0F}").1, 2);
        assert_eq!(strip("one\u{2028}two").0, "one\ntwo");
    }

    #[test]
    fn strip_value_cleans_strings_and_keys_and_counts() {
        let mut value = json!({"a\u{200B}": ["x\u{E0041}y", 1, {"b": "\u{00AD}c"}], "d": null});
        assert_eq!(strip_value(&mut value), 3);
        assert_eq!(value, json!({"a": ["xy", 1, {"b": "c"}], "d": null}));
        assert_eq!(strip_value(&mut value), 0);
    }
}
