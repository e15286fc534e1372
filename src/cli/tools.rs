//! `meta-server tools`: review the tools that wait for approval, and approve them.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde::Serialize;
use serde_json::Value;

use super::terminal::{escape, escape_json};
use crate::catalog::Catalog;
use crate::config::{ServerConfig, Settings, TrustMode};
use crate::library::{SEPARATOR, qualified_name};
use crate::store::Valkey;
use crate::trust::{Approvals, TrustError};

/// Review and approve upstream tools (`metaServer.trust`).
///
/// meta-server pins each tool's name, title, description, schemas and annotations. Under
/// "first-use" (the default) a server's tools are approved when it is first listed; a tool
/// that changes or appears later is quarantined: flagged in search_tools and get_tool_details
/// and refused by call_tool, scripts and alwaysLoad, until you approve it here. Under
/// "review" a new server's tools wait too. Approvals are kept beside the catalogs
/// (<catalog-dir>/<server>.approved); with a shared store (metaServer.store) they are kept
/// there, for every replica, and the catalogs the replicas share are the ones reviewed.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: ToolsCommand,
}

#[derive(Subcommand, Debug)]
enum ToolsCommand {
    Review(ReviewArgs),
    Approve(ApproveArgs),
}

/// List the tools that wait for approval, with the approved and the new text one above the
/// other, and the tools whose texts are flagged (hidden characters, instruction-like text).
#[derive(clap::Args, Debug)]
struct ReviewArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Approve tools as their catalogs hold them now.
#[derive(clap::Args, Debug)]
struct ApproveArgs {
    /// `<server>__<tool>` for one tool, `<server>` for all tools of a server.
    #[arg(required_unless_present = "all")]
    names: Vec<String>,

    /// Approve every tool of every configured server.
    #[arg(long, conflicts_with = "names")]
    all: bool,
}

/// One tool in `tools review`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Reviewed {
    name: String,
    server: String,
    tool: String,
    /// Why it waits for approval; absent when it is approved and only flagged.
    #[serde(skip_serializing_if = "Option::is_none")]
    quarantined: Option<String>,
    /// When the version it differs from was approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    approved_at: Option<String>,
    /// The approved version, if any.
    approved: Option<Value>,
    /// The version in the catalog now.
    current: Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    flags: Vec<String>,
}

pub async fn run(settings: Settings, args: Args) -> anyhow::Result<ExitCode> {
    let store = match &settings.store {
        Some(store) => Some(Valkey::open(&store.url)?),
        None => None,
    };
    match args.command {
        ToolsCommand::Review(args) => review(&settings, store.as_ref(), args).await,
        ToolsCommand::Approve(args) => approve(&settings, store.as_ref(), args).await,
    }
}

/// The catalog of `server`: the one the replicas share if there is a store and it holds one,
/// else the one in the catalog dir, if any.
async fn catalog(
    settings: &Settings,
    store: Option<&Valkey>,
    server: &ServerConfig,
) -> anyhow::Result<Option<Catalog>> {
    if let Some(store) = store {
        let fingerprint = crate::catalog::config_fingerprint(server);
        match store.catalog(&server.name, &fingerprint).await {
            Ok(Some(shared)) => {
                let catalog = Catalog::parse(std::path::Path::new("<shared store>"), &shared.json)?;
                if catalog.server == server.name {
                    return Ok(Some(catalog));
                }
            }
            Ok(None) => {}
            Err(e) => eprintln!(
                "warning: {e}; reading the catalog in {}",
                settings.catalog_dir.display()
            ),
        }
    }
    Ok(Catalog::load_server(&settings.catalog_dir, &server.name)?)
}

/// The approvals of `server`: from the store if there is one (the local copy, said so, when
/// it does not answer).
async fn approvals(
    settings: &Settings,
    store: Option<&Valkey>,
    server: &str,
) -> Result<Option<Approvals>, TrustError> {
    let Some(store) = store else {
        return Approvals::load(&settings.catalog_dir, server);
    };
    let (approvals, unshared) =
        crate::trust::shared::load(store, &settings.catalog_dir, server).await;
    if let Some(e) = unshared {
        eprintln!(
            "warning: {e}; showing the approvals of {server} last copied into {}",
            settings.catalog_dir.display()
        );
    }
    approvals
}

#[allow(clippy::print_stdout)]
async fn review(
    settings: &Settings,
    store: Option<&Valkey>,
    args: ReviewArgs,
) -> anyhow::Result<ExitCode> {
    let mut listed = Vec::new();
    for server in &settings.servers {
        let Some(catalog) = catalog(settings, store, server).await? else {
            continue;
        };
        let approvals = approvals(settings, store, &server.name).await;
        let mut pending: std::collections::BTreeMap<String, crate::trust::Pending> =
            crate::trust::pending(settings.trust, approvals, &catalog)
                .into_iter()
                .filter_map(|p| Some((p.tool.value()["name"].as_str()?.to_owned(), p)))
                .collect();
        for def in catalog.tool_defs() {
            let held = pending.remove(&def.name);
            let flags = def.flags();
            if held.is_none() && flags.is_empty() {
                continue;
            }
            listed.push(Reviewed {
                name: qualified_name(&server.name, &def.name),
                server: server.name.clone(),
                tool: def.name.clone(),
                quarantined: held.as_ref().map(|p| p.quarantine.why()),
                approved_at: held
                    .as_ref()
                    .and_then(|p| p.approved.as_ref())
                    .map(|a| a.approved_at.clone()),
                approved: held
                    .as_ref()
                    .and_then(|p| p.approved.as_ref())
                    .map(|a| a.tool.value()),
                current: held.map_or_else(|| def.value(), |p| p.tool.value()),
                flags,
            });
        }
    }
    if args.json {
        println!("{}", escape_json(&serde_json::to_string_pretty(&listed)?));
        return Ok(ExitCode::SUCCESS);
    }
    if settings.trust == TrustMode::Off {
        println!("trust is \"off\": no tool is pinned or quarantined (metaServer.trust)");
    }
    let waiting = listed.iter().filter(|r| r.quarantined.is_some()).count();
    for r in &listed {
        match &r.quarantined {
            Some(why) => println!("{}  quarantined: {}", r.name, escape(why)),
            None => println!("{}  approved, flagged", r.name),
        }
        for flag in &r.flags {
            println!("  flag: {}", escape(flag));
        }
        if r.quarantined.is_some() {
            side_by_side(r.approved.as_ref(), &r.current);
        }
        println!();
    }
    if waiting == 0 {
        println!("no tool waits for approval");
    } else {
        println!(
            "{waiting} tool(s) wait for approval: `meta-server tools approve <server>__<tool>` (or <server>, or --all)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Each pinned field that differs, the approved text above the new.
#[allow(clippy::print_stdout)]
fn side_by_side(approved: Option<&Value>, current: &Value) {
    for key in [
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ] {
        let (old, new) = (approved.and_then(|a| a.get(key)), current.get(key));
        if old == new {
            continue;
        }
        let show = |v: Option<&Value>| match v {
            None => "(none)".to_owned(),
            Some(Value::String(s)) => escape(s).into_owned(),
            Some(other) => escape(&other.to_string()).into_owned(),
        };
        println!("  {key}");
        if approved.is_some() {
            println!("    approved: {}", show(old));
        }
        println!("    new:      {}", show(new));
    }
}

#[allow(clippy::print_stdout)]
async fn approve(
    settings: &Settings,
    store: Option<&Valkey>,
    args: ApproveArgs,
) -> anyhow::Result<ExitCode> {
    // Per server: the tool names to approve (`None`: all of them).
    let mut chosen: Vec<(&ServerConfig, Option<Vec<String>>)> = Vec::new();
    if args.all {
        chosen.extend(settings.servers.iter().map(|s| (s, None)));
    }
    for name in &args.names {
        let (server, tool) = match name.split_once(SEPARATOR) {
            Some((server, tool)) => (server, Some(tool)),
            None => (name.as_str(), None),
        };
        let Some(config) = settings.server(server) else {
            bail!(
                "no server \"{}\" in {}; name a configured server or <server>__<tool>",
                escape(server),
                settings.source.display()
            );
        };
        let Some(tool) = tool else {
            chosen.push((config, None));
            continue;
        };
        let catalog = catalog(settings, store, config)
            .await?
            .with_context(|| no_catalog(server))?;
        let Some(def) = catalog
            .tool_defs()
            .into_iter()
            .find(|d| qualified_name(server, &d.name) == *name)
        else {
            bail!(
                "server \"{server}\" has no tool \"{}\"; `meta-server tools review` lists what waits",
                escape(tool)
            );
        };
        chosen.push((config, Some(vec![def.name])));
    }
    for (config, tools) in chosen {
        let Some(catalog) = catalog(settings, store, config).await? else {
            if args.all {
                continue;
            }
            bail!(no_catalog(&config.name));
        };
        let (dir, tools) = (&settings.catalog_dir, tools.as_deref());
        let approved = match store {
            Some(store) => crate::trust::shared::approve(store, dir, &catalog, tools).await?,
            None => crate::trust::approve(dir, &catalog, tools)?,
        };
        let names: Vec<String> = approved
            .iter()
            .map(|t| qualified_name(&config.name, t))
            .collect();
        println!(
            "approved {} tool(s) of {}: {}",
            names.len(),
            config.name,
            escape(&names.join(", "))
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn no_catalog(server: &str) -> String {
    format!("server \"{server}\" has no catalog yet; run `meta-server index` first")
}
