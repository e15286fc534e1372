//! `meta-server install` and `uninstall`: put the single meta-server entry in a client's config
//! in place of its servers, and take it out again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::import::{client_parser, merge_into, print_diff, print_report};
use super::terminal;
use crate::clients::{
    Client, ClientError, ClientFile, Dirs, MetaEntry, backup_path, locate, restore_backup,
    unified_diff, write_atomic, write_backup,
};

/// Replace a client's MCP servers with the single meta-server entry.
///
/// First imports the client's servers into meta-server's config (as `import` does, so nothing
/// is lost), then copies the client's file to <file>.meta-server-backup and rewrites its server
/// list to one entry that runs this meta-server binary with this --config. Everything else in
/// the file stays as it was. Undo with `meta-server uninstall --client CLIENT`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The client to set up.
    #[arg(long, value_name = "CLIENT", value_parser = client_parser())]
    client: Client,

    /// The client's config file, if not at its default location.
    #[arg(value_name = "PATH")]
    path: Option<PathBuf>,

    /// Show both changes (meta-server's config and the client's) as diffs, and write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Restore a client's config from the backup `install` made, byte for byte.
///
/// Puts <file>.meta-server-backup back in place of the client's file and removes the backup.
/// Changes made to the client's file since the install are lost. meta-server's own config is
/// left as it is.
#[derive(clap::Args, Debug)]
pub struct UninstallArgs {
    /// The client to restore.
    #[arg(long, value_name = "CLIENT", value_parser = client_parser())]
    client: Client,

    /// The client's config file, if not at its default location.
    #[arg(value_name = "PATH")]
    path: Option<PathBuf>,
}

#[allow(clippy::print_stdout)]
pub fn run(config: &Path, args: Args) -> anyhow::Result<ExitCode> {
    let path = locate(
        args.client,
        args.path.as_deref(),
        &Dirs::from_env(),
        Path::exists,
    )?;
    let path = std::path::absolute(&path).unwrap_or(path);
    let file = ClientFile::read(args.client, &path)?;
    let config = std::path::absolute(config)
        .with_context(|| format!("cannot resolve {}", config.display()))?;
    if same_file(&path, &config) {
        return Err(ClientError::SameFile { path }.into());
    }
    let exe = std::env::current_exe().context("cannot find the meta-server binary's path")?;
    let entry = MetaEntry::new(args.client, &exe, &config);
    let merged = merge_into(&config, &file)?;
    let left: Vec<String> = merged.left.iter().map(|(name, _)| name.clone()).collect();
    let installed = file.with_only(&entry, &left)?;
    let name = args.client.name();

    if args.dry_run {
        print_diff(&merged);
        let shown = path.display().to_string();
        print!("{}", unified_diff(&file.text, &installed, &shown, &shown));
        print_report(&file, &merged, true);
        println!("dry run: nothing written");
        return Ok(ExitCode::SUCCESS);
    }
    if installed == file.text {
        if merged.left.is_empty() {
            println!(
                "{} already has only the meta-server entry; nothing to change",
                path.display()
            );
        } else {
            println!(
                "{} already runs meta-server; nothing to change. It also keeps, as before, what meta-server cannot serve:",
                path.display()
            );
            for (server, reason) in &merged.left {
                println!(
                    "  {}: {}",
                    terminal::escape(server),
                    terminal::escape(reason)
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let backup = backup_path(&path);
    if backup.exists() {
        return Err(ClientError::BackupExists {
            path: backup,
            client: name,
        }
        .into());
    }
    if merged.changed() {
        write_atomic(&config, merged.after.as_bytes())?;
    }
    print_report(&file, &merged, false);
    let backup = write_backup(&path, name)?;
    write_atomic(&path, installed.as_bytes())?;
    if left.is_empty() {
        println!(
            "{} now runs only meta-server ({} --config {} serve)",
            path.display(),
            entry.command,
            config.display()
        );
    } else {
        println!(
            "{} now runs meta-server ({} --config {} serve) and, as before, {}",
            path.display(),
            entry.command,
            config.display(),
            left.join(", ")
        );
    }
    println!("backup of the original: {}", backup.display());
    println!(
        "restart {} to use it; to undo: meta-server uninstall --client {name} {}",
        args.client,
        quote(&path)
    );
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::print_stdout)]
pub fn uninstall(args: UninstallArgs) -> anyhow::Result<ExitCode> {
    let path = locate(args.client, args.path.as_deref(), &Dirs::from_env(), |p| {
        backup_path(p).exists()
    })?;
    let path = std::path::absolute(&path).unwrap_or(path);
    let backup = restore_backup(&path, args.client.name())?;
    println!(
        "restored {} from {} (backup removed)",
        path.display(),
        backup.display()
    );
    println!("meta-server's config still lists the imported servers; it is left as it is");
    Ok(ExitCode::SUCCESS)
}

/// Whether both paths name one existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    matches!(
        (std::fs::canonicalize(a), std::fs::canonicalize(b)),
        (Ok(a), Ok(b)) if a == b
    )
}

/// A path as a shell word, quoted when it has spaces (macOS's Application Support).
fn quote(path: &Path) -> String {
    let s = path.display().to_string();
    if s.contains(|c: char| c.is_whitespace() || c == '\'') {
        format!("'{}'", s.replace('\'', r"'\''"))
    } else {
        s
    }
}
