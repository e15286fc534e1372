//! Any pattern over any stored text (the input split at its first NUL): searching a stored
//! result returns matches or a `LookupError`, never panics, and every match's offset is inside
//! the text.
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use meta_server::budget::ByteEstimate;
use meta_server::result::{Owner, ResultHandler, SpillStore, Stored};

fuzz_target!(|data: &[u8]| {
    let data = String::from_utf8_lossy(data);
    let (pattern, text) = data
        .split_once('\0')
        .unwrap_or((&data, "line one\nline two"));
    let store = SpillStore::new(Duration::from_secs(60), 64 << 20, usize::MAX);
    let handler = ResultHandler::new(Arc::new(store), Arc::new(ByteEstimate));
    let owner = Owner::session();
    let id = handler
        .store()
        .put(
            &owner,
            Stored::text("fuzz__t", "text/plain", text.to_owned()),
        )
        .expect("a small text is stored");
    let chars = text.chars().count();
    for context in [0, 3] {
        if let Ok((matches, total)) = handler.search(&id, &owner, pattern, context, 20) {
            assert!(matches.len() <= total.min(20), "more matches than found");
            for m in matches {
                assert!(m.offset <= chars, "match offset past the end");
            }
        }
    }
});
