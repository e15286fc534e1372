//! `meta-server measure`: what the configured servers' tool definitions cost in context,
//! against the meta surface that replaces them. Reads catalogs only.

use std::process::ExitCode;

use serde::Serialize;
use serde_json::json;

use crate::budget::{O200k, TokenCounter};
use crate::catalog::Failure;
use crate::config::Settings;
use crate::server::{definitions, load_library, overview};

/// Count the prompt tokens of every server's tool definitions (from the catalogs, starting
/// nothing) with the o200k_base tokenizer, and compare them with meta-server's three tools.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

const CONTEXTS: [usize; 2] = [128_000, 200_000];

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    server: String,
    tools: usize,
    tokens: usize,
    share_of_128k: f64,
    share_of_200k: f64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    tokenizer: &'static str,
    servers: Vec<Row>,
    missing: Vec<String>,
    total_tools: usize,
    total_tokens: usize,
    /// Tokens of meta-server's surface: `tools/list` and the `initialize` instructions.
    meta_tokens: usize,
    /// Its characters.
    meta_chars: usize,
    saving_percent: f64,
}

fn share(tokens: usize, context: usize) -> f64 {
    (tokens as f64 / context as f64 * 10_000.0).round() / 100.0
}

#[allow(clippy::print_stdout)]
pub fn run(settings: Settings, args: Args) -> anyhow::Result<ExitCode> {
    let (library, load) = load_library(&settings)?;
    let counter = O200k;
    let servers: Vec<Row> = library
        .catalogs
        .values()
        .map(|catalog| {
            // What a client puts in its prompt: the tools/list result as the server sent it.
            let tokens = counter.count(&json!({"tools": catalog.tools}).to_string());
            Row {
                server: catalog.server.clone(),
                tools: catalog.tools.len(),
                tokens,
                share_of_128k: share(tokens, CONTEXTS[0]),
                share_of_200k: share(tokens, CONTEXTS[1]),
            }
        })
        .collect();
    let total_tokens: usize = servers.iter().map(|r| r.tokens).sum();
    // The surface a client loads before its first turn: tools/list and the instructions.
    let tools = json!({"tools": definitions()}).to_string();
    let instructions = overview(&settings, &library);
    let meta_tokens = counter.count(&tools) + counter.count(&instructions);
    let meta_chars = tools.chars().count() + instructions.chars().count();
    let report = Report {
        tokenizer: counter.name(),
        total_tools: servers.iter().map(|r| r.tools).sum(),
        saving_percent: if total_tokens == 0 {
            0.0
        } else {
            ((1.0 - meta_tokens as f64 / total_tokens as f64) * 1000.0).round() / 10.0
        },
        servers,
        missing: load.missing,
        total_tokens,
        meta_tokens,
        meta_chars,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let width = report
        .servers
        .iter()
        .map(|r| r.server.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!(
        "{:width$}  {:>5}  {:>7}  {:>8}  {:>8}",
        "server", "tools", "tokens", "of 128k", "of 200k"
    );
    for r in &report.servers {
        println!(
            "{:width$}  {:>5}  {:>7}  {:>7.2}%  {:>7.2}%",
            r.server, r.tools, r.tokens, r.share_of_128k, r.share_of_200k
        );
    }
    println!(
        "{:width$}  {:>5}  {:>7}  {:>7.2}%  {:>7.2}%",
        "total",
        report.total_tools,
        report.total_tokens,
        share(report.total_tokens, CONTEXTS[0]),
        share(report.total_tokens, CONTEXTS[1])
    );
    println!(
        "meta-server shows 3 tools and its instructions in {} tokens ({} characters) instead: {}% saved ({} tokenizer)",
        report.meta_tokens, report.meta_chars, report.saving_percent, report.tokenizer
    );
    if !report.missing.is_empty() {
        println!(
            "not counted, no catalog: {}",
            super::terminal::escape(&Failure::notes(&settings.catalog_dir, &report.missing))
        );
    }
    Ok(ExitCode::SUCCESS)
}
