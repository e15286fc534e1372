//! `meta-server eval`: search quality on a query set with known answers.

use crate::clock::Instant;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};

use crate::catalog::Catalog;
use crate::config::{ServerConfig, Settings, default_catalog_dir};
use crate::library::Library;
use crate::search::embed::{EmbedError, Embedder};
use crate::search::metrics::{self, Mean};
use crate::search::{self, SearchOptions};

mod input;
mod replay;
mod report;

use input::{Part, Query, catalogs_from_dir, catalogs_from_jsonl, read_queries};
use report::{
    Buckets, COVERAGES, Confidence, Latency, Report, SIMILARITIES, millis, percentile, print,
    print_sets, report_unknown,
};

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

    /// Measure search that learns from use: split each set's queries by a hash seeded with
    /// SEED (default 1) into a training and a test half, replay the training half as searches
    /// (10 results) followed by calls of the gold tools each search showed, through the
    /// learning the server does, keep what was learned on disk and read it back as a restart
    /// does, then score the test half without and with it (two rows per set).
    #[arg(long, value_name = "SEED", num_args = 0..=1, default_missing_value = "1")]
    replay: Option<u64>,

    /// Print the results as JSON.
    #[arg(long)]
    json: bool,

    /// Also write every query's ranking to FILE, one JSON line per query: {"set", "line",
    /// "query", "gold", "ranked", "recall@3"}, to read the misses.
    #[arg(long, value_name = "FILE")]
    ranked: Option<PathBuf>,
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
            let measured = measure(
                &name,
                &queries,
                catalogs,
                store.as_deref(),
                &options,
                &embedder,
                &args,
            )
            .with_context(|| format!("set {name}"))?;
            reports.extend(measured);
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
    let mut reports = measure(&name, queries, catalogs, store, &options, &embedder, &args)?;
    match reports.len() {
        1 => print(&reports.remove(0), args.json)?,
        _ => print_sets(&reports, args.json)?,
    }
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
/// `embedder` is there (tool vectors kept in `store` when given); with `--replay`, its test
/// half before and after the training half taught search (`replay.rs`).
fn measure(
    name: &str,
    queries_path: &Path,
    catalogs: BTreeMap<String, Catalog>,
    store: Option<&Path>,
    options: &SearchOptions,
    embedder: &Option<Arc<Embedder>>,
    args: &Args,
) -> anyhow::Result<Vec<Report>> {
    let servers: Vec<ServerConfig> = catalogs
        .keys()
        .map(|s| ServerConfig::catalog_only(s))
        .collect();
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
    let set = Set {
        name,
        path: queries_path,
        tools: catalogs.values().map(|c| c.tools.len()).sum(),
    };
    // With meta-server's own tools, as search_tools searches them.
    let builtin = Some(crate::server::builtin_catalog().clone());
    if let Some(seed) = args.replay {
        let built = replay::Built {
            servers: &servers,
            catalogs,
            builtin,
            options,
            embedder,
            store,
        };
        return replay::run(&set, queries, built, seed, args);
    }
    let library = Library::build_with(&servers, catalogs, builtin, Vec::new(), options.clone())?;
    if let Some(embedder) = embedder {
        embed_tools(&library, embedder.clone(), store);
    }
    Ok(vec![score(&set, &queries, &library, args)?])
}

/// A query set being measured: its name, file and number of tools.
struct Set<'a> {
    name: &'a str,
    path: &'a Path,
    tools: usize,
}

/// Scores `queries` of `set` over `library`.
fn score(set: &Set, queries: &[Query], library: &Library, args: &Args) -> anyhow::Result<Report> {
    let (name, queries_path, tools) = (set.name, set.path, set.tools);
    let limit = usize::from(args.limit);
    let (mut all, mut sure, mut unsure) = (Mean::default(), Mean::default(), Mean::default());
    let mut times = Vec::with_capacity(queries.len());
    let mut by_coverage = Buckets::new(&COVERAGES);
    let mut by_similarity = Buckets::new(&SIMILARITIES);
    let mut unknown_gold = Vec::new();
    let mut rankings = String::new();
    for Query {
        line, text, gold, ..
    } in queries
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
    for Query { text, gold, .. } in queries {
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
