//! `meta-server get`: one configured server in detail.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;

use super::status::{self, State};
use super::terminal::{escape_json, escape_line};
use crate::config::{Settings, TransportConfig};

/// Show one server of meta-server's config: how it is reached and where it stands.
///
/// Its transport and command line or URL (secrets masked; ${VAR} as written), the names of its
/// environment variables or headers, its state, what its catalog holds and when it was listed,
/// the MCP revision it spoke, its tools waiting for approval and its login. Nothing is started.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The server's name (its config key, or the name its tools are qualified with).
    #[arg(value_name = "NAME")]
    name: String,

    /// Print JSON for scripts: one server as `list --json` shows it (see docs/servers.md).
    #[arg(long)]
    json: bool,
}

#[allow(clippy::print_stdout)]
pub fn run(config: &Path, catalog_dir: Option<PathBuf>, args: Args) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(config, catalog_dir)?;
    let all = status::all(&settings, &status::config_text(config)?);
    let Some(found) = status::find(&all, &args.name) else {
        let names: Vec<&str> = all.iter().map(|s| s.key.as_str()).collect();
        bail!(
            "{} has no server \"{}\"; configured: {}",
            config.display(),
            args.name,
            names.join(", ")
        );
    };
    if args.json {
        println!("{}", escape_json(&serde_json::to_string_pretty(found)?));
        return Ok(ExitCode::SUCCESS);
    }
    let server = settings.server(&found.name);
    let mut lines: Vec<(&str, String)> = vec![
        ("name", found.name.clone()),
        ("transport", found.transport.unwrap_or("-").to_owned()),
    ];
    let target_key = if found.transport == Some("stdio") {
        "command"
    } else {
        "url"
    };
    lines.push((
        target_key,
        found.target.clone().unwrap_or_else(|| "-".into()),
    ));
    match server.map(|s| &s.transport) {
        Some(TransportConfig::Stdio { env, cwd, .. }) => {
            if !env.is_empty() {
                lines.push(("env", env.keys().cloned().collect::<Vec<_>>().join(", ")));
            }
            if let Some(cwd) = cwd {
                lines.push(("cwd", cwd.clone()));
            }
        }
        Some(TransportConfig::Http { headers, .. } | TransportConfig::Sse { headers, .. })
            if !headers.is_empty() =>
        {
            let names: Vec<&str> = headers.keys().map(String::as_str).collect();
            lines.push(("headers", names.join(", ")));
        }
        _ => {}
    }
    let state = match (found.state, found.stale) {
        (State::Indexed, true) => "indexed (stale: listed from another launch config; `meta-server index --stale` lists it again)".to_owned(),
        (state, _) => state.words().to_owned(),
    };
    lines.push(("state", state));
    if let Some(reason) = &found.reason {
        lines.push(("reason", reason.clone()));
    }
    if let Some(tools) = found.tools {
        lines.push((
            "catalog",
            format!(
                "{tools} tools, {} prompts, {} resources",
                found.prompts.unwrap_or(0),
                found.resources.unwrap_or(0)
            ),
        ));
    }
    if let Some(at) = &found.refreshed_at {
        lines.push(("refreshed", at.clone()));
    }
    if let Some(revision) = &found.revision {
        lines.push(("revision", revision.clone()));
    }
    if found.state == State::Indexed {
        let held = match found.quarantined.len() {
            0 => "none".to_owned(),
            _ => found.quarantined.join(", "),
        };
        lines.push(("quarantined", held));
    }
    if let Some(server) = server.filter(|s| s.remote_url().is_some()) {
        let login = match crate::auth::stored(server) {
            Ok(crate::auth::Stored::LoggedIn { .. }) => "logged in".to_owned(),
            Ok(_) => "none".to_owned(),
            Err(e) => e.to_string(),
        };
        lines.push(("login", login));
    }
    if found.always_load {
        lines.push(("alwaysLoad", "yes: its tools are in tools/list".to_owned()));
    }
    if let Some(catalog) = &found.catalog {
        lines.push(("file", catalog.display().to_string()));
    }
    println!("{}", escape_line(&found.key));
    for (key, value) in lines {
        println!("  {:<12} {}", format!("{key}:"), escape_line(&value));
    }
    Ok(ExitCode::SUCCESS)
}
