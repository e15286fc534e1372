//! Any text and byte budget (the first two input bytes): `cut` and `page` never panic and keep
//! their contracts.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meta_server::result::truncate::{Boundary, cut, detect, page};

fuzz_target!(|data: &[u8]| {
    let Some((budget, rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let budget = usize::from(u16::from_le_bytes(*budget));
    let text = String::from_utf8_lossy(rest);
    let text = text.as_ref();
    let chars = text.chars().count();
    let _ = detect(text);

    let fits = |s: &str| s.len() <= budget;
    let c = cut(text, &fits);
    assert!(c.shown.is_empty() || fits(&c.shown), "shown does not fit");
    assert!(c.next_offset <= chars, "next_offset past the end");
    if fits(text) {
        assert_eq!(c.shown, text, "a text that fits is cut");
    }
    if c.is_whole(text) {
        assert_eq!(
            c.next_offset, chars,
            "whole text with next_offset before the end"
        );
    }
    if c.boundary == Boundary::JsonElement {
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&c.shown) {
            panic!("json-element cut is not JSON: {e}");
        }
    } else {
        assert!(text.starts_with(&c.shown), "shown is not a prefix");
        assert_eq!(
            c.next_offset,
            c.shown.chars().count(),
            "next_offset is not shown's length"
        );
    }

    let max_chars = budget % 512;
    let (mut rebuilt, mut from) = (String::new(), 0);
    loop {
        let (p, next) = page(text, from, max_chars);
        assert!(
            p.chars().count() <= max_chars.max(1),
            "page longer than max_chars"
        );
        assert_eq!(
            next,
            from + p.chars().count(),
            "next_offset does not follow the page"
        );
        if p.is_empty() {
            break;
        }
        rebuilt.push_str(&p);
        from = next;
    }
    assert_eq!(from, chars, "paging stopped early");
    assert_eq!(rebuilt, text, "pages do not rebuild the text");
});
