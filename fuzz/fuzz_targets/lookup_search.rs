//! Any pattern over any stored text (the input split at its first NUL): searching a stored
//! result's text returns matches or a `LookupError`, never panics, and every match's offset is
//! inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meta_server::result::search_text;

fuzz_target!(|data: &[u8]| {
    let data = String::from_utf8_lossy(data);
    let (pattern, text) = data
        .split_once('\0')
        .unwrap_or((&data, "line one\nline two"));
    let chars = text.chars().count();
    for context in [0, 3] {
        if let Ok((matches, total)) = search_text(text, pattern, context, 20) {
            assert!(matches.len() <= total.min(20), "more matches than found");
            for m in matches {
                assert!(m.offset <= chars, "match offset past the end");
            }
        }
    }
});
