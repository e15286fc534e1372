//! Result handling of large results end to end: count, cut at a boundary, store whole.
//! Run: `cargo bench --bench results`; numbers and machine in BENCHMARKS.md.

use std::sync::Arc;
use std::time::Duration;

use meta_server::budget::{Limits, O200k, Route};
use meta_server::result::{Owner, ResultHandler, SpillStore};
use meta_server::store::DEFAULT_SPILL_BYTES;
use rmcp::model::{CallToolResult, ContentBlock};

fn main() {
    divan::main();
}

const TEN_MB: usize = 10 << 20;
const LIMITS: Limits = Limits {
    soft: 10_000,
    hard: 50_000_000,
};

/// Seeded 10 MB JSON: an object whose `items` array holds records.
fn json_10mb() -> String {
    let mut out = String::from("{\"total\": 0, \"items\": [");
    let mut i = 0u64;
    while out.len() < TEN_MB {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "{{\"id\": {i}, \"name\": \"record {i}\", \"tags\": [\"a{}\", \"b{}\"], \"score\": {}.{}}}",
            i % 97,
            i % 13,
            i % 1000,
            i % 10
        ));
        i += 1;
    }
    out.push_str("]}");
    out
}

/// Seeded 10 MB of log-like text lines.
fn text_10mb() -> String {
    let mut out = String::new();
    let mut i = 0u64;
    while out.len() < TEN_MB {
        out.push_str(&format!(
            "2026-11-29T12:{:02}:{:02}Z INFO request {i} served in {} ms\n",
            i % 60,
            i % 59,
            i % 300
        ));
        i += 1;
    }
    out
}

fn handler() -> ResultHandler {
    let store = SpillStore::new(Duration::from_secs(3600), 256 << 20, DEFAULT_SPILL_BYTES);
    ResultHandler::new(Arc::new(store), Arc::new(O200k))
}

fn shape(bencher: divan::Bencher, text: String) {
    let handler = handler();
    let owner = Owner::shared();
    let route = Route::CallTool {
        server: "bench".into(),
    };
    bencher
        .with_inputs(|| CallToolResult::success(vec![ContentBlock::text(text.clone())]))
        .bench_local_values(|result| {
            // The local store never waits: shaping runs to completion on the first poll.
            futures::executor::block_on(handler.shape(
                "bench__tool",
                &route,
                LIMITS,
                &owner,
                result,
            ))
        });
}

#[divan::bench(sample_count = 20)]
fn cut_and_store_json_10mb(bencher: divan::Bencher) {
    shape(bencher, json_10mb());
}

#[divan::bench(sample_count = 20)]
fn cut_and_store_text_10mb(bencher: divan::Bencher) {
    shape(bencher, text_10mb());
}
