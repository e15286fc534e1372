//! Tool pinning (`metaServer.trust`): each tool's fingerprint is approved once (when its server
//! is first listed, or by `meta-server tools approve`); a tool whose text changed since, or
//! that appeared since, is quarantined: flagged where the model reads about it and refused
//! where it is called, until the user approves it.

mod approvals;
pub mod shared;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;

use crate::catalog::{Catalog, RawTool, tool_fingerprint};
use crate::config::TrustMode;
use crate::library::{Entry, Library};
use crate::store::StoreError;

pub use approvals::{Approvals, Approved};

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
        "server \"{server}\" has no tool \"{tool}\" in its catalog; `meta-server tools review` lists what waits"
    )]
    NoSuchTool { server: String, tool: String },
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

    /// The flag search and details show on the tool `qualified`.
    pub fn flag(&self, qualified: &str) -> String {
        format!(
            "quarantined: {}; it cannot be called until the user reviews it (`meta-server tools review`) and runs `meta-server tools approve {qualified}`",
            self.why()
        )
    }

    /// The error a call of the tool `qualified` gets.
    pub fn refusal(&self, qualified: &str) -> String {
        format!(
            "{qualified} is quarantined: {}. Nothing was called. Ask the user to review it with `meta-server tools review` and approve it with `meta-server tools approve {qualified}`",
            self.why()
        )
    }
}

/// The tools of `catalog` that wait for approval under `mode`, by tool name.
pub fn assess(
    mode: TrustMode,
    approvals: &Result<Option<Approvals>, TrustError>,
    catalog: &Catalog,
) -> BTreeMap<String, Quarantine> {
    if mode == TrustMode::Off || (mode == TrustMode::FirstUse && matches!(approvals, Ok(None))) {
        return BTreeMap::new();
    }
    let reason_of = |tool: &RawTool, fingerprint: &str| match approvals {
        Err(e) => Some(Reason::Unreadable(e.to_string())),
        Ok(None) => Some(Reason::NewServer),
        Ok(Some(approvals)) => {
            let name = approvals::name_of(tool)?;
            match approvals.tools.get(&name) {
                Some(a) if a.fingerprint == fingerprint => None,
                Some(a) => Some(Reason::Changed {
                    approved_at: a.approved_at.clone(),
                }),
                None => Some(Reason::New {
                    server_approved_at: approvals.approved_at.clone(),
                }),
            }
        }
    };
    catalog
        .tools
        .iter()
        .filter_map(|tool| {
            let name = approvals::name_of(tool)?;
            let fingerprint = tool_fingerprint(tool);
            let reason = reason_of(tool, &fingerprint)?;
            Some((
                name,
                Quarantine {
                    reason,
                    fingerprint,
                },
            ))
        })
        .collect()
}

/// Records that `fresh` was just listed, before it is written into `dir`, and returns the
/// names of its tools quarantined now that were not with the same text before. Under
/// `first-use`, a server without approvals has the tools of its first catalog approved: the
/// one already in `dir`, else `fresh`.
pub fn observe(mode: TrustMode, dir: &Path, fresh: &Catalog) -> Result<Vec<String>, TrustError> {
    if mode == TrustMode::Off {
        return Ok(Vec::new());
    }
    let previous = Catalog::load_server(dir, &fresh.server).ok().flatten();
    let mut approvals = Approvals::load(dir, &fresh.server);
    if matches!(approvals, Ok(None)) && mode == TrustMode::FirstUse {
        let first = Approvals::of(previous.as_ref().unwrap_or(fresh));
        first.write(dir)?;
        approvals = Ok(Some(first));
    }
    let before: BTreeSet<(String, String)> = previous
        .map(|p| assess(mode, &approvals, &p))
        .unwrap_or_default()
        .into_iter()
        .map(|(name, q)| (name, q.fingerprint))
        .collect();
    Ok(assess(mode, &approvals, fresh)
        .into_iter()
        .filter(|(name, q)| !before.contains(&(name.clone(), q.fingerprint.clone())))
        .map(|(name, _)| name)
        .collect())
}

/// The one line `index` and the refresh while serving give about new quarantines (qualified
/// tool names).
pub fn notice(quarantined: &[String]) -> String {
    format!(
        "{} tool(s) wait for approval, quarantined until then ({}): see `meta-server tools review`",
        quarantined.len(),
        quarantined.join(", ")
    )
}

/// Approves the tools of `catalog` named in `tools` (all when `None`) as they are now, in
/// its server's approvals in `dir`; returns the names approved.
pub fn approve(
    dir: &Path,
    catalog: &Catalog,
    tools: Option<&[String]>,
) -> Result<Vec<String>, TrustError> {
    let mut approvals = match Approvals::load(dir, &catalog.server) {
        Ok(Some(approvals)) => approvals,
        Ok(None) | Err(TrustError::Invalid { .. }) => Approvals::empty(&catalog.server),
        Err(e) => return Err(e),
    };
    let names = approve_in(&mut approvals, catalog, tools)?;
    approvals.write(dir)?;
    Ok(names)
}

/// Approves the tools of `catalog` named in `tools` (all when `None`) in `approvals`; returns
/// the names approved.
fn approve_in(
    approvals: &mut Approvals,
    catalog: &Catalog,
    tools: Option<&[String]>,
) -> Result<Vec<String>, TrustError> {
    let by_name: BTreeMap<String, &RawTool> = catalog
        .tools
        .iter()
        .filter_map(|t| Some((approvals::name_of(t)?, t)))
        .collect();
    let names: Vec<String> = match tools {
        Some(tools) => tools.to_vec(),
        None => by_name.keys().cloned().collect(),
    };
    for name in &names {
        let tool = by_name.get(name).ok_or_else(|| TrustError::NoSuchTool {
            server: catalog.server.clone(),
            tool: name.clone(),
        })?;
        approvals.approve(tool);
    }
    Ok(names)
}

/// A tool waiting for approval, as `tools review` shows it.
#[derive(Debug, Clone)]
pub struct Pending {
    pub tool: RawTool,
    pub quarantine: Quarantine,
    /// The version approved before, if there was one.
    pub approved: Option<Approved>,
}

/// The tools of `catalog` waiting for approval under `mode` and its server's `approvals`, in
/// catalog order.
pub fn pending(
    mode: TrustMode,
    approvals: Result<Option<Approvals>, TrustError>,
    catalog: &Catalog,
) -> Vec<Pending> {
    let mut held = assess(mode, &approvals, catalog);
    let approved = approvals.ok().flatten();
    catalog
        .tools
        .iter()
        .filter_map(|tool| {
            let name = approvals::name_of(tool)?;
            Some(Pending {
                tool: tool.clone(),
                quarantine: held.remove(&name)?,
                approved: approved.as_ref().and_then(|a| a.tools.get(&name).cloned()),
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

/// The quarantined tools of one server, and what they were assessed from.
struct Held {
    tools_hash: String,
    stamp: Option<(SystemTime, u64)>,
    tools: Arc<BTreeMap<String, Quarantine>>,
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
        if self.mode == TrustMode::Off {
            return None;
        }
        self.held(catalog).get(tool).cloned()
    }

    /// The quarantine of `entry`'s tool, judged by its server's catalog in `library`.
    pub fn quarantine_of(&self, library: &Library, entry: &Entry) -> Option<Quarantine> {
        self.quarantine(library.catalogs.get(&entry.server)?, &entry.def.name)
    }

    fn held(&self, catalog: &Catalog) -> Arc<BTreeMap<String, Quarantine>> {
        let stamp = std::fs::metadata(Approvals::path(&self.dir, &catalog.server))
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        let fresh = |held: &Held| {
            Some(&held.tools_hash) == catalog.tools_hash.as_ref() && held.stamp == stamp
        };
        if let Some(held) = self.held.lock().get(&catalog.server).filter(|h| fresh(h)) {
            return held.tools.clone();
        }
        let approvals = Approvals::load(&self.dir, &catalog.server);
        let tools = Arc::new(assess(self.mode, &approvals, catalog));
        if let Some(tools_hash) = &catalog.tools_hash {
            self.held.lock().insert(
                catalog.server.clone(),
                Held {
                    tools_hash: tools_hash.clone(),
                    stamp,
                    tools: tools.clone(),
                },
            );
        }
        tools
    }
}

#[cfg(test)]
mod tests;
