//! Time to cut a 10 MB result to a 40,000-byte budget, over seeded synthetic JSON and text.
//! Run: `cargo bench --bench truncate`; results and machine in BENCHMARKS.md.

use meta_server::result::truncate::{self, ContentKind};

fn main() {
    divan::main();
}

const SIZE: usize = 10 * 1024 * 1024;
const BUDGET: usize = 40_000;

const WORDS: &[&str] = &[
    "result",
    "server",
    "token",
    "budget",
    "notice",
    "élément",
    "line",
    "cut",
    "store",
    "page",
    "offset",
    "the",
    "a",
    "of",
    "with",
    "données",
    "recovery",
    "client",
    "tool",
    "call",
];

/// Deterministic pseudo-random numbers (a 64-bit LCG), so every run cuts the same input.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.next() % WORDS.len()]
    }
}

/// About 10 MB of JSON: `{"total": n, "items": [{"id", "name", "tags", "score", ...}]}`.
fn json_10mb() -> String {
    let mut rng = Seeded(7);
    let mut out = String::from("{\"total\": 0, \"items\": [");
    let mut i = 0;
    while out.len() < SIZE {
        if i > 0 {
            out.push(',');
        }
        let name: Vec<&str> = (0..6).map(|_| rng.word()).collect();
        let tags: Vec<String> = (0..3).map(|_| format!("\"{}\"", rng.word())).collect();
        out.push_str(&format!(
            "{{\"id\": {i}, \"name\": \"{}\", \"tags\": [{}], \"score\": {}.{}, \"ok\": true, \"note\": \"a \\\"quoted\\\" \\u00e9 word\"}}",
            name.join(" "),
            tags.join(", "),
            rng.next() % 100,
            rng.next() % 1000
        ));
        i += 1;
    }
    out.push_str("], \"next\": null}");
    out
}

/// About 10 MB of prose in lines of a few sentences.
fn text_10mb(newlines: bool) -> String {
    let mut rng = Seeded(11);
    let mut out = String::new();
    while out.len() < SIZE {
        for _ in 0..(3 + rng.next() % 3) {
            let sentence: Vec<&str> = (0..(5 + rng.next() % 10)).map(|_| rng.word()).collect();
            out.push_str(&sentence.join(" "));
            out.push_str(". ");
        }
        out.push(if newlines { '\n' } else { ' ' });
    }
    out
}

fn fits(s: &str) -> bool {
    s.len() <= BUDGET
}

#[divan::bench]
fn cut_json_10mb(bencher: divan::Bencher) {
    let text = json_10mb();
    assert_eq!(truncate::detect(&text), ContentKind::Json);
    bencher.bench(|| truncate::cut(&text, &fits));
}

#[divan::bench]
fn cut_text_10mb(bencher: divan::Bencher) {
    let text = text_10mb(true);
    assert_eq!(truncate::detect(&text), ContentKind::Text);
    bencher.bench(|| truncate::cut(&text, &fits));
}

#[divan::bench]
fn cut_one_line_10mb(bencher: divan::Bencher) {
    let text = text_10mb(false);
    bencher.bench(|| truncate::cut(&text, &fits));
}

#[divan::bench]
fn detect_json_10mb(bencher: divan::Bencher) {
    let text = json_10mb();
    bencher.bench(|| truncate::detect(&text));
}

#[divan::bench]
fn page_text_10mb(bencher: divan::Bencher) {
    let text = text_10mb(true);
    bencher.bench(|| truncate::page(&text, 5_000_000, 10_000));
}
