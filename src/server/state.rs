//! The state one serving process shares between sessions: settings, upstream connections,
//! the library (swapped whole on a refresh), the result store (local, or shared with other
//! replicas), metrics, and budgets resolved once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};
use std::time::Duration;

use crate::budget::{self, Budgets, ByteEstimate, Limits, O200k, Route, TokenCounter};
use crate::config::{ServerConfig, Settings, Tokenizer};
use crate::result::{ResultHandler, ResultStore};
use crate::store::{DEFAULT_SPILL_BYTES, SharedResults, SpillStore, Valkey};
use crate::upstream::{CommandLookups, Events, Manager};

use super::caller::Caller;
use super::logins::Logins;
use super::metrics::Metrics;
use crate::library::{Library, LoadReport};
use crate::search::embed::{EmbedError, Embedder};

/// How long listings still running may finish after the client left, so their catalogs are
/// written (a one-shot client's servers are not listed again at every start).
const LISTING_GRACE: Duration = Duration::from_secs(5);
/// Tools without a stored vector that start-up embeds before serving (a few ms each); with
/// more, they are embedded in the background.
const START_EMBED_MOST: usize = 64;
/// How long stopping waits for the model to finish loading or the tool batch being embedded
/// (ONNX Runtime must not be torn down under them at exit).
const EMBED_GRACE: Duration = Duration::from_secs(5);

/// Shared state of one serving process.
pub struct State {
    pub settings: Arc<Settings>,
    /// Result budgets from the settings, resolved once.
    budgets: Budgets,
    pub manager: Arc<Manager>,
    pub results: ResultHandler,
    /// The store shared with other replicas, if one is configured.
    pub shared: Option<Valkey>,
    pub metrics: Metrics,
    /// Which tools wait for the user's approval (`metaServer.trust`).
    pub trust: crate::trust::Trust,
    /// The audit log (`metaServer.audit`), if one is configured.
    pub audit: Option<crate::audit::AuditLog>,
    /// Per server: tool lists fetched by this process, catalogs taken from the shared store.
    catalog_counts: Mutex<BTreeMap<String, (u64, u64)>>,
    /// The version of each shared catalog this process has (by `<server>:<fingerprint>`).
    pub(super) shared_versions: Mutex<HashMap<String, String>>,
    library: RwLock<Arc<Library>>,
    /// Counts the libraries swapped in, for whoever follows catalog changes.
    swapped: tokio::sync::watch::Sender<u64>,
    rebuilding: Mutex<()>,
    pub(super) indexing: Mutex<BTreeSet<String>>,
    /// Servers whose tools rank higher because a skill that needs them was read.
    pub(super) boosted: Mutex<BTreeSet<String>>,
    /// Servers whose tool list changed while they were disconnected.
    pub(super) dirty: Mutex<BTreeSet<String>>,
    /// Upstream events, taken by the freshness watcher.
    pub(super) events: Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<crate::upstream::Event>>>,
    /// The embedding model, once loading was tried (`None`: BM25 only).
    embedder: OnceLock<Option<Arc<Embedder>>>,
    /// Held while the model loads and tool vectors are computed, so only one thread does it
    /// and stopping can wait for it.
    embedding: Mutex<()>,
    /// Set when serving ends: no more tool vectors are computed.
    stopping: AtomicBool,
    /// Listings of servers without a catalog, which outlive the request that started them.
    pub(super) tasks: tokio_util::task::TaskTracker,
    /// One lock per server listed for lack of a catalog, so it is listed once.
    listing: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Why servers could not be listed (cannot start, needs login, ...), until they are.
    unavailable: Mutex<BTreeMap<String, String>>,
    /// Logins offered to clients.
    pub(super) logins: Logins,
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
        Arc::new(Self {
            budgets: budgets(&settings),
            manager,
            results: result_handler(&settings, shared.as_ref()),
            shared,
            metrics: Metrics::default(),
            trust: crate::trust::Trust::new(settings.trust, settings.catalog_dir.clone()),
            audit: settings.audit.clone().map(crate::audit::AuditLog::new),
            catalog_counts: Mutex::new(BTreeMap::new()),
            shared_versions: Mutex::new(HashMap::new()),
            settings: Arc::new(settings),
            library: RwLock::new(Arc::new(library)),
            swapped: tokio::sync::watch::Sender::new(0),
            rebuilding: Mutex::new(()),
            indexing: Mutex::new(BTreeSet::new()),
            dirty: Mutex::new(BTreeSet::new()),
            boosted: Mutex::new(BTreeSet::new()),
            events: Mutex::new(Some(receiver)),
            embedder: OnceLock::new(),
            embedding: Mutex::new(()),
            stopping: AtomicBool::new(false),
            tasks: tokio_util::task::TaskTracker::new(),
            listing: Mutex::new(HashMap::new()),
            unavailable: Mutex::new(BTreeMap::new()),
            logins: Logins::default(),
        })
    }

    /// The state of one process: the library from the catalog dir, upstreams not started,
    /// results in `shared` if given (else in memory and on local disk). Also returns the servers
    /// that have no usable catalog yet and can be started; those that cannot be started as
    /// configured are marked unavailable now (see [`Self::unavailable`]; the caller says so
    /// where it matters), the others by [`Self::check_launches`], which takes a path lookup
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
                let server = state.settings.servers.iter().find(|s| &s.name == name);
                server.is_none_or(|server| state.check_launch(server, &mut lookups, false))
            })
            .collect();
        (state, missing)
    }

    /// Marks the servers with a catalog that cannot be started as configured (their command is
    /// not found, ...) unavailable, so searches say why their tools cannot be called. Blocking:
    /// `serve` runs it in the background once it answers.
    pub fn check_launches(&self) {
        let library = self.library();
        let mut lookups = CommandLookups::default();
        for server in &self.settings.servers {
            if library.catalogs.contains_key(&server.name) {
                self.check_launch(server, &mut lookups, true);
            }
        }
    }

    /// Whether `server` can be started as configured; if not, it is marked unavailable (and
    /// with `warn`, said on stderr).
    fn check_launch(
        &self,
        server: &ServerConfig,
        lookups: &mut CommandLookups,
        warn: bool,
    ) -> bool {
        match crate::upstream::check_launch(server, lookups) {
            Ok(()) => true,
            Err(reason) => {
                if warn {
                    tracing::warn!(server = %server.name, "cannot be started: {reason}");
                }
                self.set_unavailable(&server.name, Some(reason.to_string()));
                false
            }
        }
    }

    /// The lock that makes one listing of `server` at a time.
    pub(super) fn listing_lock(&self, server: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.listing
            .lock()
            .entry(server.to_owned())
            .or_default()
            .clone()
    }

    /// Records why `server` cannot be listed, or (`None`) that it can again.
    pub(super) fn set_unavailable(&self, server: &str, reason: Option<String>) {
        let mut unavailable = self.unavailable.lock();
        match reason {
            Some(reason) => unavailable.insert(server.to_owned(), reason),
            None => unavailable.remove(server),
        };
    }

    /// Configured servers meta-server cannot serve now, with why: entries the config could
    /// not take, then servers whose listing failed. Sorted within each kind.
    pub fn unavailable(&self) -> Vec<(String, String)> {
        let skipped = self
            .settings
            .skipped
            .iter()
            .map(|s| (s.key.clone(), s.reason.clone()));
        let failed = self.unavailable.lock().clone().into_iter();
        skipped.chain(failed).collect()
    }

    /// Ends embedding (within [`EMBED_GRACE`]), lets listings in flight finish (within
    /// [`LISTING_GRACE`]), then stops every upstream.
    pub async fn stop(&self) {
        self.stop_embedding().await;
        self.tasks.close();
        if !self.tasks.is_empty() {
            tracing::info!("letting listings in flight finish");
            if tokio::time::timeout(LISTING_GRACE, self.tasks.wait())
                .await
                .is_err()
            {
                tracing::warn!("listings unfinished after {LISTING_GRACE:?}; stopping anyway");
            }
        }
        self.manager.shutdown().await;
    }

    /// The embedding model, loaded on first use (see [`crate::library::embedder`]); `None`:
    /// BM25 only.
    fn embedder(&self) -> Option<Arc<Embedder>> {
        self.embedder
            .get_or_init(|| crate::library::embedder(&self.settings))
            .clone()
    }

    /// The model (loading it if needed), unless serving is ending; call it holding `embedding`.
    fn embedder_unless_stopping(&self) -> Option<Arc<Embedder>> {
        if self.stopping.load(Ordering::SeqCst) {
            return None;
        }
        let embedder = self.embedder()?;
        (!self.stopping.load(Ordering::SeqCst)).then_some(embedder)
    }

    /// Stops embedding and waits (within [`EMBED_GRACE`]) for the model load or the batch in
    /// progress: the process must not exit under ONNX Runtime while it runs.
    async fn stop_embedding(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let deadline = tokio::time::Instant::now() + EMBED_GRACE;
        loop {
            // Again at each turn: a model that was loading is stopped once loaded.
            if let Some(Some(embedder)) = self.embedder.get() {
                embedder.stop();
            }
            if self.embedding.try_lock().is_some() {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    "tool vectors still being computed after {EMBED_GRACE:?}; stopping anyway"
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// At start-up, on a thread of its own: loads the model and attaches the tool vectors that
    /// `index` persisted (embedding at most [`START_EMBED_MOST`] tools that have none, such as
    /// the built-in ones). Nothing waits for it: searches answer by words (`mode: "bm25"`)
    /// until the vectors are attached (~0.4 s with the model load), then hybrid. Anything more
    /// is embedded in the background while BM25 answers.
    pub fn embed_at_start(self: &Arc<Self>) {
        let state = self.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("vectors".into())
            .spawn(move || state.load_start_vectors())
        {
            tracing::warn!("cannot start the thread that loads tool vectors, BM25 only: {e}");
        }
    }

    fn load_start_vectors(self: &Arc<Self>) {
        // A library swapped in meanwhile is embedded after this, by `embed_library`.
        let _one = self.embedding.lock();
        let Some(embedder) = self.embedder_unless_stopping() else {
            return;
        };
        let started = crate::clock::Instant::now();
        let library = self.library();
        match library.embed_within(embedder, Some(&self.settings.catalog_dir), START_EMBED_MOST) {
            Ok(Some(stats)) => tracing::info!(
                tools = stats.tools,
                embedded = stats.embedded,
                took = ?started.elapsed(),
                "tool vectors loaded; search is hybrid"
            ),
            Ok(None) => {
                tracing::info!("tool vectors missing; BM25 answers until they are computed");
                self.embed_in_background();
            }
            Err(e @ EmbedError::Stopped) => tracing::debug!("{e}"),
            Err(e) => tracing::warn!("tool vectors not loaded, BM25 only: {e}"),
        }
    }

    /// Loads the model if needed and computes the tool vectors of the current library (and of
    /// any library swapped in meanwhile), persisting them next to the catalogs. Blocking.
    pub fn embed_library(&self) {
        let _one = self.embedding.lock();
        let Some(embedder) = self.embedder_unless_stopping() else {
            return;
        };
        loop {
            let library = self.library();
            if !library.is_hybrid() {
                let started = crate::clock::Instant::now();
                match library.embed(embedder.clone(), Some(&self.settings.catalog_dir)) {
                    Ok(stats) => tracing::info!(
                        tools = stats.tools,
                        embedded = stats.embedded,
                        took = ?started.elapsed(),
                        "tool vectors ready; search is hybrid"
                    ),
                    Err(e @ EmbedError::Stopped) => {
                        tracing::debug!("{e}");
                        return;
                    }
                    Err(e) => {
                        tracing::warn!("tool vectors not computed, BM25 only: {e}");
                        return;
                    }
                }
            }
            if Arc::ptr_eq(&library, &self.library()) {
                embedder.end_documents();
                return;
            }
        }
    }

    /// [`Self::embed_library`] on a thread of its own: BM25 answers until vectors are ready.
    /// After a library swap this is quick: unchanged tools come from the vector files.
    pub fn embed_in_background(self: &Arc<Self>) {
        if self.embedder.get().is_some_and(Option::is_none) {
            return;
        }
        let state = self.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("embed".into())
            .spawn(move || state.embed_library())
        {
            tracing::warn!("cannot start the embedding thread, BM25 only: {e}");
        }
    }

    /// The soft and hard limits for results on `route`, for a client whose own limit is
    /// `client` (learned per session from `initialize`).
    pub fn limits(&self, route: &Route, client: Option<usize>) -> Limits {
        self.budgets.limits(route, client)
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

    /// Counts a tool list this process fetched from `server` (`listed`) or a catalog of it
    /// taken from the shared store.
    pub(super) fn count_catalog(&self, server: &str, listed: bool) {
        let mut counts = self.catalog_counts.lock();
        let entry = counts.entry(server.to_owned()).or_default();
        if listed {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }

    /// Per server: (tool lists fetched by this process, catalogs taken from the shared store).
    pub fn catalog_counts(&self) -> BTreeMap<String, (u64, u64)> {
        self.catalog_counts.lock().clone()
    }

    /// The quarantine of `entry`'s tool, if it waits for the user's approval.
    pub fn quarantine(
        &self,
        library: &Library,
        entry: &crate::library::Entry,
    ) -> Option<crate::trust::Quarantine> {
        let catalog = library.catalogs.get(&entry.server)?;
        self.trust.quarantine(catalog, &entry.def.name)
    }

    /// The current library (a snapshot; cheap to hold across a call).
    pub fn library(&self) -> Arc<Library> {
        self.library.read().clone()
    }

    /// Swaps in a library where `catalog` replaces its server's previous one.
    pub(super) fn replace_catalog(
        &self,
        catalog: crate::catalog::Catalog,
    ) -> Result<(), crate::search::SearchError> {
        // One rebuild at a time, so concurrent refreshes never drop each other's catalogs;
        // searches keep reading the old library until the swap.
        let _writer = self.rebuilding.lock();
        let library = self
            .library()
            .with_catalog(&self.settings.servers, catalog)?;
        *self.library.write() = Arc::new(library);
        self.swapped.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Changes each time a catalog replaces its server's previous one.
    pub(super) fn library_swaps(&self) -> tokio::sync::watch::Receiver<u64> {
        self.swapped.subscribe()
    }

    /// Saves the search index beside the catalogs on a blocking thread unless the saved one
    /// is the current library's already; a failure is a warning (the next start rebuilds).
    pub(super) fn save_index_in_background(self: &Arc<Self>) {
        let state = self.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = state.library().save_index(&state.settings.catalog_dir) {
                tracing::warn!("{e}; the next start builds the index again");
            }
        });
    }

    /// Whether `server`'s catalog should be re-listed on its next connection: missing, made
    /// from another launch config, or changed while disconnected.
    pub fn is_stale(&self, server: &str) -> bool {
        let Some(config) = self.settings.server(server) else {
            return false;
        };
        let library = self.library();
        let fresh = library
            .catalogs
            .get(server)
            .is_some_and(|c| !c.is_stale(config, std::time::SystemTime::now()));
        !fresh || self.dirty.lock().contains(server)
    }

    /// Servers being indexed in the background right now, sorted.
    pub fn indexing(&self) -> Vec<String> {
        self.indexing.lock().iter().cloned().collect()
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

#[cfg(test)]
// A guard held across awaits stands for the embedding thread holding the lock.
#[allow(clippy::await_holding_lock)]
mod tests {
    use super::*;

    fn state() -> Arc<State> {
        let settings = Settings::parse(
            std::path::Path::new("config.json"),
            r#"{"metaServer": {"skillsDirs": []}, "mcpServers": {}}"#,
        )
        .expect("config");
        let library = Library::build_with(
            &[],
            BTreeMap::new(),
            None,
            Vec::new(),
            crate::search::SearchOptions::default(),
        )
        .expect("library");
        State::new(settings, library)
    }

    #[tokio::test]
    async fn searches_answer_by_words_while_the_model_loads() {
        let state = state();
        // Held by the start's thread while the model loads and the vectors are attached.
        let _loading = state.embedding.lock();
        let args = serde_json::from_value(serde_json::json!({"query": "run a script"})).unwrap();
        let reply =
            crate::server::tools::search::run(&state, &Default::default(), 10_000, args).await;
        let found = reply.structured_content.expect("search result");
        assert_eq!(found["mode"], "bm25", "{found}");
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_waits_for_the_embedding_in_progress_then_embeds_no_more() {
        let state = state();
        let started = tokio::time::Instant::now();
        let embedding = state.embedding.lock();
        let stopping = tokio::spawn({
            let state = state.clone();
            async move { state.stop().await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            !stopping.is_finished(),
            "stop waits for the batch in progress"
        );
        drop(embedding);
        stopping.await.unwrap();
        assert!(started.elapsed() < EMBED_GRACE);
        // Nothing is embedded after the stop: the model is not even loaded.
        state.embed_library();
        assert!(state.embedder.get().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_waits_for_embedding_a_bounded_time() {
        let state = state();
        let started = tokio::time::Instant::now();
        let _stuck = state.embedding.lock();
        state.stop().await;
        assert!(started.elapsed() >= EMBED_GRACE);
    }
}
