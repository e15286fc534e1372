//! What `eval` prints: one set's report (recall, confidence, buckets, latency), as text,
//! JSON, or a table of sets.

use std::time::Duration;

use serde::Serialize;

use crate::search::metrics::{Mean, Scores};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Report {
    /// The set's name (its file name without `.queries.jsonl`).
    pub(super) set: String,
    pub(super) queries: usize,
    /// The set's tools (meta-server's own are searched too, as by search_tools, not counted).
    pub(super) tools: usize,
    pub(super) limit: u16,
    /// `bm25`, or `hybrid` with the fusion used.
    pub(super) ranking: String,
    /// Gold items whose tool is not in the catalog (they count as misses).
    pub(super) unknown_gold: usize,
    pub(super) metrics: Scores,
    /// How often search_tools would say `confident: true`, and how right it is then.
    pub(super) confidence: Confidence,
    /// R@1 by the best hit's coverage (see `search::Hit::coverage`).
    pub(super) by_coverage: Vec<Bucket>,
    /// R@1 by the best hit's cosine with the query (hybrid search only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) by_similarity: Vec<Bucket>,
    /// In-process time per query (the search alone, query embedding included), this build.
    pub(super) latency_ms: Latency,
}

#[derive(Serialize)]
pub(super) struct Confidence {
    pub(super) share: f64,
    #[serde(rename = "recall@1Confident")]
    pub(super) recall_1_confident: f64,
    #[serde(rename = "recall@1NotConfident")]
    pub(super) recall_1_not_confident: f64,
    /// Share of queries still called confident when their gold tools are dropped from the
    /// ranking (as if the catalog lacked them): an estimate, on the high side, of how often
    /// noise is passed as an answer (another tool may answer too).
    #[serde(rename = "heldOutShare")]
    pub(super) held_out_share: f64,
}

#[derive(Serialize)]
pub(super) struct Bucket {
    pub(super) range: String,
    pub(super) share: f64,
    #[serde(rename = "recall@1")]
    pub(super) recall_1: f64,
}

#[derive(Serialize)]
pub(super) struct Latency {
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) max: f64,
}

#[allow(clippy::print_stdout)]
pub(super) fn print(r: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    let m = &r.metrics;
    println!(
        "{} queries, {} tools, {} results per query, ranking: {}",
        r.queries, r.tools, r.limit, r.ranking
    );
    println!("R@1      {:.3}", m.recall_1);
    println!("R@3      {:.3}", m.recall_3);
    println!("R@5      {:.3}", m.recall_5);
    println!("R@10     {:.3}", m.recall_10);
    println!("MRR      {:.3}", m.mrr);
    println!("nDCG@10  {:.3}", m.ndcg_10);
    let c = &r.confidence;
    println!(
        "confident on {:.1}% of queries (R@1 {:.3}); not confident R@1 {:.3}",
        c.share * 100.0,
        c.recall_1_confident,
        c.recall_1_not_confident
    );
    println!(
        "without their gold tools still confident on {:.1}% (noise passed as an answer, roughly)",
        c.held_out_share * 100.0
    );
    for (what, buckets) in [
        ("coverage", &r.by_coverage),
        ("similarity", &r.by_similarity),
    ] {
        for b in buckets {
            println!(
                "  best-hit {what} {:8}: {:5.1}% of queries, R@1 {:.3}",
                b.range,
                b.share * 100.0,
                b.recall_1
            );
        }
    }
    let l = &r.latency_ms;
    println!(
        "latency per query: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        l.p50, l.p99, l.max
    );
    Ok(())
}

/// Every set's report: as a JSON array, or one table row per set.
#[allow(clippy::print_stdout)]
pub(super) fn print_sets(reports: &[Report], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(reports)?);
        return Ok(());
    }
    println!(
        "| set | queries | tools | ranking | R@1 | R@3 | R@5 | R@10 | MRR | nDCG@10 | confident | p50 / p99 ms |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in reports {
        let m = &r.metrics;
        println!(
            "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1}% | {:.2} / {:.2} |",
            r.set,
            r.queries,
            r.tools,
            r.ranking,
            m.recall_1,
            m.recall_3,
            m.recall_5,
            m.recall_10,
            m.mrr,
            m.ndcg_10,
            r.confidence.share * 100.0,
            r.latency_ms.p50,
            r.latency_ms.p99
        );
    }
    Ok(())
}

/// Warns on stderr about gold items (`file:line: qualified name`) not in the catalog: they
/// count as misses.
#[allow(clippy::print_stderr)]
pub(super) fn report_unknown(unknown: &[String]) {
    const SHOWN: usize = 5;
    if unknown.is_empty() {
        return;
    }
    eprintln!(
        "warning: {} gold items name tools not in the catalog and count as misses:",
        unknown.len()
    );
    for item in unknown.iter().take(SHOWN) {
        eprintln!("  {item}");
    }
    if unknown.len() > SHOWN {
        eprintln!("  ... and {} more", unknown.len() - SHOWN);
    }
}

/// Coverage buckets of the report: (lower bound, label).
pub(super) const COVERAGES: [(f32, &str); 6] = [
    (0.0, "0-0.1"),
    (0.1, "0.1-0.2"),
    (0.2, "0.2-0.3"),
    (0.3, "0.3-0.4"),
    (0.4, "0.4-0.5"),
    (0.5, "0.5-1"),
];

/// Best-hit cosines (lower bound, label) for `eval`'s similarity buckets.
pub(super) const SIMILARITIES: [(f32, &str); 6] = [
    (f32::NEG_INFINITY, "<0.3"),
    (0.3, "0.3-0.4"),
    (0.4, "0.4-0.5"),
    (0.5, "0.5-0.6"),
    (0.6, "0.6-0.7"),
    (0.7, "0.7-1"),
];

/// Mean scores of queries grouped by a value of their best hit.
pub(super) struct Buckets {
    pub(super) bounds: &'static [(f32, &'static str)],
    pub(super) means: Vec<Mean>,
}

impl Buckets {
    pub(super) fn new(bounds: &'static [(f32, &'static str)]) -> Self {
        Self {
            bounds,
            means: vec![Mean::default(); bounds.len()],
        }
    }

    pub(super) fn add(&mut self, value: f32, scores: Scores) {
        let i = self.bounds.iter().rposition(|&(from, _)| value >= from);
        self.means[i.unwrap_or(0)].add(scores);
    }

    /// One bucket per range, as shares of `total` queries; none if nothing was added.
    pub(super) fn report(&self, total: usize) -> Vec<Bucket> {
        if self.means.iter().all(|m| m.count == 0) {
            return Vec::new();
        }
        self.bounds
            .iter()
            .zip(&self.means)
            .map(|(&(_, range), m)| Bucket {
                range: range.to_owned(),
                share: m.count as f64 / total.max(1) as f64,
                recall_1: m.get().recall_1,
            })
            .collect()
    }
}

pub(super) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

pub(super) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
