//! `meta-server index`: connect each server, list its tools, write its catalog, disconnect;
//! then save the search index of all catalogs beside them.

use crate::clock::Instant;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::bail;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::terminal;
use crate::catalog::{self, Catalog};
use crate::config::{ServerConfig, Settings};
use crate::upstream::{Manager, UpstreamError};

/// Build catalogs: connect each configured server, page through tools/list, write
/// <catalog-dir>/<server>.json atomically, then stop the server.
///
/// Then the search index of all catalogs is saved in <catalog-dir>/.index, which `serve`
/// starts from.
///
/// Servers are indexed a few at a time (metaServer.indexConcurrency, default 4), each within its
/// timeoutSecs. One failing server does not stop the others. Exit code: 0 when all succeeded,
/// 2 when some failed.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Index only this server (repeatable). Default: every enabled server.
    #[arg(long = "server", value_name = "NAME")]
    servers: Vec<String>,

    /// Only servers whose catalog is missing, unreadable, made from a different launch
    /// config (its configFingerprint no longer matches), or older than the ttlMs its server
    /// gave the tool list.
    #[arg(long)]
    stale: bool,

    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,

    /// Connect no server: only save the search index (and, with embeddings, the tool vectors)
    /// of the catalogs already in the catalog dir.
    #[arg(long, conflicts_with_all = ["servers", "stale"])]
    offline: bool,
}

/// One server's indexing, as `index --json` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Outcome {
    pub server: String,
    pub ok: bool,
    pub tools: usize,
    pub millis: u128,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The server asked for a login (`meta-server auth login <server>`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub needs_login: bool,
    /// Tools quarantined by this listing (qualified names), waiting for `tools approve`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<String>,
}

pub async fn run(settings: Settings, args: Args) -> anyhow::Result<ExitCode> {
    if args.offline {
        index_catalogs(&settings)?;
        return Ok(ExitCode::SUCCESS);
    }
    let chosen: Vec<&ServerConfig> = if args.servers.is_empty() {
        settings.servers.iter().collect()
    } else {
        let mut chosen = Vec::new();
        for name in &args.servers {
            match settings
                .servers
                .iter()
                .find(|s| &s.name == name || &s.key == name)
            {
                Some(s) => chosen.push(s),
                None => bail!(
                    "no server \"{name}\" in {}; configured: {}",
                    settings.source.display(),
                    names(&settings)
                ),
            }
        }
        chosen
    };
    if settings.servers.is_empty() {
        bail!(
            "{} configures no enabled servers",
            settings.source.display()
        );
    }
    let chosen: Vec<&ServerConfig> = if args.stale {
        chosen
            .into_iter()
            .filter(|s| is_stale(&settings, s))
            .collect()
    } else {
        chosen
    };
    if chosen.is_empty() {
        report(&[], &settings, args.json)?;
        index_catalogs(&settings)?;
        return Ok(ExitCode::SUCCESS);
    }
    let manager = Manager::new(&settings.servers);
    // A server listed before is not probed again for its revision.
    for server in &chosen {
        if let Ok(Some(catalog)) = Catalog::load_server(&settings.catalog_dir, &server.name)
            && let Some(revision) = catalog.known_revision(server)
        {
            manager.remember_revision(&server.name, revision);
        }
    }
    let bar = progress(chosen.len(), args.json);
    // Approvals are shared through the store when there is one (`trust::shared`).
    let store = match &settings.store {
        Some(store) => Some(crate::store::Valkey::open(&store.url)?),
        None => None,
    };
    let mut outcomes: Vec<Outcome> = futures::stream::iter(chosen)
        .map(|server| {
            let (manager, bar, store) = (manager.clone(), bar.clone(), store.clone());
            let settings = &settings;
            async move {
                let outcome = index_server(settings, &manager, store.as_ref(), server).await;
                bar.inc(1);
                bar.set_message(server.name.clone());
                outcome
            }
        })
        .buffer_unordered(settings.index_concurrency)
        .collect()
        .await;
    bar.finish_and_clear();
    manager.shutdown().await;
    outcomes.sort_by(|a, b| a.server.cmp(&b.server));
    report(&outcomes, &settings, args.json)?;
    if let Err(e) = index_catalogs(&settings) {
        eprintln!("warning: {e:#}; `serve` builds the search index at start instead");
    }
    let failed = outcomes.iter().filter(|o| !o.ok).count();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// Lists `server` through `manager`, records it with pinning (approvals shared through `store`
/// when given), writes its catalog (or its failure) and stops it.
pub(super) async fn index_server(
    settings: &Settings,
    manager: &Manager,
    store: Option<&crate::store::Valkey>,
    server: &ServerConfig,
) -> Outcome {
    let dir = &settings.catalog_dir;
    let started = Instant::now();
    let mut quarantined = Vec::new();
    let mut needs_login = false;
    let result = match catalog::fetch(manager, server).await {
        Ok(catalog) => {
            match crate::trust::shared::observe(settings.trust, dir, store, &catalog).await {
                Ok(held) => quarantined = held,
                Err(e) => eprintln!("warning: {e}"),
            }
            catalog
                .write(dir)
                .map(|path| (catalog.tools.len(), path))
                .map_err(|e| e.to_string())
        }
        Err(e) => {
            needs_login = matches!(e, UpstreamError::NeedsLogin { .. });
            Err(e.to_string())
        }
    };
    if let Err(reason) = &result {
        catalog::Failure::record(dir, &server.name, reason, needs_login);
    }
    manager.disconnect(&server.name).await;
    let millis = started.elapsed().as_millis();
    let (ok, tools, catalog, error) = match result {
        Ok((tools, path)) => (true, tools, Some(path.display().to_string()), None),
        Err(error) => (false, 0, None, Some(error)),
    };
    Outcome {
        server: server.name.clone(),
        ok,
        tools,
        millis,
        catalog,
        error,
        needs_login,
        quarantined,
    }
}

/// Saves the search index of the catalogs now on disk in `<catalog-dir>/.index`, so `serve`
/// starts without analysing every tool again, and in a build with embeddings, with them on
/// and the assets there, computes their tool vectors into `<catalog-dir>/.tool-vectors`
/// (unchanged texts are kept, a text shared by several tools embedded once), so `serve` is hybrid from its first search. Vectors that cannot
/// be computed are reported, never fatal: search falls back to BM25.
pub(super) fn index_catalogs(settings: &Settings) -> anyhow::Result<()> {
    let started = Instant::now();
    let (library, report) = crate::server::load_library(settings)?;
    for warning in &report.warnings {
        eprintln!("warning: {}", terminal::escape(warning));
    }
    library.save_index(&settings.catalog_dir)?;
    eprintln!(
        "search index: {} tools in {} ({:.1}s)",
        library.index.len(),
        crate::library::index_dir(&settings.catalog_dir).display(),
        started.elapsed().as_secs_f64()
    );
    let Some(embedder) = crate::library::embedder(settings) else {
        return Ok(());
    };
    let started = Instant::now();
    match library.embed(embedder, Some(&settings.catalog_dir)) {
        Ok(stats) => eprintln!(
            "tool vectors: {} tools, {} embedded now ({:.1}s)",
            stats.tools,
            stats.embedded,
            started.elapsed().as_secs_f64()
        ),
        Err(e) => eprintln!(
            "tool vectors not computed, search stays BM25 until they are: {}",
            terminal::escape(&e.to_string())
        ),
    }
    Ok(())
}

/// Missing, unreadable, listed under another launch config, or past its `ttlMs`.
fn is_stale(settings: &Settings, server: &ServerConfig) -> bool {
    match Catalog::load_server(&settings.catalog_dir, &server.name) {
        Ok(Some(catalog)) => catalog.is_stale(server, SystemTime::now()),
        Ok(None) | Err(_) => true,
    }
}

fn names(settings: &Settings) -> String {
    settings
        .servers
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn progress(len: usize, json: bool) -> ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64).with_style(
        ProgressStyle::with_template("{spinner} indexing [{bar:30}] {pos}/{len} {msg}")
            .expect("progress template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

#[allow(clippy::print_stdout)]
fn report(outcomes: &[Outcome], settings: &Settings, json: bool) -> anyhow::Result<()> {
    if json {
        println!(
            "{}",
            terminal::escape_json(&serde_json::to_string_pretty(outcomes)?)
        );
        return Ok(());
    }
    let width = outcomes
        .iter()
        .map(|o| o.server.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!("{:width$}  {:>5}  {:>7}  result", "server", "tools", "time");
    for o in outcomes {
        let time = format!("{:.1}s", o.millis as f64 / 1000.0);
        let result = terminal::escape(o.error.as_deref().unwrap_or("ok"));
        println!("{:width$}  {:>5}  {:>7}  {result}", o.server, o.tools, time);
    }
    let ok = outcomes.iter().filter(|o| o.ok).count();
    let tools: usize = outcomes.iter().map(|o| o.tools).sum();
    println!(
        "{ok}/{} servers indexed, {tools} tools, catalogs in {}",
        outcomes.len(),
        settings.catalog_dir.display()
    );
    let quarantined: Vec<String> = outcomes
        .iter()
        .flat_map(|o| o.quarantined.iter().cloned())
        .collect();
    if !quarantined.is_empty() {
        println!("{}", terminal::escape(&crate::trust::notice(&quarantined)));
    }
    Ok(())
}
