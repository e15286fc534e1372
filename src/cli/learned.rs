//! `meta-server learned`: what search learned from use, and forgetting it.

use std::process::ExitCode;

use anyhow::bail;
use clap::Subcommand;
use serde::Serialize;

use super::terminal::{escape, escape_json};
use crate::config::Settings;
use crate::learning::{self, Evidence, MAX_AGE, MAX_PER_TOOL, PRINCIPAL_PER_TOOL};
use crate::library::SEPARATOR;
use crate::store::Valkey;

/// Show or forget what search learned from use (metaServer.learning).
///
/// When a search is followed in the same session by a successful call of a tool it showed (or,
/// weighing half, by reading its details), meta-server keeps the query, as typed, as evidence
/// for that tool, and later searches find the tool by it. It is kept beside the catalogs
/// (<catalog-dir>/.learned/, owner-only) and, with a shared store (metaServer.store), there for
/// every replica; at most 24 queries per tool, 8 of them from one principal, forgotten after
/// 180 days without use, when the tool changes or its server is removed. The model never sees
/// it. "metaServer": {"learning": false} turns learning off; docs/learning.md says more.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: LearnedCommand,
}

#[derive(Subcommand, Debug)]
enum LearnedCommand {
    List(ListArgs),
    Forget(ForgetArgs),
}

/// List the queries kept, per tool, with how often and when they were used.
#[derive(clap::Args, Debug)]
struct ListArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Forget what was learned: everything, one server's tools, or one tool. A running serve
/// stops using it within seconds.
#[derive(clap::Args, Debug)]
struct ForgetArgs {
    /// `<server>` for all its tools, `<server>__<tool>` for one tool; nothing: everything.
    name: Option<String>,
}

/// One tool in `learned list --json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    tool: String,
    queries: Vec<ListedQuery>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListedQuery {
    query: String,
    /// Calls count 1, details reads 0.5; a query is searched from 1.
    score: f32,
    sessions: usize,
    principals: usize,
    last_used: String,
}

pub async fn run(settings: Settings, args: Args) -> anyhow::Result<ExitCode> {
    let store = match &settings.store {
        Some(store) => Some(Valkey::open(&store.url)?),
        None => None,
    };
    match args.command {
        LearnedCommand::List(args) => list(&settings, store.as_ref(), args).await,
        LearnedCommand::Forget(args) => forget(&settings, store.as_ref(), args).await,
    }
}

/// The evidence kept: the shared store's when there is one (the local copy, said so, when it
/// does not answer), else the catalog dir's.
async fn kept(settings: &Settings, store: Option<&Valkey>) -> anyhow::Result<Evidence> {
    if let Some(store) = store {
        match store.learned().await {
            Ok(evidence) => return Ok(evidence),
            Err(e) => eprintln!(
                "warning: {e}; showing what was last copied into {}",
                settings.catalog_dir.display()
            ),
        }
    }
    Ok(Evidence::load(&settings.catalog_dir)?)
}

#[allow(clippy::print_stdout)]
async fn list(
    settings: &Settings,
    store: Option<&Valkey>,
    args: ListArgs,
) -> anyhow::Result<ExitCode> {
    let evidence = kept(settings, store).await?;
    let listed: Vec<Listed> = evidence
        .tools
        .iter()
        .map(|(tool, held)| {
            let mut queries: Vec<ListedQuery> = held
                .queries
                .iter()
                .map(|q| ListedQuery {
                    query: q.text.clone(),
                    score: q.score(),
                    sessions: q.contributions.len(),
                    principals: q.principals(),
                    last_used: humantime::format_rfc3339_seconds(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs(q.last()),
                    )
                    .to_string(),
                })
                .collect();
            queries.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.query.cmp(&b.query)));
            Listed {
                tool: tool.clone(),
                queries,
            }
        })
        .collect();
    if args.json {
        println!("{}", escape_json(&serde_json::to_string_pretty(&listed)?));
        return Ok(ExitCode::SUCCESS);
    }
    if !settings.learning {
        println!("learning is off (metaServer.learning: false): search uses none of this");
    }
    if listed.is_empty() {
        println!("nothing learned yet");
        return Ok(ExitCode::SUCCESS);
    }
    for tool in &listed {
        println!("{}", escape(&tool.tool));
        for q in &tool.queries {
            println!(
                "  \"{}\"  score {}, {} sessions, {} principals, last used {}",
                escape(&q.query),
                q.score,
                q.sessions,
                q.principals,
                q.last_used
            );
        }
    }
    let days = MAX_AGE.as_secs() / 86_400;
    println!(
        "{} queries for {} tools (at most {MAX_PER_TOOL} per tool, {PRINCIPAL_PER_TOOL} from one principal; kept {days} days after last use)",
        evidence.len(),
        listed.len()
    );
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::print_stdout)]
async fn forget(
    settings: &Settings,
    store: Option<&Valkey>,
    args: ForgetArgs,
) -> anyhow::Result<ExitCode> {
    let what = args.name.as_deref();
    if let Some(name) = what
        && name.trim().is_empty()
    {
        bail!("name a server or <server>__<tool>, or nothing to forget everything");
    }
    let mut forgotten = 0;
    if let Some(store) = store {
        forgotten = store.forget_learned(what).await.map_err(|e| {
            anyhow::anyhow!("{e}; nothing was forgotten (the replicas would keep it)")
        })?;
    }
    let lock = learning::lock(&settings.catalog_dir);
    let mut evidence = Evidence::load(&settings.catalog_dir)?;
    forgotten = forgotten.max(evidence.forget(what));
    evidence.save(&settings.catalog_dir)?;
    drop(lock);
    let scope = match what {
        None => "everything".to_owned(),
        Some(name) if name.contains(SEPARATOR) => format!("tool {name}"),
        Some(server) => format!("the tools of {server}"),
    };
    println!(
        "forgot {forgotten} learned queries ({}) in {}",
        escape(&scope),
        learning::path(&settings.catalog_dir).display()
    );
    Ok(ExitCode::SUCCESS)
}
