//! `meta-server tools`: review what waits for approval (tools, prompts, resources, resource
//! templates, server instructions), and approve it.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde::Serialize;
use serde_json::Value;

use super::terminal::{escape, escape_json};
use crate::catalog::{Catalog, screen};
use crate::config::{ServerConfig, Settings, TrustMode};
use crate::store::Valkey;
use crate::trust::{Approvals, Choice, Kind, TrustError};

/// Review and approve what upstream servers say (`metaServer.trust`).
///
/// meta-server pins every field of each tool (name, title, description, schemas, annotations,
/// _meta, icons), prompt, resource and resource template of a server, and its instructions.
/// Under "first-use" (the default) a server's are approved when it is first listed; what
/// changes or appears later is quarantined: flagged where the model or the user reads it
/// (search_tools, get_tool_details, prompts/list, resources/list) and refused where it is used
/// (call_tool, scripts, alwaysLoad, prompts/get, resources/read, completion), and changed
/// instructions are withheld, until you approve it here. Under "review" a new server's wait
/// too; under "off" nothing waits. Approvals are kept beside the catalogs
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

/// List what waits for approval, with the approved and the new text one above the other, and
/// what is flagged (hidden characters, instruction-like text).
#[derive(clap::Args, Debug)]
struct ReviewArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Approve tools, prompts, resources and instructions as their catalogs hold them now.
#[derive(clap::Args, Debug)]
struct ApproveArgs {
    /// `<server>__<tool>` for one tool, `<server>` for everything of a server; `prompt:`,
    /// `resource:` or `template:` and `<server>__<name, URI or uriTemplate>`, or
    /// `instructions:<server>`, as `tools review` names them.
    #[arg(required_unless_present = "all")]
    names: Vec<String>,

    /// Approve everything of every configured server.
    #[arg(long, conflicts_with = "names")]
    all: bool,
}

/// One item in `tools review`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Reviewed {
    /// What `tools approve` takes.
    name: String,
    server: String,
    /// "tool", "prompt", "resource", "resource template" or "instructions".
    kind: &'static str,
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

/// The flags of item `key` of `kind` in `catalog` (a tool's as search shows them).
fn flags_of(catalog: &Catalog, kind: Kind, key: &str, item: &Value) -> Vec<String> {
    match kind {
        Kind::Tool => catalog
            .tool_defs()
            .into_iter()
            .find(|d| d.name == key)
            .map(|d| d.flags())
            .unwrap_or_default(),
        Kind::Instructions => {
            let text = item.as_str().unwrap_or_default();
            let (kept, hidden) = crate::hidden::strip(text);
            screen::flags("these instructions", hidden, [kept.as_str()])
        }
        _ => {
            let field = match kind {
                Kind::Prompt => "name",
                Kind::Resource => "uri",
                _ => "uriTemplate",
            };
            screen::offer(kind.noun(), field, item)
                .map(|s| s.flags)
                .unwrap_or_default()
        }
    }
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
        let mut pending: std::collections::BTreeMap<(Kind, String), crate::trust::Pending> =
            crate::trust::pending(settings.trust, approvals, &catalog)
                .into_iter()
                .map(|p| ((p.kind, p.key.clone()), p))
                .collect();
        for (kind, key, current) in items(&catalog) {
            let held = pending.remove(&(kind, key.clone()));
            let flags = flags_of(&catalog, kind, &key, &current);
            if held.is_none() && flags.is_empty() {
                continue;
            }
            let approved = held.as_ref().and_then(|p| p.approved.clone());
            listed.push(Reviewed {
                name: kind.name(&server.name, &key),
                server: server.name.clone(),
                kind: kind.noun(),
                quarantined: held.as_ref().map(|p| p.quarantine.why()),
                approved_at: approved.as_ref().map(|(at, _)| at.clone()),
                approved: approved.map(|(_, item)| item),
                current,
                flags,
            });
        }
    }
    if args.json {
        println!("{}", escape_json(&serde_json::to_string_pretty(&listed)?));
        return Ok(ExitCode::SUCCESS);
    }
    if settings.trust == TrustMode::Off {
        println!("trust is \"off\": nothing is quarantined (metaServer.trust)");
    }
    let waiting = listed.iter().filter(|r| r.quarantined.is_some()).count();
    for r in &listed {
        match &r.quarantined {
            Some(why) => println!("{}  quarantined: {}", escape(&r.name), escape(why)),
            None => println!("{}  approved, flagged", escape(&r.name)),
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
        println!("nothing waits for approval");
    } else {
        println!(
            "{waiting} item(s) wait for approval: `meta-server tools approve <name>` with a name above (or <server>, or --all)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Every item of `catalog` `tools review` looks at: (kind, key, item as received).
fn items(catalog: &Catalog) -> Vec<(Kind, String, Value)> {
    let mut all = Vec::new();
    for kind in Kind::ALL {
        for item in kind.items(catalog).unwrap_or_default() {
            if kind == Kind::Instructions && item.is_null() {
                continue;
            }
            if let Some(key) = kind.key_of(&item) {
                all.push((kind, key, item));
            }
        }
    }
    all
}

/// Each field that differs, the approved text above the new (instructions as one text).
#[allow(clippy::print_stdout)]
fn side_by_side(approved: Option<&Value>, current: &Value) {
    let fields = |v: Option<&Value>| -> Vec<(String, Value)> {
        match v {
            Some(Value::Object(fields)) => {
                fields.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
            }
            Some(other) => vec![("text".to_owned(), other.clone())],
            None => Vec::new(),
        }
    };
    let (old, new) = (fields(approved), fields(Some(current)));
    let mut keys: Vec<&str> = new.iter().map(|(k, _)| k.as_str()).collect();
    keys.extend(
        old.iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !new.iter().any(|(n, _)| n == k)),
    );
    let get = |list: &[(String, Value)], key: &str| {
        list.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    };
    for key in keys {
        let (was, now) = (get(&old, key), get(&new, key));
        if was == now {
            continue;
        }
        let show = |v: Option<Value>| match v {
            None => "(none)".to_owned(),
            Some(Value::String(s)) => escape(&s).into_owned(),
            Some(other) => escape(&other.to_string()).into_owned(),
        };
        println!("  {}", escape(key));
        if approved.is_some() {
            println!("    approved: {}", show(was));
        }
        println!("    new:      {}", show(now));
    }
}

#[allow(clippy::print_stdout)]
async fn approve(
    settings: &Settings,
    store: Option<&Valkey>,
    args: ApproveArgs,
) -> anyhow::Result<ExitCode> {
    // Per server: what to approve.
    let mut chosen: Vec<(&ServerConfig, Choice)> = Vec::new();
    if args.all {
        chosen.extend(settings.servers.iter().map(|s| (s, Choice::All)));
    }
    for name in &args.names {
        let (server, item) = match Kind::parse(name) {
            Some((kind, server, key)) => (server, Some((kind, key))),
            None => (name.as_str(), None),
        };
        let Some(config) = settings.server(server) else {
            bail!(
                "no server \"{}\" in {}; name a configured server, <server>__<tool>, or an item as `meta-server tools review` names it",
                escape(server),
                settings.source.display()
            );
        };
        let Some((kind, key)) = item else {
            chosen.push((config, Choice::All));
            continue;
        };
        let catalog = catalog(settings, store, config)
            .await?
            .with_context(|| no_catalog(server))?;
        // Tools and prompts are named as clients see them (qualified), which may differ from
        // their own names.
        let wanted = kind.name(server, key);
        let key = items(&catalog)
            .into_iter()
            .find(|(k, own, _)| *k == kind && kind.name(server, own) == wanted)
            .map(|(_, own, _)| own);
        let Some(key) = key else {
            bail!(
                "server \"{server}\" has no {} named so; `meta-server tools review` lists what waits",
                kind.noun()
            );
        };
        match chosen.iter_mut().find(|(c, _)| c.name == config.name) {
            Some((_, Choice::Items(items))) => items.push((kind, key)),
            Some((_, Choice::All)) => {}
            None => chosen.push((config, Choice::Items(vec![(kind, key)]))),
        }
    }
    for (config, choice) in chosen {
        let Some(catalog) = catalog(settings, store, config).await? else {
            if args.all {
                continue;
            }
            bail!(no_catalog(&config.name));
        };
        let dir = &settings.catalog_dir;
        let names = match store {
            Some(store) => crate::trust::shared::approve(store, dir, &catalog, &choice).await?,
            None => crate::trust::approve(dir, &catalog, &choice)?,
        };
        println!(
            "approved {} item(s) of {}: {}",
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
