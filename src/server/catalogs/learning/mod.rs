//! Search that learns from use, in a serving process: each session's searches, and the
//! successful calls (and, weighing half, details reads) of tools they showed, become evidence
//! ([`crate::learning`]). A moment later it is merged into the evidence beside the catalogs
//! (and in the shared store), bounded, and the library re-indexes the tools whose learned
//! queries changed. Nothing of it is ever shown to the model.
//!
//! A session is what the learned evidence counts once: an MCP session over HTTP, the process
//! over stdio; a 2026-07-28 client has none, so its principal stands for it, and a call
//! teaches only within [`crate::learning::WINDOW`] of the search that showed its tool.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::checksum::{self, Checksum};
use crate::config::{RESERVED_SERVER, SKILL_SERVER, Settings};
use crate::learning::{self, Contribution, Evidence, Learned, Sessions, Teaching, Weight};
use crate::library::{Entry, Library, SEPARATOR};

mod shared;
#[cfg(test)]
mod tests;

use crate::server::State;
use crate::server::access::Access;
use crate::server::caller::{Teacher, Who};

/// How long after a selection its evidence is merged and searched: selections close together
/// are applied in one re-index.
const SETTLE: Duration = Duration::from_secs(1);
/// How often the evidence beside the catalogs (or in the store) is looked at for changes made
/// elsewhere (`meta-server learned forget`, another process, another replica).
pub(super) const FOLLOW: Duration = Duration::from_secs(5);
/// Selections waiting to be merged; more are dropped until the next merge.
const PENDING: usize = 10_000;

/// Whether calls of tools of `server` teach anything: meta-server's own tools and skills are
/// not upstream tools.
fn learns_for(tool: &str) -> bool {
    tool.split_once(SEPARATOR)
        .is_some_and(|(server, _)| server != RESERVED_SERVER && server != SKILL_SERVER)
}

/// A change of a file, as far as a stat tells.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &std::path::Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// What one process learns.
pub struct Learner {
    dir: PathBuf,
    sessions: Mutex<Sessions>,
    pending: Mutex<Vec<Teaching>>,
    wake: Notify,
    /// Set when the evidence must be checked against the catalogs (at start, after a catalog
    /// changed).
    recheck: AtomicBool,
    held: Mutex<Held>,
    /// Fingerprints of tools by name and checksum of their text: a tool's is computed once.
    fingerprints: Mutex<HashMap<(String, Checksum), String>>,
}

/// The evidence as this process last read or wrote it.
#[derive(Default)]
struct Held {
    evidence: Evidence,
    /// The evidence file then.
    seen: Stamp,
    /// The file could not be read as evidence (damaged, or a newer format): it is left
    /// alone until it changes.
    blocked: bool,
    /// What was last taken from the shared store.
    mirror: shared::Mirror,
}

/// Fingerprints cached; past this the cache starts again.
const FINGERPRINTS: usize = 20_000;

impl Learner {
    /// The learner of a process serving `settings`; `None` when learning is off.
    pub(in crate::server) fn new(settings: &Settings) -> Option<Arc<Self>> {
        settings.learning.then(|| {
            Arc::new(Self {
                dir: settings.catalog_dir.clone(),
                sessions: Mutex::default(),
                pending: Mutex::default(),
                wake: Notify::new(),
                recheck: AtomicBool::new(true),
                held: Mutex::default(),
                fingerprints: Mutex::default(),
            })
        })
    }

    /// Records that `teacher` searched `query` and was shown `tools`.
    pub(in crate::server) fn searched(&self, teacher: &Teacher, query: &str, tools: &[String]) {
        let now = crate::clock::Instant::now();
        self.sessions
            .lock()
            .searched(&teacher.session, query, tools, now);
    }

    /// Records that `teacher` selected `entry` (called it successfully, or read its details):
    /// evidence for the query of the latest search that showed it, if one did. A tool
    /// `access` does not see teaches nothing.
    pub(in crate::server) fn selected(
        &self,
        teacher: &Teacher,
        access: &Access,
        entry: &Entry,
        weight: Weight,
    ) {
        let tool = entry.qualified.as_str();
        if !learns_for(tool) || !access.sees(tool) {
            return;
        }
        let now = crate::clock::Instant::now();
        let Some(query) = self
            .sessions
            .lock()
            .query_for(&teacher.session, tool, now)
            .map(str::to_owned)
        else {
            return;
        };
        let teaching = Teaching {
            tool: tool.to_owned(),
            fingerprint: self.fingerprint(entry),
            query,
            by: Contribution {
                principal: teacher.principal.to_string(),
                session: teacher.session_digest.to_string(),
                weight: weight.value(),
                at: learning::now_secs(),
            },
        };
        let mut pending = self.pending.lock();
        if pending.len() < PENDING {
            pending.push(teaching);
            drop(pending);
            self.wake.notify_one();
        }
    }

    /// Asks for the evidence to be checked against the catalogs soon (a catalog changed).
    pub(in crate::server) fn recheck(&self) {
        self.recheck.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    fn fingerprint(&self, entry: &Entry) -> String {
        let key = (
            entry.qualified.clone(),
            checksum::of(entry.def.raw.text().as_bytes()),
        );
        if let Some(f) = self.fingerprints.lock().get(&key) {
            return f.clone();
        }
        let f = learning::fingerprint(&entry.def);
        let mut cache = self.fingerprints.lock();
        if cache.len() >= FINGERPRINTS {
            cache.clear();
        }
        cache.insert(key, f.clone());
        f
    }

    /// Merges what was selected since the last merge into the evidence beside the catalogs
    /// (read again first when another process or `learned forget` changed it) or, with a
    /// shared store, into the store's (and follows the store's into the copy beside the
    /// catalogs); drops the evidence of tools that changed or whose server is gone, keeps
    /// within the bounds, writes it, and swaps in a library that searches it. Blocking; with
    /// nothing to do it is cheap (a stat, or one read of the store's generation).
    pub(in crate::server) fn merge(&self, state: &State) {
        let path = learning::path(&self.dir);
        let pending = std::mem::take(&mut *self.pending.lock());
        let recheck = self.recheck.swap(false, Ordering::SeqCst);
        let store = state.shared.as_ref();
        let stamp_then = stamp(&path);
        if store.is_none() && pending.is_empty() {
            let held = self.held.lock();
            // Nothing taught, the file as this process left it (or none, and nothing held).
            let unchanged = stamp_then == held.seen;
            if unchanged && (!recheck || held.evidence.is_empty()) {
                return;
            }
        }
        let now = learning::now_secs();
        let library = state.catalogs.library();
        let lock = learning::lock(&self.dir);
        let mut held = self.held.lock();
        let Held {
            evidence,
            seen,
            blocked,
            mirror,
        } = &mut *held;
        let before = evidence.clone();
        // What this process teaches its copy itself: everything without a store (or when the
        // store did not answer), else what could not be written there.
        let mut local = pending.clone();
        if let Some(store) = store {
            let handle = tokio::runtime::Handle::current();
            let failed = handle.block_on(shared::publish(store, pending, now));
            // Written to the store at the next merge.
            self.pending.lock().extend(failed.iter().cloned());
            let followed = handle.block_on(shared::follow(store, evidence, mirror));
            match followed {
                Ok(()) => local = failed,
                Err(e) => tracing::debug!("learned evidence not followed: {e}"),
            }
        }
        // The file is the evidence without a store, and the start's copy when the store has
        // not answered yet.
        let stamp_now = stamp(&path);
        if (store.is_none() || !mirror.has_followed()) && stamp_now != *seen {
            match Evidence::load(&self.dir) {
                Ok(read) => {
                    *evidence = read;
                    *blocked = false;
                }
                Err(e) => {
                    tracing::warn!("{e}; what is learned now is kept in memory only");
                    *blocked = true;
                }
            }
            *seen = stamp_now;
        }
        for teaching in local {
            evidence.teach(teaching);
        }
        self.prune(evidence, &state.settings(), &library);
        evidence.bound(now);
        if *evidence != before && !*blocked {
            if let Err(e) = evidence.save(&self.dir) {
                tracing::warn!("{e}; what was learned is kept in memory only");
            }
            *seen = stamp(&path);
        }
        drop(lock);
        let learned = Arc::new(Learned::of(evidence));
        drop(held);
        if *learned != **library.learned()
            && let Err(e) = state.catalogs.replace_learned(learned)
        {
            tracing::warn!("search does not use what it learned yet: {e}");
        }
    }

    /// Drops the evidence of tools whose server is not configured, or whose tool is gone or
    /// changed (a server without a catalog yet keeps its evidence until it has one).
    fn prune(&self, evidence: &mut Evidence, settings: &Settings, library: &Library) {
        evidence.retain(|tool, held| {
            let Some((server, _)) = tool.split_once(SEPARATOR) else {
                return false;
            };
            if settings.server(server).is_none() {
                return false;
            }
            if !library.catalogs.contains_key(server) {
                return true;
            }
            library
                .get(tool)
                .is_some_and(|entry| self.fingerprint(entry) == held.fingerprint)
        });
    }

    /// Merges at start, then whenever selections wait (after [`SETTLE`]) or the evidence may
    /// have changed elsewhere (every [`FOLLOW`]), until the process ends.
    pub(in crate::server) async fn run(self: Arc<Self>, state: std::sync::Weak<State>) {
        loop {
            let Some(strong) = state.upgrade() else {
                return;
            };
            let learner = self.clone();
            let merged = tokio::task::spawn_blocking(move || learner.merge(&strong)).await;
            if let Err(e) = merged {
                tracing::warn!("learning stopped: {e}");
                return;
            }
            tokio::select! {
                () = self.wake.notified() => tokio::time::sleep(SETTLE).await,
                () = tokio::time::sleep(FOLLOW) => {}
            }
        }
    }
}

/// Teaches what `who` was shown by a search for `query` (the hits' names in `reply`).
pub(in crate::server) fn searched(
    state: &State,
    who: &Who,
    query: &str,
    reply: &rmcp::model::CallToolResult,
) {
    if let (Some(learner), Some(teacher)) = (&state.learning, &who.teacher) {
        learner.searched(teacher, query, &names(reply, "hits"));
    }
}

/// Teaches that `who` selected the tools `names` (called one, or read their details).
pub(in crate::server) fn selected<'a>(
    state: &State,
    who: &Who,
    names: impl IntoIterator<Item = &'a str>,
    weight: Weight,
) {
    let (Some(learner), Some(teacher)) = (&state.learning, &who.teacher) else {
        return;
    };
    let library = state.catalogs.library();
    for name in names {
        if let Some(entry) = library.get(name) {
            learner.selected(teacher, &who.access, entry, weight);
        }
    }
}

/// The `name` of each item of the array `field` of a meta-tool's structured result.
pub(in crate::server) fn names(reply: &rmcp::model::CallToolResult, field: &str) -> Vec<String> {
    reply
        .structured_content
        .as_ref()
        .and_then(|c| c.get(field))
        .and_then(serde_json::Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get("name")?.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
