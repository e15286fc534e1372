//! Any bytes as a catalog file: `Catalog::parse` returns Ok or a `CatalogError`, never panics;
//! the tools of an accepted catalog can be read (`tool_defs`, signatures, summaries).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use meta_server::catalog::Catalog;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match Catalog::parse(Path::new("fuzz.json"), &text) {
        Ok(catalog) => {
            for tool in catalog.tool_defs() {
                let _ = tool.signature();
                let _ = tool.params();
                let _ = tool.summary(40);
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
