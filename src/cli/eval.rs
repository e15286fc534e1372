//! `meta-server eval`: search quality on a query set with known answers.

use crate::clock::Instant;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::Catalog;
use crate::config::{ServerConfig, Settings, default_catalog_dir, server_identifier};
use crate::library::{Library, qualified_name};
use crate::search::embed::{EmbedError, Embedder};
use crate::search::metrics::{self, Mean, Scores};
use crate::search::{self, SearchOptions};

/// Measure search quality: run every query of a query file through the search that
/// search_tools uses and print Recall@1/3/5/10, MRR and nDCG@10.
///
/// Without --queries, every evaluation set in --sets is measured and shown side by side: each
/// NAME.queries.jsonl with its tools in NAME.catalog.jsonl (BASE.catalog.jsonl for a set named
/// BASE.VARIANT without a catalog of its own: other queries over the same tools). Query file:
/// JSON lines {"id", "query", "gold": [{"server", "name", "alt"?: [{"server", "name"}]}]}; a
/// gold item counts as found when it or one of its alts is retrieved. With --queries, tools come from --tools (JSON
/// lines, one MCP tool per line plus its "server") or from the catalogs in --catalog-dir. No
/// config file is needed. A set may keep part of its queries aside in NAME.heldout.jsonl, measured
/// only with --held-out (final checks, never tuning).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queries with their gold tools (JSON lines). Default: every set in --sets.
    #[arg(long, value_name = "FILE")]
    queries: Option<PathBuf>,

    /// Directory of evaluation sets, measured when --queries is not given.
    #[arg(long, value_name = "DIR", default_value = "evaldata")]
    sets: PathBuf,

    /// Only this set of --sets (repeatable), e.g. --set azure.
    #[arg(long = "set", value_name = "NAME", conflicts_with = "queries")]
    only: Vec<String>,

    /// Measure the held-out part (NAME.heldout.jsonl) of the sets that have one, instead of
    /// their development queries: for a final check, not for tuning.
    #[arg(long, conflicts_with = "queries")]
    held_out: bool,

    /// Only one part of each query file, split by a stable hash of each query's id: `fit`
    /// (about two thirds) to fit ranking parameters on, `check` (the rest) to check them on.
    #[arg(long, value_enum)]
    part: Option<Part>,

    /// Keep the vectors of JSON-lines tools in DIR between runs (one sub-directory per tools
    /// file), so only tools whose text or model changed are embedded again.
    #[arg(long, value_name = "DIR")]
    vector_cache: Option<PathBuf>,

    /// Score every Nth query only (1: all), for quick comparisons on big sets.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    every: u32,

    /// Tools as JSON lines: {"server", "name", "description", "inputSchema", ...}. Default: the
    /// catalogs in --catalog-dir.
    #[arg(long, value_name = "FILE.jsonl")]
    tools: Option<PathBuf>,

    /// Results retrieved per query (10-50: the metrics go down to rank 10).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(10..=50))]
    limit: u16,

    /// Change a ranking option to measure its effect, e.g. stopwords=lucene, combine=sum,
    /// coverage=0 (repeatable). Default: exactly what search_tools uses.
    #[arg(long = "option", value_name = "KEY=VALUE")]
    options: Vec<String>,

    /// Measure the baseline instead: untuned BM25 over name and description only (no stop
    /// words, stemming, synonyms, boosts, name matching or vectors); --option applies on top.
    #[arg(long)]
    baseline: bool,

    /// Directory of the embedding runtime and model (scripts/fetch-embed-assets; default:
    /// meta-server's own, ~/.local/share/meta-server/embed). Builds with the `embeddings`
    /// feature search hybrid when it holds them; --option embeddings=false measures BM25 alone.
    #[arg(long, value_name = "DIR", env = "META_SERVER_EMBED_DIR")]
    embed_dir: Option<PathBuf>,

    /// Print the results as JSON.
    #[arg(long)]
    json: bool,

    /// Also write every query's ranking to FILE, one JSON line per query: {"set", "line",
    /// "query", "gold", "ranked", "recall@3"}, to read the misses.
    #[arg(long, value_name = "FILE")]
    ranked: Option<PathBuf>,
}

/// A part of a query file for [`Args::part`].
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
enum Part {
    Fit,
    Check,
}

impl Part {
    /// The part a query belongs to: `check` when the first byte of the SHA-256 of its id (its
    /// text if it has none) is a multiple of 3.
    fn of(id: &Value, query: &str) -> Self {
        use sha2::Digest;
        let id = match id {
            Value::Null => query.to_owned(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if sha2::Sha256::digest(id.as_bytes())[0] % 3 == 0 {
            Part::Check
        } else {
            Part::Fit
        }
    }
}

#[derive(Deserialize)]
struct QueryLine {
    #[serde(default)]
    id: Value,
    query: String,
    gold: Vec<GoldLine>,
}

#[derive(Deserialize)]
struct GoldLine {
    server: String,
    name: String,
    #[serde(default)]
    alt: Vec<GoldLine>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    /// The set's name (its file name without `.queries.jsonl`).
    set: String,
    queries: usize,
    /// The set's tools (meta-server's own are searched too, as by search_tools, not counted).
    tools: usize,
    limit: u16,
    /// `bm25`, or `hybrid` with the fusion used.
    ranking: String,
    /// Gold items whose tool is not in the catalog (they count as misses).
    unknown_gold: usize,
    metrics: Scores,
    /// How often search_tools would say `confident: true`, and how right it is then.
    confidence: Confidence,
    /// R@1 by the best hit's coverage (see `search::Hit::coverage`).
    by_coverage: Vec<Bucket>,
    /// R@1 by the best hit's cosine with the query (hybrid search only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    by_similarity: Vec<Bucket>,
    /// In-process time per query (the search alone, query embedding included), this build.
    latency_ms: Latency,
}

#[derive(Serialize)]
struct Confidence {
    share: f64,
    #[serde(rename = "recall@1Confident")]
    recall_1_confident: f64,
    #[serde(rename = "recall@1NotConfident")]
    recall_1_not_confident: f64,
    /// Share of queries still called confident when their gold tools are dropped from the
    /// ranking (as if the catalog lacked them): an estimate, on the high side, of how often
    /// noise is passed as an answer (another tool may answer too).
    #[serde(rename = "heldOutShare")]
    held_out_share: f64,
}

#[derive(Serialize)]
struct Bucket {
    range: String,
    share: f64,
    #[serde(rename = "recall@1")]
    recall_1: f64,
}

#[derive(Serialize)]
struct Latency {
    p50: f64,
    p99: f64,
    max: f64,
}

/// `config` is only read, if it exists, for its catalog directory when `--catalog-dir` is not
/// given and tools do not come from `--tools`.
pub fn run(args: Args, config: &Path, catalog_dir: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let mut options = if args.baseline {
        SearchOptions::plain_bm25()
    } else {
        SearchOptions::default()
    };
    for setting in &args.options {
        options.set(setting).map_err(anyhow::Error::msg)?;
    }
    // Like search_tools: META_SERVER_EMBEDDINGS=off means BM25 only.
    if crate::config::embeddings_from_env()? == Some(false) {
        options.embeddings = false;
    }
    let embedder = if options.embeddings {
        load_embedder(
            &args
                .embed_dir
                .clone()
                .unwrap_or_else(crate::config::default_embed_dir),
        )
    } else {
        None
    };
    if embedder.is_none() && args.options.iter().any(|o| o.starts_with("fusion=")) {
        eprintln!("note: this search is BM25 only, so the fusion option changes nothing");
    }
    if let Some(path) = &args.ranked {
        // Truncated once here; each measured set appends its lines.
        std::fs::write(path, "").with_context(|| format!("cannot write {}", path.display()))?;
    }
    let Some(queries) = &args.queries else {
        let mut reports = Vec::new();
        for (name, queries, tools) in sets(&args.sets, &args.only, args.held_out)? {
            let catalogs = catalogs_from_jsonl(&tools)?;
            let store = cache_dir(&args, &tools);
            let report = measure(
                &name,
                &queries,
                catalogs,
                store.as_deref(),
                &options,
                &embedder,
                &args,
            )
            .with_context(|| format!("set {name}"))?;
            reports.push(report);
        }
        print_sets(&reports, args.json)?;
        return Ok(ExitCode::SUCCESS);
    };
    let catalog_dir = match catalog_dir {
        Some(dir) => dir,
        None if args.tools.is_none() && config.exists() => {
            Settings::load(config, None)
                .with_context(|| {
                    format!(
                        "reading {} for its catalogDir (--catalog-dir or --tools skip it)",
                        config.display()
                    )
                })?
                .catalog_dir
        }
        None => default_catalog_dir(),
    };
    let catalogs = match &args.tools {
        Some(path) => catalogs_from_jsonl(path)?,
        None => catalogs_from_dir(&catalog_dir)?,
    };
    if catalogs.values().all(|c| c.tools.is_empty()) {
        match &args.tools {
            Some(path) => bail!("no tools to search in {}", path.display()),
            None => bail!(
                "no catalogs with tools in {}; run `meta-server index` first, or pass --tools FILE.jsonl",
                catalog_dir.display()
            ),
        }
    }
    // Vectors persist next to catalogs read from a directory; JSON-lines tools in
    // --vector-cache, else they are embedded on every run.
    let cache = args
        .tools
        .as_deref()
        .and_then(|tools| cache_dir(&args, tools));
    let store = match &args.tools {
        None => Some(catalog_dir.as_path()),
        Some(_) => cache.as_deref(),
    };
    let name = queries
        .file_name()
        .and_then(|n| n.to_str())
        .map_or("queries", |n| {
            n.trim_end_matches(".jsonl").trim_end_matches(".queries")
        })
        .to_owned();
    let report = measure(&name, queries, catalogs, store, &options, &embedder, &args)?;
    print(&report, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Where the vectors of the JSON-lines tools in `tools` are kept: a directory of
/// `--vector-cache` named after the file (sets sharing a catalog share it).
fn cache_dir(args: &Args, tools: &Path) -> Option<PathBuf> {
    let name = tools.file_name()?.to_str()?.trim_end_matches(".jsonl");
    Some(args.vector_cache.as_ref()?.join(name))
}

/// The sets in `dir` (name, queries file, tools file), sorted by name; only those named in
/// `only` if it is not empty. With `held_out`, only the sets with a NAME.heldout.jsonl, that
/// file as their queries and "NAME (held out)" as their name.
fn sets(
    dir: &Path,
    only: &[String],
    held_out: bool,
) -> anyhow::Result<Vec<(String, PathBuf, PathBuf)>> {
    let entries = std::fs::read_dir(dir).with_context(|| {
        format!(
            "cannot read the evaluation sets in {}; pass --sets DIR or --queries FILE",
            dir.display()
        )
    })?;
    let mut sets = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".queries.jsonl"))
        else {
            continue;
        };
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        let tools = dir.join(format!("{name}.catalog.jsonl"));
        let shared = name
            .rsplit_once('.')
            .map(|(base, _)| dir.join(format!("{base}.catalog.jsonl")));
        let tools = match shared {
            Some(shared) if !tools.exists() && shared.exists() => shared,
            _ if !tools.exists() => {
                bail!("{} has no tools file {}", path.display(), tools.display())
            }
            _ => tools,
        };
        if held_out {
            let aside = dir.join(format!("{name}.heldout.jsonl"));
            if aside.exists() {
                sets.push((format!("{name} (held out)"), aside, tools));
            }
            continue;
        }
        sets.push((name.to_owned(), path, tools));
    }
    sets.sort();
    let named = |o: &String, n: &String| n == o || n.strip_suffix(" (held out)") == Some(o);
    if let Some(missing) = only
        .iter()
        .find(|o| !sets.iter().any(|(n, ..)| named(o, n)))
    {
        bail!(
            "no set \"{missing}\" in {} (a set is NAME.queries.jsonl with NAME.catalog.jsonl)",
            dir.display()
        );
    }
    if sets.is_empty() {
        let what = if held_out { "heldout" } else { "queries" };
        bail!("no NAME.{what}.jsonl in {}", dir.display());
    }
    Ok(sets)
}

/// Scores the queries of `queries_path` (every `--every`th) over `catalogs`, hybrid when
/// `embedder` is there (tool vectors kept in `store` when given).
fn measure(
    name: &str,
    queries_path: &Path,
    catalogs: BTreeMap<String, Catalog>,
    store: Option<&Path>,
    options: &SearchOptions,
    embedder: &Option<Arc<Embedder>>,
    args: &Args,
) -> anyhow::Result<Report> {
    let servers: Vec<ServerConfig> = catalogs
        .keys()
        .map(|s| ServerConfig::catalog_only(s))
        .collect();
    let tools = catalogs.values().map(|c| c.tools.len()).sum();
    // With meta-server's own tools, as search_tools searches them.
    let builtin = Some(crate::server::builtin_catalog().clone());
    let library = Library::build_with(&servers, catalogs, builtin, Vec::new(), options.clone())?;
    if let Some(embedder) = embedder {
        embed_tools(&library, embedder.clone(), store);
    }
    let every = args.every as usize;
    let queries: Vec<Query> = read_queries(queries_path)?
        .into_iter()
        .filter(|q| args.part.is_none_or(|p| p == q.part))
        .enumerate()
        .filter(|(i, _)| (i + 1) % every == 0)
        .map(|(_, q)| q)
        .collect();
    if queries.is_empty() {
        bail!(
            "{} has fewer than --every {every} queries{}",
            queries_path.display(),
            if args.part.is_some() {
                " in this --part"
            } else {
                ""
            }
        );
    }
    let limit = usize::from(args.limit);
    let (mut all, mut sure, mut unsure) = (Mean::default(), Mean::default(), Mean::default());
    let mut times = Vec::with_capacity(queries.len());
    let mut by_coverage = Buckets::new(&COVERAGES);
    let mut by_similarity = Buckets::new(&SIMILARITIES);
    let mut unknown_gold = Vec::new();
    let mut rankings = String::new();
    for Query {
        line, text, gold, ..
    } in &queries
    {
        for keys in gold {
            if !keys.iter().any(|k| library.entries.contains_key(k)) {
                unknown_gold.push(format!("{}:{line}: {}", queries_path.display(), keys[0]));
            }
        }
        let started = Instant::now();
        let hits = library.search(text, limit, None)?;
        times.push(started.elapsed());
        let ranked: Vec<&str> = hits.iter().map(|h| h.key.as_str()).collect();
        let scores = metrics::score(&ranked, gold);
        if args.ranked.is_some() {
            let line = serde_json::json!({
                "set": name,
                "line": line,
                "query": text,
                "gold": gold.iter().map(|keys| &keys[0]).collect::<Vec<_>>(),
                "ranked": ranked,
                "recall@3": scores.recall_3,
            });
            rankings.push_str(&format!("{line}\n"));
        }
        all.add(scores);
        if let Some(best) = hits.first() {
            by_coverage.add(best.coverage, scores);
            if let Some(similarity) = best.similarity {
                by_similarity.add(similarity, scores);
            }
        }
        if search::confident(&hits) {
            sure.add(scores);
        } else {
            unsure.add(scores);
        }
    }
    // Each question again as if its gold tools did not exist: dropped from the ranking. A
    // separate pass, so the timed searches above run exactly as search_tools would.
    let mut held_out_confident = 0;
    for Query { text, gold, .. } in &queries {
        // At most 50, the longest list whose ranking agrees with every shorter one.
        let wider = (limit + gold.iter().map(Vec::len).sum::<usize>()).min(50);
        let rest: Vec<search::Hit> = library
            .search(text, wider, None)?
            .into_iter()
            .filter(|h| !gold.iter().flatten().any(|g| *g == h.key))
            .collect();
        if search::confident(&rest) {
            held_out_confident += 1;
        }
    }
    let gold_items: usize = queries.iter().map(|q| q.gold.len()).sum();
    if unknown_gold.len() == gold_items {
        bail!(
            "none of the gold tools is in the catalog ({} tools), so nothing can be scored; check \
             the server and tool names of the queries, e.g. {}",
            tools,
            unknown_gold[0]
        );
    }
    report_unknown(&unknown_gold);
    if let Some(path) = &args.ranked {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(rankings.as_bytes()))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    times.sort();
    Ok(Report {
        set: name.to_owned(),
        queries: queries.len(),
        tools,
        limit: args.limit,
        ranking: if library.is_hybrid() {
            let o = library.index.options();
            match o.context {
                Some(context) => format!("hybrid, {:?}, {context:?}", o.fusion),
                None => format!("hybrid, {:?}", o.fusion),
            }
        } else if args.baseline {
            "plain bm25 (baseline)".into()
        } else {
            "bm25".into()
        },
        unknown_gold: unknown_gold.len(),
        metrics: all.get(),
        confidence: Confidence {
            share: sure.count as f64 / all.count.max(1) as f64,
            recall_1_confident: sure.get().recall_1,
            recall_1_not_confident: unsure.get().recall_1,
            held_out_share: held_out_confident as f64 / all.count.max(1) as f64,
        },
        by_coverage: by_coverage.report(all.count),
        by_similarity: by_similarity.report(all.count),
        latency_ms: Latency {
            p50: millis(percentile(&times, 0.50)),
            p99: millis(percentile(&times, 0.99)),
            max: millis(times.last().copied().unwrap_or_default()),
        },
    })
}

#[allow(clippy::print_stdout)]
fn print(r: &Report, json: bool) -> anyhow::Result<()> {
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
fn print_sets(reports: &[Report], json: bool) -> anyhow::Result<()> {
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
fn report_unknown(unknown: &[String]) {
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

/// The embedding model in `dir`; on failure says why on stderr (BM25 only).
#[allow(clippy::print_stderr)]
fn load_embedder(dir: &Path) -> Option<Arc<Embedder>> {
    let started = Instant::now();
    match Embedder::load(dir) {
        Ok(embedder) => {
            eprintln!(
                "embedding model loaded in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            Some(Arc::new(embedder))
        }
        Err(EmbedError::NotBuilt) => None,
        Err(e) => {
            eprintln!("note: {e}; measuring BM25 only");
            None
        }
    }
}

/// Computes the tool vectors; on failure says why on stderr and leaves the library BM25 only.
#[allow(clippy::print_stderr)]
fn embed_tools(library: &Library, embedder: Arc<Embedder>, store: Option<&Path>) {
    let started = Instant::now();
    match library.embed(embedder, store) {
        Ok(stats) => eprintln!(
            "tool vectors: {} tools, {} embedded now, {:.1} s",
            stats.tools,
            stats.embedded,
            started.elapsed().as_secs_f64()
        ),
        Err(e) => eprintln!("note: {e}; measuring BM25 only"),
    }
}

/// One line of the query file.
struct Query {
    line: usize,
    part: Part,
    text: String,
    /// Gold items, each as its acceptable qualified names (the tool, then its alts).
    gold: Vec<Vec<String>>,
}

/// Reads the query file.
fn read_queries(path: &Path) -> anyhow::Result<Vec<Query>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read queries {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let q: QueryLine = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not a query line", path.display(), i + 1))?;
        let mut gold = Vec::with_capacity(q.gold.len());
        for g in &q.gold {
            let mut keys = vec![key(&g.server, &g.name)?];
            for alt in &g.alt {
                keys.push(key(&alt.server, &alt.name)?);
            }
            gold.push(keys);
        }
        if gold.is_empty() {
            bail!(
                "{}:{}: query {} has no gold tools",
                path.display(),
                i + 1,
                q.id
            );
        }
        out.push(Query {
            line: i + 1,
            part: Part::of(&q.id, &q.query),
            text: q.query,
            gold,
        });
    }
    if out.is_empty() {
        bail!("{} holds no queries", path.display());
    }
    Ok(out)
}

/// The qualified name search results use for (server, tool).
fn key(server: &str, name: &str) -> anyhow::Result<String> {
    Ok(qualified_name(&server_id(server)?, name))
}

fn server_id(server: &str) -> anyhow::Result<String> {
    server_identifier(server).map_err(|e| anyhow::anyhow!("server \"{server}\": {e}"))
}

/// Groups JSON-lines tools into one in-memory catalog per server.
fn catalogs_from_jsonl(path: &Path) -> anyhow::Result<BTreeMap<String, Catalog>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read tools {}", path.display()))?;
    let mut catalogs: BTreeMap<String, Catalog> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let mut tool: serde_json::Map<String, Value> =
            serde_json::from_str(line).with_context(|| format!("{}: not a JSON object", at()))?;
        let Some(Value::String(server)) = tool.remove("server") else {
            bail!("{}: a tool line needs a \"server\" string", at());
        };
        let server = server_id(&server).with_context(at)?;
        catalogs
            .entry(server.clone())
            .or_insert_with(|| Catalog::new(server, Vec::new()))
            .tools
            .push(Value::Object(tool).into());
    }
    Ok(catalogs)
}

/// Loads every `*.json` catalog in `dir`, keyed by the server it names.
fn catalogs_from_dir(dir: &Path) -> anyhow::Result<BTreeMap<String, Catalog>> {
    let entries = std::fs::read_dir(dir).with_context(|| {
        format!(
            "cannot read catalog dir {}; pass --tools FILE.jsonl or --catalog-dir DIR",
            dir.display()
        )
    })?;
    let mut catalogs = BTreeMap::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json")
            && let Some(catalog) = Catalog::load(&path)?
        {
            catalogs.insert(catalog.server.clone(), catalog);
        }
    }
    Ok(catalogs)
}

/// Coverage buckets of the report: (lower bound, label).
const COVERAGES: [(f32, &str); 6] = [
    (0.0, "0-0.1"),
    (0.1, "0.1-0.2"),
    (0.2, "0.2-0.3"),
    (0.3, "0.3-0.4"),
    (0.4, "0.4-0.5"),
    (0.5, "0.5-1"),
];

/// Best-hit cosines (lower bound, label) for `eval`'s similarity buckets.
const SIMILARITIES: [(f32, &str); 6] = [
    (f32::NEG_INFINITY, "<0.3"),
    (0.3, "0.3-0.4"),
    (0.4, "0.4-0.5"),
    (0.5, "0.5-0.6"),
    (0.6, "0.6-0.7"),
    (0.7, "0.7-1"),
];

/// Mean scores of queries grouped by a value of their best hit.
struct Buckets {
    bounds: &'static [(f32, &'static str)],
    means: Vec<Mean>,
}

impl Buckets {
    fn new(bounds: &'static [(f32, &'static str)]) -> Self {
        Self {
            bounds,
            means: vec![Mean::default(); bounds.len()],
        }
    }

    fn add(&mut self, value: f32, scores: Scores) {
        let i = self.bounds.iter().rposition(|&(from, _)| value >= from);
        self.means[i.unwrap_or(0)].add(scores);
    }

    /// One bucket per range, as shares of `total` queries; none if nothing was added.
    fn report(&self, total: usize) -> Vec<Bucket> {
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
