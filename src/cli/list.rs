//! `meta-server list`: every configured server and where it stands.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::status::{self, Listing, State, Status};
use super::terminal::{escape_json, escape_line};
use crate::config::Settings;

/// List the servers in meta-server's config and where each stands.
///
/// One line per server: its transport, its state (indexed, not indexed, failing, needs login,
/// disabled), its tool count, when its catalog was listed, the MCP revision it spoke and its
/// tools waiting for approval. A failing server's reason follows on the next line. Nothing is
/// started: this reads the config and the catalog dir.
///
/// --json prints the same as one JSON object, whose shape is documented in docs/servers.md.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print JSON for scripts (see docs/servers.md).
    #[arg(long)]
    json: bool,
}

#[allow(clippy::print_stdout)]
pub fn run(config: &Path, catalog_dir: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(config, catalog_dir)?;
    let servers = status::all(&settings, &status::config_text(config)?);
    if args.json {
        let listing = Listing {
            format: status::FORMAT,
            config: settings.source.clone(),
            catalog_dir: settings.catalog_dir.clone(),
            servers,
        };
        println!("{}", escape_json(&serde_json::to_string_pretty(&listing)?));
        return Ok(ExitCode::SUCCESS);
    }
    if servers.is_empty() {
        println!(
            "no servers in {}; add one with `meta-server add <name> <command-or-url>`",
            config.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", table(&servers));
    Ok(ExitCode::SUCCESS)
}

/// The text table: a header, one line per server, a failing server's reason under it.
fn table(servers: &[Status]) -> String {
    let rows: Vec<[String; 7]> = servers
        .iter()
        .map(|s| {
            [
                escape_line(&s.key).into_owned(),
                s.transport.unwrap_or("-").to_owned(),
                match (s.state, s.stale) {
                    (State::Indexed, true) => "indexed (stale)".to_owned(),
                    (state, _) => state.words().to_owned(),
                },
                s.tools.map_or("-".to_owned(), |n| n.to_string()),
                s.refreshed_at.clone().unwrap_or_else(|| "-".to_owned()),
                escape_line(s.revision.as_deref().unwrap_or("-")).into_owned(),
                match s.quarantined.len() {
                    0 => "-".to_owned(),
                    n => n.to_string(),
                },
            ]
        })
        .collect();
    let header = [
        "server",
        "transport",
        "state",
        "tools",
        "refreshed",
        "revision",
        "quarantined",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            let pad = w.saturating_sub(cell.chars().count());
            match i {
                0 => out.push_str(cell),
                // Counts align right.
                3 | 6 => out.push_str(&format!("  {}{cell}", " ".repeat(pad))),
                _ => out.push_str(&format!("  {cell}")),
            }
            if i == 0 || !(i == 3 || i == 6 || i == cells.len() - 1) {
                out.push_str(&" ".repeat(pad));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(&header);
    for (row, server) in rows.iter().zip(servers) {
        out.push_str(&line(&row.each_ref().map(String::as_str)));
        if let Some(reason) = &server.reason {
            out.push_str(&format!("  {}\n", escape_line(reason)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_aligns_and_puts_reasons_under_their_server() {
        let status = |key: &str, state, tools, reason: Option<&str>| Status {
            name: key.to_owned(),
            key: key.to_owned(),
            transport: Some("stdio"),
            target: None,
            state,
            reason: reason.map(str::to_owned),
            stale: false,
            tools,
            prompts: None,
            resources: None,
            refreshed_at: tools.map(|_| "2026-11-30T10:00:00Z".to_owned()),
            revision: tools.map(|_| "2025-11-25".to_owned()),
            quarantined: Vec::new(),
            always_load: false,
            catalog: None,
        };
        let out = table(&[
            status("memory", State::Indexed, Some(9), None),
            status(
                "x",
                State::Failing,
                None,
                Some("command \"x\" not found\nforged"),
            ),
        ]);
        assert_eq!(
            out,
            "server  transport  state    tools  refreshed             revision    quarantined\n\
             memory  stdio      indexed      9  2026-11-30T10:00:00Z  2025-11-25            -\n\
             x       stdio      failing      -  -                     -                     -\n  \
             command \"x\" not found\\nforged\n"
        );
    }
}
