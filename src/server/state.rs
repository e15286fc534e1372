//! The state one serving process shares between sessions: settings, upstream connections,
//! the catalogs (the library and its bookkeeping), the result store (local, or shared with
//! other replicas), metrics, trust, the audit log, logins offered, and budgets resolved once.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::budget::{self, Budgets, ByteEstimate, Limits, O200k, Route, TokenCounter};
use crate::config::{ServerConfig, Settings, Tokenizer};
use crate::result::{ResultHandler, ResultStore};
use crate::store::{DEFAULT_SPILL_BYTES, SharedResults, SpillStore, Valkey};
use crate::upstream::{CommandLookups, Events, Manager};

use super::caller::Caller;
use super::catalogs::Catalogs;
use super::catalogs::learning::Learner;
use super::logins::Logins;
use super::metrics::Metrics;
use crate::library::{Library, LoadReport};

/// The settings in force: swapped whole when the config file changes (see
/// `catalogs/reload.rs`); readers take a snapshot.
pub struct LiveSettings(RwLock<Arc<Settings>>);

impl LiveSettings {
    fn new(settings: Settings) -> Self {
        Self(RwLock::new(Arc::new(settings)))
    }

    /// The settings now.
    pub fn get(&self) -> Arc<Settings> {
        self.0.read().clone()
    }

    pub(in crate::server) fn set(&self, settings: Arc<Settings>) {
        *self.0.write() = settings;
    }
}

/// Shared state of one serving process.
pub struct State {
    settings: Arc<LiveSettings>,
    /// Result budgets from the settings, resolved again when they change.
    budgets: RwLock<Budgets>,
    pub manager: Arc<Manager>,
    pub results: ResultHandler,
    /// The store shared with other replicas, if one is configured.
    pub shared: Option<Valkey>,
    pub metrics: Metrics,
    /// Which tools wait for the user's approval (`metaServer.trust`).
    pub trust: crate::trust::Trust,
    /// The audit log (`metaServer.audit`), if one is configured.
    pub audit: Option<crate::audit::AuditLog>,
    /// The library and the bookkeeping on its catalogs.
    pub catalogs: Arc<Catalogs>,
    /// Logins offered to clients.
    pub(super) logins: Logins,
    /// What searches learn from use (`None`: `metaServer.learning` is off).
    pub(super) learning: Option<Arc<Learner>>,
}

impl State {
    pub fn new(settings: Settings, library: Library) -> Arc<Self> {
        Self::with_manager(settings, library, Manager::with_events)
    }

    /// Like [`Self::new`], with the upstream manager `manager` makes for these servers,
    /// reporting on the events channel it is given (tests pass in-process upstreams).
    pub(crate) fn with_manager(
        settings: Settings,
        library: Library,
        manager: impl FnOnce(&[ServerConfig], Events) -> Arc<Manager>,
    ) -> Arc<Self> {
        Self::build(settings, library, manager, None)
    }

    fn build(
        settings: Settings,
        library: Library,
        manager: impl FnOnce(&[ServerConfig], Events) -> Arc<Manager>,
        shared: Option<Valkey>,
    ) -> Arc<Self> {
        let (events, receiver) = tokio::sync::mpsc::unbounded_channel();
        let manager = manager(&settings.servers, events);
        for server in &settings.servers {
            let catalog = library.catalogs.get(&server.name);
            if let Some(revision) = catalog.and_then(|c| c.known_revision(server)) {
                manager.remember_revision(&server.name, revision);
            }
        }
        let live = Arc::new(LiveSettings::new(settings));
        let settings = live.get();
        Arc::new(Self {
            budgets: RwLock::new(budgets(&settings)),
            manager,
            results: result_handler(&settings, shared.as_ref()),
            shared,
            metrics: Metrics::default(),
            trust: crate::trust::Trust::new(settings.trust, settings.catalog_dir.clone()),
            audit: settings.audit.clone().map(crate::audit::AuditLog::new),
            catalogs: Arc::new(Catalogs::new(live.clone(), library, receiver)),
            learning: Learner::new(&settings),
            settings: live,
            logins: Logins::default(),
        })
    }

    /// The settings in force (a snapshot: a config reload swaps in new ones).
    pub fn settings(&self) -> Arc<Settings> {
        self.settings.get()
    }

    /// Puts `settings` in force: the budgets they give, the settings and the library (see
    /// [`Catalogs::reconfigure`]: `changed` servers re-indexed). The caller (a config reload)
    /// brings the upstreams in line.
    pub(super) fn set_settings(
        &self,
        settings: Settings,
        changed: &[String],
    ) -> Result<(), crate::search::SearchError> {
        *self.budgets.write() = budgets(&settings);
        self.catalogs.reconfigure(Arc::new(settings), changed)?;
        // A removed server's tools lose what they learned, a changed one's are checked again.
        if let Some(learner) = &self.learning {
            learner.recheck();
        }
        Ok(())
    }

    /// The state of one process: the library from the catalog dir, upstreams not started,
    /// results in `shared` if given (else in memory and on local disk). Also returns the servers
    /// that have no usable catalog yet and can be started; those that cannot be started as
    /// configured are marked unavailable now (see [`Self::unavailable`]; the caller says so
    /// where it matters), the others by [`Catalogs::check_launches`], which takes a path lookup
    /// per command and can wait.
    pub fn open(
        settings: Settings,
        shared: Option<Valkey>,
        (library, report): (Library, LoadReport),
    ) -> (Arc<Self>, Vec<String>) {
        for warning in &report.warnings {
            tracing::warn!("{warning}");
        }
        let state = Self::build(settings, library, Manager::with_events, shared);
        let mut lookups = CommandLookups::default();
        let missing = report
            .missing
            .into_iter()
            .filter(|name| {
                let server = state
                    .settings()
                    .servers
                    .iter()
                    .find(|s| &s.name == name)
                    .cloned();
                server
                    .is_none_or(|server| state.catalogs.check_launch(&server, &mut lookups, false))
            })
            .collect();
        (state, missing)
    }

    /// Ends embedding, lets listings in flight finish (see [`Catalogs::stop`]), then stops
    /// every upstream; what was learned and not merged yet is merged (and kept) first.
    pub async fn stop(self: &Arc<Self>) {
        if let Some(learner) = self.learning.clone() {
            let state = self.clone();
            let _ = tokio::task::spawn_blocking(move || learner.merge(&state)).await;
        }
        self.catalogs.stop().await;
        self.manager.shutdown().await;
    }

    /// Starts merging what sessions teach (see [`Learner::run`]), if learning is on.
    pub(super) fn learn(self: &Arc<Self>) {
        if let Some(learner) = self.learning.clone() {
            tokio::spawn(learner.run(Arc::downgrade(self)));
        }
    }

    /// The soft and hard limits for results on `route`, for a client whose own limit is
    /// `client` (learned per session from `initialize`).
    pub fn limits(&self, route: &Route, client: Option<usize>) -> Limits {
        self.budgets.read().limits(route, client)
    }

    /// Passes a result through result handling for `route`, within the caller's client limit;
    /// what is stored belongs to the caller's session.
    pub(super) async fn shape(
        &self,
        tool: &str,
        route: Route,
        caller: &Caller,
        result: rmcp::model::CallToolResult,
    ) -> rmcp::model::CallToolResult {
        let limits = self.limits(&route, caller.client_limit);
        self.results
            .shape(tool, &route, limits, &caller.owner, result)
            .await
    }
}

/// Result handling as the settings configure it: the tokenizer, and the result store (`shared`
/// when the settings name one and it is open, else memory and local disk).
pub(super) fn result_handler(settings: &Settings, shared: Option<&Valkey>) -> ResultHandler {
    let r = &settings.results;
    let counter: Arc<dyn TokenCounter> = match r.tokenizer {
        Tokenizer::O200k => Arc::new(O200k),
        Tokenizer::Estimate => Arc::new(ByteEstimate),
    };
    let store: Arc<dyn ResultStore> = match (shared, &settings.store) {
        (Some(valkey), Some(s)) => Arc::new(SharedResults::new(
            valkey.clone(),
            s.ttl,
            s.max_result_bytes,
        )),
        _ => Arc::new(SpillStore::new(r.ttl, r.memory_bytes, DEFAULT_SPILL_BYTES)),
    };
    ResultHandler::new(store, counter)
}

/// The result budgets the settings give: global and per-server soft limits, the hard limit.
pub(super) fn budgets(settings: &Settings) -> Budgets {
    let r = &settings.results;
    Budgets {
        default_soft: r
            .max_result_tokens
            .map_or(budget::DEFAULT_RESULT_TOKENS, |t| t as usize),
        per_server: settings
            .servers
            .iter()
            .filter_map(|s| Some((s.name.clone(), s.max_result_tokens? as usize)))
            .collect(),
        hard: r
            .hard_result_tokens
            .map_or(budget::DEFAULT_HARD_TOKENS, |t| t as usize),
    }
}
