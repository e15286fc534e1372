//! Search latency and index build time over seeded synthetic catalogs.
//! Run: `cargo bench --bench search`; results and machine in BENCHMARKS.md.

use meta_server::search::embed::{QuantizedRow, VectorTable};
use meta_server::search::{DocVectors, SearchIndex, ToolDoc};

fn main() {
    divan::main();
}

const VERBS: &[&str] = &[
    "get", "list", "create", "update", "delete", "search", "read", "write", "send", "fetch",
    "sync", "convert",
];
const NOUNS: &[&str] = &[
    "issue",
    "file",
    "repository",
    "message",
    "channel",
    "invoice",
    "customer",
    "ticket",
    "page",
    "record",
    "event",
    "calendar",
    "user",
    "branch",
    "commit",
    "image",
    "table",
    "query",
    "document",
    "folder",
    "payment",
    "order",
];
const WORDS: &[&str] = &[
    "the", "a", "for", "with", "from", "in", "by", "of", "returns", "optional", "filter", "limit",
    "status", "recent", "project", "team", "account", "data", "details", "all", "matching",
    "given", "id", "name", "time", "range",
];

/// Deterministic pseudo-random numbers (a 64-bit LCG), so every run indexes the same tools.
struct Seeded(u64);

impl Seeded {
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        from[(self.0 >> 33) as usize % from.len()]
    }
}

/// `n` tools over `n / 100` servers, names in snake, camel and kebab case.
pub fn synthetic(n: usize) -> Vec<ToolDoc> {
    let mut rng = Seeded(42);
    (0..n)
        .map(|i| {
            let (verb, noun, extra) = (rng.pick(VERBS), rng.pick(NOUNS), rng.pick(NOUNS));
            let name = match i % 3 {
                0 => format!("{verb}_{noun}_{extra}_{i}"),
                1 => format!("{verb}{}{}{i}", capitalize(noun), capitalize(extra)),
                _ => format!("{verb}-{noun}-{extra}-{i}"),
            };
            let description: Vec<&str> = (0..14)
                .map(|_| rng.pick(WORDS))
                .chain([verb, noun, extra])
                .collect();
            let server = format!("server{}", i / 100);
            ToolDoc {
                key: format!("{server}__{name}"),
                server: server.clone(),
                name,
                title: String::new(),
                description: description.join(" "),
                params: format!("{noun}_id {} limit", rng.pick(WORDS)),
                server_text: server,
                learned: String::new(),
            }
        })
        .collect()
}

fn capitalize(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

const QUERIES: &[&str] = &[
    "create an invoice for a customer",
    "listRecentCommits",
    "delete ticket",
    "search messages in a channel",
    "sync calendar events",
];

/// `synthetic(n)` with five learned queries for every fifth tool: at 10k tools, 10,000 learned
/// queries, the most meta-server keeps.
pub fn synthetic_learned(n: usize) -> Vec<ToolDoc> {
    let mut rng = Seeded(7);
    let mut docs = synthetic(n);
    for doc in docs.iter_mut().step_by(5) {
        let queries: Vec<String> = (0..5)
            .map(|_| {
                let words = [
                    rng.pick(VERBS),
                    rng.pick(WORDS),
                    rng.pick(NOUNS),
                    rng.pick(WORDS),
                ];
                words.join(" ")
            })
            .collect();
        doc.learned = queries.join("\n");
    }
    docs
}

#[divan::bench(args = [1_000, 10_000])]
fn build_index(bencher: divan::Bencher, n: usize) {
    let docs = synthetic(n);
    bencher.bench(|| SearchIndex::build(docs.clone()).unwrap());
}

#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 200)]
fn query_top8(bencher: divan::Bencher, n: usize) {
    let index = SearchIndex::build(synthetic(n)).unwrap();
    let mut i = 0;
    bencher.bench_local(|| {
        i += 1;
        index.search(QUERIES[i % QUERIES.len()], 8, None).unwrap()
    });
}

/// [`query_top8`] over an index whose tools learned queries ([`synthetic_learned`]).
#[divan::bench(args = [1_000, 10_000], sample_count = 200)]
fn query_top8_learned(bencher: divan::Bencher, n: usize) {
    let index = SearchIndex::build(synthetic_learned(n)).unwrap();
    let mut i = 0;
    bencher.bench_local(|| {
        i += 1;
        index.search(QUERIES[i % QUERIES.len()], 8, None).unwrap()
    });
}

/// One server's 100 tools re-listed (`tools/list_changed`) in a catalog of `n` tools: only
/// that server is re-indexed. Each sample starts from a fresh build (not timed).
#[divan::bench(args = [1_000, 10_000], sample_count = 20)]
fn replace_server(bencher: divan::Bencher, n: usize) {
    let docs = synthetic(n);
    let server: Vec<ToolDoc> = docs
        .iter()
        .filter(|d| d.server == "server3")
        .cloned()
        .collect();
    bencher
        .with_inputs(|| SearchIndex::build(docs.clone()).unwrap())
        .bench_local_refs(|index| {
            index
                .replace_server("server3", server.clone())
                .unwrap()
                .expect("incremental")
        });
}

/// Ten tools' learned queries changed in a catalog of `n` tools (a merge of what sessions
/// taught): only those tools are re-indexed. Each sample starts from a fresh build (not timed).
#[divan::bench(args = [1_000, 10_000], sample_count = 20)]
fn replace_learned_tools(bencher: divan::Bencher, n: usize) {
    let docs = synthetic(n);
    let changed: Vec<ToolDoc> = docs
        .iter()
        .step_by(n / 10)
        .map(|d| ToolDoc {
            learned: "send the weekly invoice to the customer".into(),
            ..d.clone()
        })
        .collect();
    bencher
        .with_inputs(|| SearchIndex::build(docs.clone()).unwrap())
        .bench_local_refs(|index| {
            index
                .replace_tools(changed.clone())
                .unwrap()
                .expect("incremental")
        });
}

/// `n` seeded unit vectors of 384 dimensions (the model's), all distinct: the worst case for
/// the vector table, which stores a text shared by several tools once.
fn synthetic_vectors(n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            let v: Vec<f32> = (0..384)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect()
        })
        .collect()
}

/// The tool vectors of `index` (one synthetic vector each) in a table file in `dir`, mapped.
fn mapped_vectors(index: &SearchIndex, dir: &std::path::Path) -> std::sync::Arc<VectorTable> {
    let rows = synthetic_vectors(index.keys().len(), 7)
        .into_iter()
        .enumerate()
        .map(|(i, v)| (i as u64, QuantizedRow::of(&v)));
    let path = dir.join(".tool-vectors");
    VectorTable::new("synthetic", 384, rows)
        .save(&path)
        .unwrap();
    std::sync::Arc::new(VectorTable::open(&path).unwrap().unwrap())
}

/// Hybrid search over `n` tools: BM25 fused with the cosine of every tool's vector, read from
/// a mapped table (the query vectors are given: the model's time is not counted).
#[divan::bench(args = [10_000, 100_000], sample_count = 200)]
fn hybrid_query_top8(bencher: divan::Bencher, n: usize) {
    let index = SearchIndex::build(synthetic(n)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = mapped_vectors(&index, dir.path());
    let vectors = DocVectors::of_table(table, (0..index.keys().len() as u32).map(Some));
    let queries = synthetic_vectors(QUERIES.len(), 11);
    let mut i = 0;
    bencher.bench_local(|| {
        i += 1;
        let q = i % QUERIES.len();
        index
            .search_hybrid(QUERIES[q], &queries[q], &vectors, None, 8, None)
            .unwrap()
    });
}

/// [`hybrid_query_top8`]'s first query: the table mapped again before each sample, so the
/// time includes opening it and faulting its pages in (from the page cache).
#[divan::bench(args = [100_000], sample_count = 20)]
fn hybrid_first_query(bencher: divan::Bencher, n: usize) {
    let index = SearchIndex::build(synthetic(n)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    mapped_vectors(&index, dir.path());
    let path = dir.path().join(".tool-vectors");
    let query = &synthetic_vectors(1, 11)[0];
    bencher.bench_local(|| {
        let table = std::sync::Arc::new(VectorTable::open(&path).unwrap().unwrap());
        let vectors = DocVectors::of_table(table, (0..index.keys().len() as u32).map(Some));
        index
            .search_hybrid(QUERIES[0], query, &vectors, None, 8, None)
            .unwrap()
    });
}
