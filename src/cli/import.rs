//! `meta-server import`: copy a client's MCP servers into meta-server's config.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::builder::{PossibleValuesParser, TypedValueParser};

use crate::clients::{Client, ClientFile, Dirs, Merge, locate, merge, read_text, unified_diff};

/// Copy a client's MCP servers into meta-server's config.
///
/// Reads the client's config (its default location, or PATH) and adds every server that
/// meta-server's config does not have yet; the rest of meta-server's config is kept as it is.
/// A server whose name is already there keeps meta-server's entry. An entry that runs
/// meta-server itself is never imported. The client's file is not changed. Codex's
/// config.toml is understood too. Creates meta-server's config if it does not exist.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The client whose config to read.
    #[arg(long, value_name = "CLIENT", value_parser = client_parser())]
    from: Client,

    /// The client's config file, if not at its default location (e.g. a project's .mcp.json
    /// or .vscode/mcp.json).
    #[arg(value_name = "PATH")]
    path: Option<PathBuf>,

    /// Write meta-server's config to FILE instead of the --config file.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Show what would change as a diff, and write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Client names as clap possible values, so `--help` lists them.
pub(super) fn client_parser() -> impl TypedValueParser<Value = Client> {
    PossibleValuesParser::new(Client::NAMES)
        .map(|name| name.parse::<Client>().expect("a listed client name"))
}

pub fn run(config: &Path, args: Args) -> anyhow::Result<ExitCode> {
    let target = args.output.as_deref().unwrap_or(config);
    let source = locate(
        args.from,
        args.path.as_deref(),
        &Dirs::from_env(),
        Path::exists,
    )?;
    let file = ClientFile::read(args.from, &source)?;
    let merged = merge_into(target, &file)?;
    if args.dry_run {
        print_diff(&merged);
        print_report(&file, &merged, true);
        return Ok(ExitCode::SUCCESS);
    }
    if merged.changed() {
        crate::clients::write_atomic(target, merged.after.as_bytes())?;
    }
    print_report(&file, &merged, false);
    Ok(ExitCode::SUCCESS)
}

/// Merges the client's servers into the config at `target` (which may not exist yet).
pub(super) fn merge_into(target: &Path, file: &ClientFile) -> anyhow::Result<Merge> {
    let before = read_text(target)?;
    Ok(merge(target, before.as_deref(), &file.servers)?)
}

#[allow(clippy::print_stdout)]
pub(super) fn print_diff(merged: &Merge) {
    let old_name = if merged.before.is_some() {
        merged.path.display().to_string()
    } else {
        "/dev/null".to_owned()
    };
    print!(
        "{}",
        unified_diff(
            merged.before.as_deref().unwrap_or(""),
            &merged.after,
            &old_name,
            &merged.path.display().to_string(),
        )
    );
}

#[allow(clippy::print_stdout)]
pub(super) fn print_report(file: &ClientFile, merged: &Merge, dry_run: bool) {
    let verb = if dry_run { "would import" } else { "imported" };
    println!(
        "{verb} {} of {} servers from {} ({}) into {}",
        merged.added.len(),
        file.servers.len(),
        file.client,
        file.path.display(),
        merged.path.display()
    );
    for name in &merged.added {
        println!("  + {name}");
    }
    for (name, why) in &merged.left {
        println!(
            "  - {name}: left in {} (meta-server cannot serve it: {why})",
            file.path.display()
        );
    }
    for name in &merged.existing {
        println!(
            "  = {name}: meta-server's config already has a server of this name; kept that one"
        );
    }
    for (name, why) in &merged.skipped {
        println!("  - {name}: skipped, {why}");
    }
    for (name, note) in &merged.notes {
        println!("  ! {name}: {note}");
    }
}
