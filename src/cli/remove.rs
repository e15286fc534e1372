//! `meta-server remove`: one server taken out of meta-server's config.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;

use super::terminal::escape;
use crate::catalog::Catalog;
use crate::config::Settings;
use crate::trust::Approvals;

/// Remove a server from meta-server's config.
///
/// Takes its entry out of the config (comments and every other byte of the file are kept) and
/// deletes what was made from it beside the catalogs: its catalog, tool vectors and last
/// failure. Its tool approvals are kept, so adding it back does not ask again for tools that
/// did not change; so is its login (`meta-server auth logout NAME` before removing deletes
/// it). A running `meta-server serve` stops the server and drops its tools by itself.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The server's name (its config key, or the name its tools are qualified with).
    #[arg(value_name = "NAME")]
    name: String,
}

#[allow(clippy::print_stdout)]
pub fn run(config: &Path, catalog_dir: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let Some(before) = crate::clients::read_text(config)? else {
        bail!("no config file at {}; nothing to remove", config.display());
    };
    let settings = Settings::load(config, catalog_dir.clone())?;
    let edit = crate::clients::remove_server(config, &before, &args.name)?;
    let server = settings.servers.iter().find(|s| s.key == edit.key).cloned();
    crate::clients::write_atomic(config, edit.after.as_bytes())?;
    println!(
        "removed server \"{}\" from {}",
        escape(&edit.key),
        config.display()
    );
    let Some(server) = server else {
        return Ok(ExitCode::SUCCESS);
    };
    let dir = &settings.catalog_dir;
    let made = [
        Catalog::path(dir, &server.name),
        dir.join(format!("{}.vectors", server.name)),
        dir.join(format!("{}.failed", server.name)),
    ];
    let deleted: Vec<String> = made
        .iter()
        .filter(|path| std::fs::remove_file(path).is_ok())
        .map(|path| path.display().to_string())
        .collect();
    if !deleted.is_empty() {
        println!("deleted {}", deleted.join(", "));
    }
    let approvals = Approvals::path(dir, &server.name);
    if approvals.exists() {
        println!(
            "kept its tool approvals in {} (adding it back does not ask again for unchanged tools)",
            approvals.display()
        );
    }
    if let Some(login) = crate::auth::login_file(&server) {
        println!(
            "kept its login in {} (delete the file to forget it)",
            login.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
