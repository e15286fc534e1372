//! `meta-server search`: the same search as `search_tools`, from the catalogs, starting nothing.

use std::process::ExitCode;

use super::terminal::{escape, escape_json};
use crate::catalog::Failure;
use crate::config::Settings;
use crate::server::{Detail, SearchArgs, load_library, search_tools};

/// Search the catalogs the way search_tools does, without starting any server.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What the tool should do, or its name.
    query: String,

    /// Maximum number of results (1-50).
    #[arg(long, default_value_t = 8)]
    limit: usize,

    /// Only search this server's tools.
    #[arg(long)]
    server: Option<String>,

    /// How much of each hit to show: name, summary (description and signature) or full (the
    /// whole description and the input schema).
    #[arg(long, value_parser = ["name", "summary", "full"], default_value = "summary")]
    detail: String,

    /// Order hits server by server (servers by their best hit).
    #[arg(long)]
    group_by_server: bool,

    /// Print the structured result as JSON.
    #[arg(long)]
    json: bool,
}

#[allow(clippy::print_stdout)]
pub fn run(settings: Settings, args: Args) -> anyhow::Result<ExitCode> {
    let (library, report) = load_library(&settings)?;
    for warning in &report.warnings {
        eprintln!("warning: {}", escape(warning));
    }
    if !report.missing.is_empty() {
        eprintln!(
            "note: not searchable, no catalog: {}",
            escape(&Failure::notes(&settings.catalog_dir, &report.missing))
        );
    }
    if let Some(embedder) = crate::library::embedder(&settings)
        && let Err(e) = library.embed(embedder, Some(&settings.catalog_dir))
    {
        tracing::warn!("tool vectors not computed, BM25 only: {e}");
    }
    let request = SearchArgs {
        query: args.query,
        limit: args.limit,
        server: args.server,
        detail: args.detail.parse::<Detail>().map_err(anyhow::Error::msg)?,
        group_by_server: args.group_by_server,
    };
    let result = search_tools(&library, &settings, request);
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<String>();
    if result.is_error == Some(true) {
        anyhow::bail!("{}", escape(&text));
    }
    if args.json {
        let structured = result.structured_content.unwrap_or_default();
        println!(
            "{}",
            escape_json(&serde_json::to_string_pretty(&structured)?)
        );
    } else {
        print!("{}", escape(&text));
    }
    Ok(ExitCode::SUCCESS)
}
