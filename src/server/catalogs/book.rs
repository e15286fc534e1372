//! The catalogs one process serves: the library (swapped whole on a refresh), its tool
//! vectors, and the books kept on the servers behind it (which are being indexed, changed
//! while disconnected, boosted by a skill, unavailable, listed here or taken from the store).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use super::vectors::Vectors;
use crate::catalog::Catalog;
use crate::config::{ServerConfig, Settings};
use crate::learning::Learned;
use crate::library::Library;
use crate::search::SearchError;
use crate::server::state::LiveSettings;
use crate::upstream::{CommandLookups, Event};

/// How long listings still running may finish after the client left, so their catalogs are
/// written (a one-shot client's servers are not listed again at every start).
const LISTING_GRACE: Duration = Duration::from_secs(5);

/// The library and all bookkeeping on the catalogs behind it.
pub struct Catalogs {
    settings: Arc<LiveSettings>,
    library: RwLock<Arc<Library>>,
    /// Counts the libraries swapped in, for whoever follows catalog changes.
    swapped: watch::Sender<u64>,
    rebuilding: Mutex<()>,
    vectors: Vectors,
    /// Per server: tool lists fetched by this process, catalogs taken from the shared store.
    counts: Mutex<BTreeMap<String, (u64, u64)>>,
    /// The version of each shared catalog this process has (by `<server>:<fingerprint>`).
    shared_versions: Mutex<HashMap<String, String>>,
    /// Servers being indexed in the background or connected at start-up: the freshness
    /// watcher leaves them alone.
    indexing: Mutex<BTreeSet<String>>,
    /// Servers whose tools rank higher because a skill that needs them was read.
    boosted: Mutex<BTreeSet<String>>,
    /// Servers whose tool list changed while they were disconnected.
    dirty: Mutex<BTreeSet<String>>,
    /// Upstream events, taken by the freshness watcher.
    events: Mutex<Option<UnboundedReceiver<Event>>>,
    /// Listings of servers without a catalog, which outlive the request that started them.
    tasks: TaskTracker,
    /// One lock per server listed for lack of a catalog, so it is listed once.
    listing: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Why servers could not be listed (cannot start, needs login, ...), until they are;
    /// shared with searches, copied when it changes.
    unavailable: Mutex<Arc<BTreeMap<String, String>>>,
}

impl Catalogs {
    /// Serves `library` for the servers `settings` configures, following `events`.
    pub(in crate::server) fn new(
        settings: Arc<LiveSettings>,
        library: Library,
        events: UnboundedReceiver<Event>,
    ) -> Self {
        Self {
            settings,
            library: RwLock::new(Arc::new(library)),
            swapped: watch::Sender::new(0),
            rebuilding: Mutex::new(()),
            vectors: Vectors::default(),
            counts: Mutex::new(BTreeMap::new()),
            shared_versions: Mutex::new(HashMap::new()),
            indexing: Mutex::new(BTreeSet::new()),
            boosted: Mutex::new(BTreeSet::new()),
            dirty: Mutex::new(BTreeSet::new()),
            events: Mutex::new(Some(events)),
            tasks: TaskTracker::new(),
            listing: Mutex::new(HashMap::new()),
            unavailable: Mutex::default(),
        }
    }

    /// The settings in force (a snapshot).
    pub fn settings(&self) -> Arc<Settings> {
        self.settings.get()
    }

    /// The current library (a snapshot; cheap to hold across a call).
    pub fn library(&self) -> Arc<Library> {
        self.library.read().clone()
    }

    /// Swaps in a library where `catalog` replaces its server's previous one.
    pub(in crate::server) fn replace_catalog(&self, catalog: Catalog) -> Result<(), SearchError> {
        // One rebuild at a time, so concurrent refreshes never drop each other's catalogs;
        // searches keep reading the old library until the swap.
        let _writer = self.rebuilding.lock();
        let settings = self.settings();
        if settings.server(&catalog.server).is_none() {
            // Listed just before a config change removed the server.
            tracing::debug!(server = %catalog.server, "catalog of a server no longer configured dropped");
            return Ok(());
        }
        let library = self.library().with_catalog(&settings.servers, catalog)?;
        *self.library.write() = Arc::new(library);
        self.swapped.send_modify(|n| *n += 1);
        Ok(())
    }

    /// Swaps in a library that searches the `learned` queries (only the tools whose learned
    /// queries changed are re-indexed; tool vectors are kept). Blocking when new learned
    /// queries are embedded.
    pub(in crate::server) fn replace_learned(
        self: &Arc<Self>,
        learned: Arc<Learned>,
    ) -> Result<(), SearchError> {
        let _writer = self.rebuilding.lock();
        let settings = self.settings();
        let dir = Some(settings.catalog_dir.as_path());
        let current = self.library();
        let Some(library) = current.with_learned(&settings.servers, learned, dir)? else {
            return Ok(());
        };
        // Vectors still loading (or off) are attached by the embedding that follows.
        let hybrid = library.is_hybrid();
        *self.library.write() = Arc::new(library);
        self.swapped.send_modify(|n| *n += 1);
        if !hybrid {
            self.embed_in_background();
        }
        Ok(())
    }

    /// Puts `settings` in force with a library to match: the catalogs of servers no longer
    /// configured leave it (and their bookkeeping goes), those of `changed` are indexed again
    /// under their new config. Under the rebuild lock, so no listing in flight swaps in a
    /// library of the old config meanwhile.
    pub(in crate::server) fn reconfigure(
        &self,
        settings: Arc<Settings>,
        changed: &[String],
    ) -> Result<(), SearchError> {
        let _writer = self.rebuilding.lock();
        let library = self.library().reconfigured(&settings.servers, changed)?;
        let configured = |name: &String| settings.server(name).is_some();
        let mut unavailable = self.unavailable.lock();
        if (unavailable.keys()).any(|name| !configured(name) || changed.contains(name)) {
            Arc::make_mut(&mut unavailable)
                .retain(|name, _| configured(name) && !changed.contains(name));
        }
        drop(unavailable);
        self.dirty.lock().retain(configured);
        self.boosted.lock().retain(configured);
        self.settings.set(settings);
        if let Some(library) = library {
            *self.library.write() = Arc::new(library);
            self.swapped.send_modify(|n| *n += 1);
        }
        Ok(())
    }

    /// Changes each time a catalog replaces its server's previous one.
    pub(in crate::server) fn library_swaps(&self) -> watch::Receiver<u64> {
        self.swapped.subscribe()
    }

    /// Saves the search index beside the catalogs on a blocking thread unless the saved one
    /// is the current library's already; a failure is a warning (the next start rebuilds).
    pub(in crate::server) fn save_index_in_background(self: &Arc<Self>) {
        let catalogs = self.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = catalogs
                .library()
                .save_index(&catalogs.settings().catalog_dir)
            {
                tracing::warn!("{e}; the next start builds the index again");
            }
        });
    }

    /// Whether `server`'s catalog should be re-listed on its next connection: missing, made
    /// from another launch config, or changed while disconnected.
    pub fn is_stale(&self, server: &str) -> bool {
        let settings = self.settings();
        let Some(config) = settings.server(server) else {
            return false;
        };
        let library = self.library();
        let fresh = library
            .catalogs
            .get(server)
            .is_some_and(|c| !c.is_stale(config, std::time::SystemTime::now()));
        !fresh || self.dirty.lock().contains(server)
    }

    /// Marks `server` as changed while disconnected: re-listed on its next connection.
    pub(in crate::server) fn mark_dirty(&self, server: String) {
        self.dirty.lock().insert(server);
    }

    /// Forgets that `server` changed while disconnected (it is being listed).
    pub(in crate::server) fn clear_dirty(&self, server: &str) {
        self.dirty.lock().remove(server);
    }

    /// Servers being indexed in the background right now, sorted.
    pub fn indexing(&self) -> Vec<String> {
        self.indexing.lock().iter().cloned().collect()
    }

    /// Whether `server` is being indexed in the background.
    pub(in crate::server) fn is_indexing(&self, server: &str) -> bool {
        self.indexing.lock().contains(server)
    }

    /// Marks `servers` as being indexed (so the freshness watcher leaves them alone).
    pub(in crate::server) fn start_indexing(&self, servers: impl IntoIterator<Item = String>) {
        self.indexing.lock().extend(servers);
    }

    /// Marks `server` as no longer being indexed.
    pub(in crate::server) fn end_indexing(&self, server: &str) {
        self.indexing.lock().remove(server);
    }

    /// Ranks the tools of `servers` higher from now on.
    pub(in crate::server) fn boost(&self, servers: impl IntoIterator<Item = String>) {
        self.boosted.lock().extend(servers);
    }

    /// The servers whose tools rank higher.
    pub(in crate::server) fn boosted(&self) -> BTreeSet<String> {
        self.boosted.lock().clone()
    }

    /// The upstream events, to the first who asks (the freshness watcher).
    pub(in crate::server) fn take_events(&self) -> Option<UnboundedReceiver<Event>> {
        self.events.lock().take()
    }

    /// Runs a listing as a task that outlives the request that started it; stopping lets it
    /// finish within [`LISTING_GRACE`].
    pub(in crate::server) fn track<F>(&self, listing: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(listing)
    }

    /// The lock that makes one listing of `server` at a time.
    pub(in crate::server) fn listing_lock(&self, server: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.listing
            .lock()
            .entry(server.to_owned())
            .or_default()
            .clone()
    }

    /// Records why `server` cannot be listed, or (`None`) that it can again.
    pub(in crate::server) fn set_unavailable(&self, server: &str, reason: Option<String>) {
        let mut unavailable = self.unavailable.lock();
        match reason {
            Some(reason) => Arc::make_mut(&mut unavailable).insert(server.to_owned(), reason),
            None if unavailable.contains_key(server) => {
                Arc::make_mut(&mut unavailable).remove(server)
            }
            None => None,
        };
    }

    /// Configured servers meta-server cannot serve now, with why: entries the config could
    /// not take, then servers whose listing failed. Sorted within each kind.
    pub fn unavailable(&self) -> Vec<(String, String)> {
        let (settings, failed) = (self.settings(), self.failed());
        (unavailable_of(&settings, &failed))
            .map(|(name, reason)| (name.to_owned(), reason.to_owned()))
            .collect()
    }

    /// The servers whose listing failed, with why (the second part of [`Self::unavailable`]),
    /// without copying them.
    pub fn failed(&self) -> Arc<BTreeMap<String, String>> {
        self.unavailable.lock().clone()
    }

    /// Marks the servers with a catalog that cannot be started as configured (their command is
    /// not found, ...) unavailable, so searches say why their tools cannot be called. Blocking:
    /// `serve` runs it in the background once it answers.
    pub fn check_launches(&self) {
        let library = self.library();
        let mut lookups = CommandLookups::default();
        for server in &self.settings().servers {
            if library.catalogs.contains_key(&server.name) {
                self.check_launch(server, &mut lookups, true);
            }
        }
    }

    /// Whether `server` can be started as configured; if not, it is marked unavailable (and
    /// with `warn`, said on stderr).
    pub(in crate::server) fn check_launch(
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

    /// Counts a tool list this process fetched from `server` (`listed`) or a catalog of it
    /// taken from the shared store.
    pub(in crate::server) fn count_catalog(&self, server: &str, listed: bool) {
        let mut counts = self.counts.lock();
        let entry = counts.entry(server.to_owned()).or_default();
        if listed {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }

    /// Per server: (tool lists fetched by this process, catalogs taken from the shared store).
    pub fn catalog_counts(&self) -> BTreeMap<String, (u64, u64)> {
        self.counts.lock().clone()
    }

    /// The version of the shared catalog `field` (`<server>:<fingerprint>`) this process has.
    pub(in crate::server) fn shared_version(&self, field: &str) -> Option<String> {
        self.shared_versions.lock().get(field).cloned()
    }

    /// Records that this process has `version` of the shared catalog `field`.
    pub(in crate::server) fn record_shared_version(&self, field: String, version: String) {
        self.shared_versions.lock().insert(field, version);
    }

    /// At start-up, on a thread of its own: loads the model and attaches the tool vectors that
    /// the catalogs persisted (see [`Vectors::load_at_start`]). Nothing waits for it: searches
    /// answer by words (`mode: "bm25"`) until the vectors are attached (~0.4 s with the model
    /// load), then hybrid. Anything more is embedded in the background while BM25 answers.
    pub fn embed_at_start(self: &Arc<Self>) {
        let catalogs = self.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("vectors".into())
            .spawn(move || {
                if catalogs
                    .vectors
                    .load_at_start(&catalogs.settings(), || catalogs.library())
                {
                    catalogs.embed_in_background();
                }
            })
        {
            tracing::warn!("cannot start the thread that loads tool vectors, BM25 only: {e}");
        }
    }

    /// Loads the model if needed and computes the tool vectors of the current library (and of
    /// any library swapped in meanwhile), persisting them next to the catalogs. Blocking.
    pub fn embed_library(&self) {
        self.vectors.embed(&self.settings(), || self.library());
    }

    /// [`Self::embed_library`] on a thread of its own: BM25 answers until vectors are ready.
    /// After a library swap this is quick: unchanged tools come from the vector files.
    pub fn embed_in_background(self: &Arc<Self>) {
        if self.vectors.are_off() {
            return;
        }
        let catalogs = self.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("embed".into())
            .spawn(move || catalogs.embed_library())
        {
            tracing::warn!("cannot start the embedding thread, BM25 only: {e}");
        }
    }

    /// Ends embedding (within the vectors' grace), then lets listings in flight finish (within
    /// [`LISTING_GRACE`]).
    pub(in crate::server) async fn stop(&self) {
        self.vectors.stop().await;
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
    }
}

/// Configured servers meta-server cannot serve, with why, borrowed: the entries `settings`
/// could not take, then the servers whose listing `failed` (see [`Catalogs::unavailable`]).
pub(in crate::server) fn unavailable_of<'a>(
    settings: &'a Settings,
    failed: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    let skipped = (settings.skipped.iter()).map(|s| (s.key.as_str(), s.reason.as_str()));
    skipped.chain(
        failed
            .iter()
            .map(|(name, why)| (name.as_str(), why.as_str())),
    )
}

#[cfg(test)]
// A guard held across awaits stands for the embedding thread holding the lock.
#[allow(clippy::await_holding_lock)]
mod tests {
    use super::*;
    use crate::server::State;
    use crate::server::catalogs::vectors::EMBED_GRACE;

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
        let _loading = state.catalogs.vectors.busy();
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
        let embedding = state.catalogs.vectors.busy();
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
        state.catalogs.embed_library();
        assert!(!state.catalogs.vectors.tried());
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_waits_for_embedding_a_bounded_time() {
        let state = state();
        let started = tokio::time::Instant::now();
        let _stuck = state.catalogs.vectors.busy();
        state.stop().await;
        assert!(started.elapsed() >= EMBED_GRACE);
    }
}
