//! Approvals shared by replicas through the store (`metaServer.store`). The store holds each
//! server's approvals; every process keeps a copy in its catalog dir and judges calls by it, so
//! no check waits for the store, and follows the store's changes into it. A replica that
//! cannot reach the store judges by its copy; a copy the store lacks (first approvals made
//! meanwhile, or a store restarted empty) is published once it answers, never over the
//! store's. `tools approve` writes to the store only, and approves nothing when it does not
//! answer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Approvals, Choice, TrustError, approve_in};
use crate::catalog::Catalog;
use crate::config::TrustMode;
use crate::store::{SharedApprovals, Valkey};

/// How often each replica looks for approvals the others changed.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);
/// Writes tried before giving up when other writers keep coming first.
const ROUNDS: usize = 5;
/// Where approvals read from the store say they came from.
const ORIGIN: &str = "<shared store>";

/// The store's approvals of `server`, parsed.
fn parse(server: &str, shared: &SharedApprovals) -> Result<Approvals, TrustError> {
    Approvals::parse(Path::new(ORIGIN), server, &shared.json)
}

/// Makes the copy of `server`'s approvals in `dir` the store's: the store's text replaces the
/// copy; a copy the store lacks is published; without either, `first` (under first-use, the
/// server's first catalog) is approved and published, unless another replica came first.
/// Returns the version shared now (`None`: the server has no approvals).
async fn sync(
    store: &Valkey,
    dir: &Path,
    server: &str,
    first: Option<&Catalog>,
) -> Result<Option<String>, TrustError> {
    for _ in 0..ROUNDS {
        if let Some(shared) = store.approvals(server).await? {
            // The store's text as it is: unusable approvals there hold every tool here too.
            let copy = std::fs::read_to_string(Approvals::path(dir, server)).ok();
            if copy.as_deref() != Some(shared.json.as_str()) {
                Approvals::write_text(dir, server, &shared.json)?;
            }
            return Ok(Some(shared.version));
        }
        let copy = Approvals::load(dir, server).ok().flatten();
        let Some(approvals) = copy.clone().or_else(|| first.map(Approvals::of)) else {
            return Ok(None);
        };
        if let Some(version) = store
            .replace_approvals(server, None, &approvals.to_json())
            .await?
        {
            if copy.is_none() {
                approvals.write(dir)?;
            }
            return Ok(Some(version));
        }
    }
    Err(TrustError::Contended(server.to_owned()))
}

/// [`super::observe`] with the approvals of `fresh`'s server taken from `store` first (and,
/// under first-use and off, the first approvals given to it, or the kinds it did not pin yet),
/// when there is a store.
pub async fn observe(
    mode: TrustMode,
    dir: &Path,
    store: Option<&Valkey>,
    fresh: &Catalog,
) -> Result<Vec<String>, TrustError> {
    if let Some(store) = store {
        let previous = Catalog::load_server(dir, &fresh.server).ok().flatten();
        let first: Vec<&Catalog> = previous.iter().chain([fresh]).collect();
        let records = mode != TrustMode::Review;
        let synced = match sync(store, dir, &fresh.server, records.then_some(first[0])).await {
            Ok(Some(_)) if records => {
                let adopt = |approvals: Option<Approvals>| {
                    Ok(approvals.and_then(|mut a| a.adopt(&first).then_some(a)))
                };
                amend(store, dir, &fresh.server, adopt).await.map(drop)
            }
            other => other.map(drop),
        };
        if let Err(e) = synced {
            tracing::warn!(server = %fresh.server, "approvals judged by the local copy: {e}");
        }
    }
    super::observe(mode, dir, fresh)
}

/// [`super::approve`] in the store (and then the copy in `dir`): nothing is approved when the
/// store does not answer.
pub async fn approve(
    store: &Valkey,
    dir: &Path,
    catalog: &Catalog,
    choice: &Choice,
) -> Result<Vec<String>, TrustError> {
    let mut names = Vec::new();
    amend(store, dir, &catalog.server, |approvals| {
        let mut approvals = approvals.unwrap_or_else(|| Approvals::empty(&catalog.server));
        names = approve_in(&mut approvals, catalog, choice)?;
        Ok(Some(approvals))
    })
    .await
    .map_err(|e| match e {
        TrustError::Store(e) => TrustError::Unshared(e),
        other => other,
    })?;
    Ok(names)
}

/// Changes `server`'s approvals in the store: `change` is given them (`None`: none shared, or
/// unusable) and returns what to write, if anything, which is written only over the version
/// read, then as the copy in `dir`. True when something was written.
async fn amend(
    store: &Valkey,
    dir: &Path,
    server: &str,
    mut change: impl FnMut(Option<Approvals>) -> Result<Option<Approvals>, TrustError>,
) -> Result<bool, TrustError> {
    for _ in 0..ROUNDS {
        let shared = store.approvals(server).await?;
        let read = shared.as_ref().and_then(|s| parse(server, s).ok());
        let Some(approvals) = change(read)? else {
            return Ok(false);
        };
        let expected = shared.as_ref().map(|s| s.version.as_str());
        if store
            .replace_approvals(server, expected, &approvals.to_json())
            .await?
            .is_some()
        {
            approvals.write(dir)?;
            return Ok(true);
        }
    }
    Err(TrustError::Contended(server.to_owned()))
}

/// `server`'s approvals as the store holds them; the copy in `dir` (and why) when the store
/// does not answer.
pub async fn load(
    store: &Valkey,
    dir: &Path,
    server: &str,
) -> (Result<Option<Approvals>, TrustError>, Option<TrustError>) {
    match store.approvals(server).await {
        Ok(shared) => (shared.map(|s| parse(server, &s)).transpose(), None),
        Err(e) => (Approvals::load(dir, server), Some(e.into())),
    }
}

/// Keeps the copies of the approvals of a replica's servers in line with the store.
pub struct Follow {
    dir: PathBuf,
    store: Valkey,
    servers: Vec<String>,
    /// The version each copy was made from.
    known: HashMap<String, String>,
    /// The last failure said for each server, so it is said once.
    said: HashMap<String, String>,
}

impl Follow {
    /// Makes every copy the store's now, before serving (when the store answers).
    pub async fn start(dir: PathBuf, store: Valkey, servers: Vec<String>) -> Self {
        let mut follow = Self {
            dir,
            store,
            servers,
            known: HashMap::new(),
            said: HashMap::new(),
        };
        follow.pass().await;
        follow
    }

    /// Follows the store's approvals of the servers `servers` names (the config may change)
    /// until the process ends.
    pub async fn run(mut self, servers: impl Fn() -> Vec<String> + Send) {
        let mut every = tokio::time::interval(FOLLOW_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        every.tick().await;
        loop {
            every.tick().await;
            self.servers = servers();
            self.pass().await;
        }
    }

    /// Syncs the copies whose approvals changed in the store, or that the store lacks.
    async fn pass(&mut self) {
        let versions = match self.store.approval_versions().await {
            Ok(versions) => versions,
            Err(e) => return tracing::debug!("approvals not followed: {e}"),
        };
        for server in &self.servers {
            let shared = versions.get(server);
            let lacked = shared.is_none() && Approvals::path(&self.dir, server).exists();
            if shared.is_none_or(|v| self.known.get(server) == Some(v)) && !lacked {
                continue;
            }
            match sync(&self.store, &self.dir, server, None).await {
                Ok(version) => {
                    self.said.remove(server);
                    match version {
                        Some(version) => self.known.insert(server.clone(), version),
                        None => self.known.remove(server),
                    };
                }
                Err(e) => {
                    let message = e.to_string();
                    if self.said.get(server) != Some(&message) {
                        tracing::warn!(server, "approvals judged by the local copy: {message}");
                        self.said.insert(server.clone(), message);
                    }
                }
            }
        }
    }
}
