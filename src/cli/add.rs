//! `meta-server add`: one server written into meta-server's config (as `claude mcp add` does for
//! Claude Code's), then indexed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use super::index::{Outcome, index_catalogs, index_server};
use super::terminal::escape;
use crate::catalog::Catalog;
use crate::clients::add_server;
use crate::config::{Settings, server_identifier};
use crate::upstream::{Manager, guardian};

/// Add a server to meta-server's config, then index it.
///
/// Writes the server into meta-server's config (creating the file if need be; comments and
/// every other byte of it are kept), then lists its tools, prompts and resources into its
/// catalog and says what it found: tools, a login it needs, tools quarantined. A running
/// `meta-server serve` picks the change up by itself.
///
/// A URL is a remote server (streamable HTTP unless --transport sse); anything else is the
/// command of a local one. Put `--` before the command's own flags, as in `meta-server add
/// memory -e MEMORY_FILE_PATH=/tmp/m.jsonl -- npx -y @modelcontextprotocol/server-memory`; a
/// remote server takes headers: `meta-server add docs https://example.com/mcp -H
/// 'Authorization: Bearer ${DOCS_TOKEN}'`.
///
/// A name the config has already is refused unless --force. Values may use ${VAR}, expanded
/// when the server starts. Exit code: 0 when the server was added (and indexed, or needs a
/// login), 2 when it was added but listing it failed, 1 when nothing was written.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// How meta-server reaches it: stdio (a command it starts), http (streamable HTTP) or sse
    /// (legacy HTTP+SSE). Default: http for a URL, stdio otherwise.
    #[arg(long, short = 't', value_name = "TRANSPORT", value_parser = ["stdio", "http", "sse"])]
    transport: Option<String>,

    /// An environment variable of a stdio server (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = parse_env)]
    env: Vec<(String, String)>,

    /// A header sent to a remote server (repeatable).
    #[arg(long = "header", short = 'H', value_name = "'Name: value'", value_parser = parse_header)]
    headers: Vec<(String, String)>,

    /// Replace a server of the same name.
    #[arg(long)]
    force: bool,

    /// Only write the config; the server is indexed later (by `index`, or by `serve`).
    #[arg(long)]
    no_index: bool,

    /// The server's name: its tools are called `<name>__<tool>`.
    #[arg(value_name = "NAME")]
    name: String,

    /// The command that starts it, or its URL.
    #[arg(value_name = "COMMAND-OR-URL")]
    target: String,

    /// The command's arguments.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    args: Vec<String>,
}

fn parse_env(value: &str) -> Result<(String, String), String> {
    match value.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got \"{value}\"")),
    }
}

fn parse_header(value: &str) -> Result<(String, String), String> {
    match value.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(format!("expected 'Name: value', got \"{value}\"")),
    }
}

/// The config entry the arguments describe.
fn entry(args: &Args) -> anyhow::Result<Value> {
    let url = args.target.starts_with("http://") || args.target.starts_with("https://");
    let transport = args
        .transport
        .as_deref()
        .unwrap_or(if url { "http" } else { "stdio" });
    let map = |pairs: &[(String, String)]| -> Map<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect()
    };
    if transport == "stdio" {
        if !args.headers.is_empty() {
            bail!("-H/--header is for remote servers; a stdio server takes -e KEY=VALUE");
        }
        let mut entry = json!({"command": args.target});
        if !args.args.is_empty() {
            entry["args"] = json!(args.args);
        }
        if !args.env.is_empty() {
            entry["env"] = Value::Object(map(&args.env));
        }
        return Ok(entry);
    }
    if !args.env.is_empty() {
        bail!("-e/--env is for stdio servers; a remote server takes -H 'Name: value'");
    }
    if !args.args.is_empty() {
        bail!(
            "a remote server takes no arguments after its URL (got {}); quote the URL if it has spaces",
            args.args.join(" ")
        );
    }
    let mut entry = json!({"type": transport, "url": args.target});
    if !args.headers.is_empty() {
        entry["headers"] = Value::Object(map(&args.headers));
    }
    Ok(entry)
}

/// Writes the entry, listing the server first (unless `--no-index`) so that a running `serve`
/// finds its catalog beside the config when it reads the new config.
#[allow(clippy::print_stdout)]
pub fn run(config: &Path, catalog_dir: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let entry = entry(&args)?;
    let before = crate::clients::read_text(config)?;
    let edit = add_server(config, before.as_deref(), &args.name, &entry, args.force)?;
    let indexed = match args.no_index {
        true => None,
        false => Some(index(config, &edit.after, catalog_dir, &args.name)?),
    };
    // The file may have changed while the server was listed: the entry goes into what it is now.
    let now = crate::clients::read_text(config)?;
    let edit = match now == before {
        true => edit,
        false => add_server(config, now.as_deref(), &args.name, &entry, args.force)?,
    };
    crate::clients::write_atomic(config, edit.after.as_bytes())?;
    let verb = if edit.previous.is_some() {
        "replaced"
    } else {
        "added"
    };
    let transport = entry["type"].as_str().unwrap_or("stdio");
    println!(
        "{verb} server \"{}\" ({transport}) in {}",
        escape(&args.name),
        config.display()
    );
    let Some((settings, outcome)) = indexed else {
        println!(
            "not indexed yet: a running `meta-server serve` indexes it now, else `meta-server index --server {}`",
            escape(&args.name)
        );
        return Ok(ExitCode::SUCCESS);
    };
    let name = &outcome.server;
    let seconds = outcome.millis as f64 / 1000.0;
    if let Some(error) = &outcome.error {
        if outcome.needs_login {
            println!(
                "needs a login: run `meta-server auth login {name}`, then `meta-server index --server {name}`"
            );
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "not indexed: {}\nit stays in the config; fix it and run `meta-server index --server {name}`, or `meta-server remove {name}`",
            escape(error)
        );
        return Ok(ExitCode::from(2));
    }
    let catalog = Catalog::load_server(&settings.catalog_dir, name)?;
    let count = |list: Option<&std::sync::Arc<[Value]>>| list.map_or(0, |l| l.len());
    let (prompts, resources) = catalog.as_ref().map_or((0, 0), |c| {
        (count(c.prompts.as_ref()), count(c.resources.as_ref()))
    });
    println!(
        "indexed in {seconds:.1}s: {} tools, {prompts} prompts, {resources} resources",
        outcome.tools
    );
    if !outcome.quarantined.is_empty() {
        println!("{}", escape(&crate::trust::notice(&outcome.quarantined)));
    }
    if let Err(e) = index_catalogs(&settings) {
        eprintln!("warning: {e:#}; `serve` builds the search index at start instead");
    }
    Ok(ExitCode::SUCCESS)
}

/// Lists the server `key` as the config text `text` configures it, into its catalog.
fn index(
    config: &Path,
    text: &str,
    catalog_dir: Option<PathBuf>,
    key: &str,
) -> anyhow::Result<(Settings, Outcome)> {
    let settings = Settings::from_text(config, text, catalog_dir)?;
    let name = server_identifier(key)?;
    let server = settings
        .server(&name)
        .context("the server is not in the config it was checked against")?
        .clone();
    crate::redact::set_process(crate::redact::Redactor::new(
        settings.servers.iter().flat_map(|s| s.secrets()),
    ));
    match std::env::current_exe() {
        Ok(exe) => guardian::arm(exe),
        Err(e) => tracing::warn!("cannot start the guardian: {e}"),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let outcome = runtime.block_on(async {
        let manager = Manager::new(std::slice::from_ref(&server));
        let store = match &settings.store {
            Some(store) => Some(crate::store::Valkey::open(&store.url)?),
            None => None,
        };
        let outcome = index_server(&settings, &manager, store.as_ref(), &server).await;
        manager.shutdown().await;
        anyhow::Ok(outcome)
    })?;
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok((settings, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(line: &[&str]) -> Args {
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        Cli::try_parse_from(std::iter::once("add").chain(line.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn entries_follow_claude_mcp_add() {
        let e = entry(&args(&[
            "-e", "K=v=w", "mem", "--", "npx", "-y", "srv", "--flag",
        ]))
        .unwrap();
        assert_eq!(
            e,
            json!({"command": "npx", "args": ["-y", "srv", "--flag"], "env": {"K": "v=w"}})
        );
        let e = entry(&args(&[
            "time",
            "uvx",
            "mcp-server-time",
            "--local-timezone",
            "UTC",
        ]))
        .unwrap();
        assert_eq!(
            e["args"],
            json!(["mcp-server-time", "--local-timezone", "UTC"])
        );
        let e = entry(&args(&[
            "docs",
            "https://h/mcp",
            "-H",
            "Authorization: Bearer ${T}",
        ]));
        assert_eq!(
            e.unwrap(),
            json!({"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${T}"}})
        );
        let e = entry(&args(&["--transport", "sse", "old", "http://h/sse"])).unwrap();
        assert_eq!(e, json!({"type": "sse", "url": "http://h/sse"}));
        let err = entry(&args(&["-H", "A: b", "x", "cmd"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("-e KEY=VALUE"), "{err}");
        let err = entry(&args(&["-e", "A=b", "x", "https://h"]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("-H"), "{err}");
    }
}
