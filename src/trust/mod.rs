//! Pinning (`metaServer.trust`): the fingerprint of each tool, prompt, resource and resource
//! template of a server, and of its instructions, is approved once (when the server is first
//! listed, or by `meta-server tools approve`); an item whose text changed since, or that
//! appeared since, is quarantined: flagged where the model or the user reads about it and
//! refused where it is used, until the user approves it. Under `off` nothing is held, but what
//! was first seen is still recorded: the call policy judges a tool by the strictest of its
//! annotations then and now.

mod approvals;
mod kinds;
pub mod shared;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;

use serde_json::Value;

use crate::catalog::{Catalog, RawTool, tool_fingerprint};
use crate::config::TrustMode;
use crate::library::{Entry, Library};
use crate::store::StoreError;

pub use approvals::{Approvals, Approved, Pinned};
pub use kinds::{Holds, Kind};

/// Errors reading or writing approvals.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("cannot read approvals {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write approvals {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "approvals {path} are unusable ({message}); every tool of the server waits until you run `meta-server tools approve <server>`"
    )]
    Invalid { path: PathBuf, message: String },
    #[error(
        "server \"{server}\" has no {kind} \"{key}\" in its catalog; `meta-server tools review` lists what waits",
        kind = kind.noun()
    )]
    NoSuchItem {
        server: String,
        kind: Kind,
        key: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `tools approve` with a store that does not answer.
    #[error(
        "nothing was approved: approvals are kept in the shared store (metaServer.store) so that every replica holds them, and {0}; run the command again when it answers"
    )]
    Unshared(StoreError),
    #[error(
        "the approvals of server \"{0}\" kept changing in the shared store while they were written; run the command again"
    )]
    Contended(String),
}

/// Why a tool is quarantined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// Its text differs from the version approved at this time.
    Changed { approved_at: String },
    /// It appeared after its server was approved at this time.
    New { server_approved_at: String },
    /// Trust mode `review`: no tool of its server was approved yet.
    NewServer,
    /// The server's approvals cannot be read (the error).
    Unreadable(String),
}

/// A tool that waits for the user's approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantine {
    pub reason: Reason,
    /// The fingerprint of the tool's text that waits.
    pub fingerprint: String,
}

impl Quarantine {
    /// Why, in a few words with the date of the approved version.
    pub fn why(&self) -> String {
        match &self.reason {
            Reason::Changed { approved_at } => {
                format!("its text changed since the version approved at {approved_at}")
            }
            Reason::New { server_approved_at } => {
                format!("it appeared after its server was approved at {server_approved_at}")
            }
            Reason::NewServer => "trust mode \"review\": its server was never approved".into(),
            Reason::Unreadable(error) => error.clone(),
        }
    }

    /// The flag shown on the item `tools approve` knows as `name` (see [`Kind::name`]).
    pub fn flag(&self, name: &str) -> String {
        format!(
            "quarantined: {}; it cannot be used until the user reviews it (`meta-server tools review`) and runs `meta-server tools approve {name}`",
            self.why()
        )
    }

    /// The error a use of the item `name` (its `tools approve` name) gets; `shown` is what the
    /// client called it.
    pub fn refusal(&self, shown: &str, name: &str) -> String {
        format!(
            "{shown} is quarantined: {}. Nothing was called on its server. Ask the user to review it with `meta-server tools review` and approve it with `meta-server tools approve {name}`",
            self.why()
        )
    }
}

/// What of `catalog` waits for approval under `mode`. A kind the approvals do not pin yet
/// (made before it was pinned) waits under `review`; under `first-use` it is pinned as it is
/// at the next listing ([`observe`]).
pub fn assess(
    mode: TrustMode,
    approvals: &Result<Option<Approvals>, TrustError>,
    catalog: &Catalog,
) -> Holds {
    let mut holds = Holds::default();
    if mode == TrustMode::Off || (mode == TrustMode::FirstUse && matches!(approvals, Ok(None))) {
        return holds;
    }
    let quarantine = |reason, fingerprint| Quarantine {
        reason,
        fingerprint,
    };
    let approvals = match approvals {
        Ok(Some(approvals)) => approvals,
        Ok(None) | Err(_) => {
            let reason = match approvals {
                Err(e) => Reason::Unreadable(e.to_string()),
                _ => Reason::NewServer,
            };
            for tool in &catalog.tools {
                if let Some(name) = approvals::name_of(tool) {
                    let held = quarantine(reason.clone(), tool_fingerprint(tool));
                    holds.hold(Kind::Tool, name, held);
                }
            }
            for (kind, key, item) in offers(catalog) {
                holds.hold(
                    kind,
                    key,
                    quarantine(reason.clone(), kind.fingerprint(&item)),
                );
            }
            return holds;
        }
    };
    let new = || Reason::New {
        server_approved_at: approvals.approved_at.clone(),
    };
    for tool in &catalog.tools {
        let Some(name) = approvals::name_of(tool) else {
            continue;
        };
        let fingerprint = tool_fingerprint(tool);
        let reason = match approvals.tools.get(&name) {
            Some(a) if a.holds_for(tool, &fingerprint) => continue,
            Some(a) => Reason::Changed {
                approved_at: a.approved_at.clone(),
            },
            None => new(),
        };
        holds.hold(Kind::Tool, name, quarantine(reason, fingerprint));
    }
    for (kind, key, item) in offers(catalog) {
        let pinned = match kind {
            Kind::Instructions => approvals.instructions.as_ref().map(Some),
            _ => approvals.offers(kind).map(|pinned| pinned.get(&key)),
        };
        let fingerprint = kind.fingerprint(&item);
        let reason = match pinned {
            None if mode == TrustMode::FirstUse => continue,
            Some(Some(p)) if p.fingerprint == fingerprint => continue,
            Some(Some(p)) if !p.item.is_null() => Reason::Changed {
                approved_at: p.approved_at.clone(),
            },
            None | Some(_) => new(),
        };
        holds.hold(kind, key, quarantine(reason, fingerprint));
    }
    holds
}

/// The prompts, resources and resource templates `catalog` knows, and its instructions if it
/// has any: (kind, key, item).
fn offers(catalog: &Catalog) -> impl Iterator<Item = (Kind, String, Value)> + '_ {
    let lists = Kind::OFFERS.into_iter().flat_map(move |kind| {
        kind.items(catalog)
            .unwrap_or_default()
            .into_iter()
            .filter_map(move |item| Some((kind, kind.key_of(&item)?, item)))
    });
    let instructions = catalog.instructions.as_ref().map(|_| {
        (
            Kind::Instructions,
            String::new(),
            kinds::instructions(catalog),
        )
    });
    lists.chain(instructions)
}

/// Records that `fresh` was just listed, before it is written into `dir`, and returns the
/// `tools approve` names of what is quarantined now that was not with the same text before.
/// Under `first-use` and `off`, a server without approvals has its first catalog approved
/// (the one already in `dir`, else `fresh`), and a kind its approvals do not pin yet is pinned
/// the same way; under `off` nothing is held.
pub fn observe(mode: TrustMode, dir: &Path, fresh: &Catalog) -> Result<Vec<String>, TrustError> {
    let previous = Catalog::load_server(dir, &fresh.server).ok().flatten();
    let first: Vec<&Catalog> = previous.iter().chain([fresh]).collect();
    let mut approvals = Approvals::load(dir, &fresh.server);
    if mode != TrustMode::Review {
        match &mut approvals {
            Ok(None) => {
                let made = Approvals::of(first[0]);
                made.write(dir)?;
                approvals = Ok(Some(made));
            }
            Ok(Some(approvals)) => {
                if approvals.adopt(&first) {
                    approvals.write(dir)?;
                }
            }
            Err(_) => {}
        }
    }
    if mode == TrustMode::Off {
        return Ok(Vec::new());
    }
    let before: BTreeSet<(Kind, String, String)> = previous
        .map(|p| assess(mode, &approvals, &p))
        .unwrap_or_default()
        .iter()
        .map(|(kind, key, q)| (kind, key.to_owned(), q.fingerprint.clone()))
        .collect();
    Ok(assess(mode, &approvals, fresh)
        .iter()
        .filter(|(kind, key, q)| {
            !before.contains(&(*kind, (*key).to_owned(), q.fingerprint.clone()))
        })
        .map(|(kind, key, _)| kind.name(&fresh.server, key))
        .collect())
}

/// The one line `index` and the refresh while serving give about new quarantines (the names
/// `tools approve` takes).
pub fn notice(quarantined: &[String]) -> String {
    format!(
        "{} item(s) wait for approval, quarantined until then ({}): see `meta-server tools review`",
        quarantined.len(),
        quarantined.join(", ")
    )
}

/// What `tools approve` approves of one server: everything, or the items named.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    All,
    /// Items by kind and key.
    Items(Vec<(Kind, String)>),
}

/// Approves what `choice` names of `catalog` as it is now, in its server's approvals in `dir`;
/// returns the `tools approve` names approved.
pub fn approve(dir: &Path, catalog: &Catalog, choice: &Choice) -> Result<Vec<String>, TrustError> {
    let mut approvals = match Approvals::load(dir, &catalog.server) {
        Ok(Some(approvals)) => approvals,
        Ok(None) | Err(TrustError::Invalid { .. }) => Approvals::empty(&catalog.server),
        Err(e) => return Err(e),
    };
    let names = approve_in(&mut approvals, catalog, choice)?;
    approvals.write(dir)?;
    Ok(names)
}

/// Approves what `choice` names of `catalog` in `approvals`; returns the `tools approve` names
/// approved.
fn approve_in(
    approvals: &mut Approvals,
    catalog: &Catalog,
    choice: &Choice,
) -> Result<Vec<String>, TrustError> {
    let server = &catalog.server;
    let tools: BTreeMap<String, &RawTool> = catalog
        .tools
        .iter()
        .filter_map(|t| Some((approvals::name_of(t)?, t)))
        .collect();
    let item = |kind: Kind, key: &str| -> Option<Value> {
        match kind {
            Kind::Tool => None,
            Kind::Instructions => Some(kinds::instructions(catalog)),
            _ => kind
                .items(catalog)?
                .into_iter()
                .find(|i| kind.key_of(i).as_deref() == Some(key)),
        }
    };
    let chosen: Vec<(Kind, String)> = match choice {
        Choice::Items(items) => items.clone(),
        Choice::All => {
            let lists = Kind::OFFERS.into_iter().flat_map(|kind| {
                let items = kind.items(catalog).unwrap_or_default();
                items
                    .into_iter()
                    .filter_map(move |i| Some((kind, kind.key_of(&i)?)))
            });
            // A server without instructions has that approved too, without naming it.
            if catalog.instructions.is_none() {
                approvals.approve_item(Kind::Instructions, Value::Null);
            }
            let instructions = catalog
                .instructions
                .as_ref()
                .map(|_| (Kind::Instructions, String::new()));
            tools
                .keys()
                .map(|name| (Kind::Tool, name.clone()))
                .chain(lists)
                .chain(instructions)
                .collect()
        }
    };
    let mut names = Vec::new();
    for (kind, key) in chosen {
        let missing = || TrustError::NoSuchItem {
            server: server.clone(),
            kind,
            key: key.clone(),
        };
        match kind {
            Kind::Tool => {
                approvals.approve(tools.get(&key).ok_or_else(missing)?);
            }
            _ => approvals.approve_item(kind, item(kind, &key).ok_or_else(missing)?),
        }
        names.push(kind.name(server, &key));
    }
    Ok(names)
}

/// An item waiting for approval, as `tools review` shows it.
#[derive(Debug, Clone)]
pub struct Pending {
    pub kind: Kind,
    /// Its key in its kind (see [`Kind::key_of`]).
    pub key: String,
    /// The item in the catalog now.
    pub current: Value,
    pub quarantine: Quarantine,
    /// When the version approved before was approved, and that version, if there was one.
    pub approved: Option<(String, Value)>,
}

/// What of `catalog` waits for approval under `mode` and its server's `approvals`: tools in
/// catalog order, then prompts, resources, templates and instructions.
pub fn pending(
    mode: TrustMode,
    approvals: Result<Option<Approvals>, TrustError>,
    catalog: &Catalog,
) -> Vec<Pending> {
    let held = assess(mode, &approvals, catalog);
    let approved = approvals.ok().flatten();
    let tools = catalog.tools.iter().filter_map(|tool| {
        let name = approvals::name_of(tool)?;
        Some((Kind::Tool, name, tool.value()))
    });
    tools
        .chain(offers(catalog))
        .filter_map(|(kind, key, current)| {
            let quarantine = held.get(kind, &key)?.clone();
            let before = approved.as_ref().and_then(|a| a.approved(kind, &key));
            Some(Pending {
                approved: before.map(|(at, item)| (at.to_owned(), item)),
                kind,
                key,
                current,
                quarantine,
            })
        })
        .collect()
}

/// What a serving process knows of approvals: it reads a server's approvals again whenever
/// their file or the server's catalog changed, so an approval given on the command line holds
/// at once.
pub struct Trust {
    mode: TrustMode,
    dir: PathBuf,
    held: Mutex<HashMap<String, Held>>,
}

/// What waits for approval in one server's catalog, the annotations of its tools as approved,
/// and what they were assessed from.
struct Held {
    of: Assessed,
    stamp: Option<(SystemTime, u64)>,
    holds: Arc<Holds>,
    annotations: Arc<HashMap<String, Value>>,
}

/// The parts of a catalog an assessment was made from: hashes, and the lists themselves (kept,
/// so their addresses cannot be taken by others).
struct Assessed {
    tools_hash: String,
    prompts: Option<Arc<[Value]>>,
    resources: Option<Arc<[Value]>>,
    resource_templates: Option<Arc<[Value]>>,
    instructions: Option<String>,
}

impl Assessed {
    fn of(catalog: &Catalog) -> Option<Self> {
        Some(Self {
            tools_hash: catalog.tools_hash.clone()?,
            prompts: catalog.prompts.clone(),
            resources: catalog.resources.clone(),
            resource_templates: catalog.resource_templates.clone(),
            instructions: catalog.instructions.clone(),
        })
    }

    fn is(&self, catalog: &Catalog) -> bool {
        let same = |a: &Option<Arc<[Value]>>, b: &Option<Arc<[Value]>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        catalog.tools_hash.as_ref() == Some(&self.tools_hash)
            && same(&self.prompts, &catalog.prompts)
            && same(&self.resources, &catalog.resources)
            && same(&self.resource_templates, &catalog.resource_templates)
            && self.instructions == catalog.instructions
    }
}

impl Trust {
    pub fn new(mode: TrustMode, dir: PathBuf) -> Self {
        Self {
            mode,
            dir,
            held: Mutex::new(HashMap::new()),
        }
    }

    pub fn mode(&self) -> TrustMode {
        self.mode
    }

    /// The quarantine of `catalog`'s tool `tool`; `None` when it may be called.
    pub fn quarantine(&self, catalog: &Catalog, tool: &str) -> Option<Quarantine> {
        self.hold(catalog, Kind::Tool, tool)
    }

    /// The quarantine of `entry`'s tool, judged by its server's catalog in `library`.
    pub fn quarantine_of(&self, library: &Library, entry: &Entry) -> Option<Quarantine> {
        self.quarantine(library.catalogs.get(&entry.server)?, &entry.def.name)
    }

    /// The quarantine of item `key` of `kind` in `catalog`; `None` when it may be used.
    pub fn hold(&self, catalog: &Catalog, kind: Kind, key: &str) -> Option<Quarantine> {
        if self.mode == TrustMode::Off {
            return None;
        }
        self.held(catalog).0.get(kind, key).cloned()
    }

    /// Everything of `catalog` that waits for approval.
    pub fn holds(&self, catalog: &Catalog) -> Arc<Holds> {
        if self.mode == TrustMode::Off {
            return Arc::default();
        }
        self.held(catalog).0
    }

    /// The annotations `catalog`'s tool `tool` had when it was approved (or first seen, under
    /// `off`), if it was; `Null` for an approved tool without any.
    pub fn approved_annotations(&self, catalog: &Catalog, tool: &str) -> Option<Value> {
        self.held(catalog).1.get(tool).cloned()
    }

    fn held(&self, catalog: &Catalog) -> (Arc<Holds>, Arc<HashMap<String, Value>>) {
        let stamp = std::fs::metadata(Approvals::path(&self.dir, &catalog.server))
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        let fresh = |held: &Held| held.of.is(catalog) && held.stamp == stamp;
        if let Some(held) = self.held.lock().get(&catalog.server).filter(|h| fresh(h)) {
            return (held.holds.clone(), held.annotations.clone());
        }
        let approvals = Approvals::load(&self.dir, &catalog.server);
        let holds = Arc::new(assess(self.mode, &approvals, catalog));
        let annotations: HashMap<String, Value> = match &approvals {
            Ok(Some(approvals)) => approvals
                .tools
                .iter()
                .map(|(name, a)| (name.clone(), a.tool.value()["annotations"].clone()))
                .collect(),
            _ => HashMap::new(),
        };
        let annotations = Arc::new(annotations);
        if let Some(of) = Assessed::of(catalog) {
            self.held.lock().insert(
                catalog.server.clone(),
                Held {
                    of,
                    stamp,
                    holds: holds.clone(),
                    annotations: annotations.clone(),
                },
            );
        }
        (holds, annotations)
    }
}

#[cfg(test)]
mod tests;
