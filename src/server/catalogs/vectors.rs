//! The embedding model and the tool vectors of the served library: loaded once, computed one
//! batch at a time, and stopped before the process exits under ONNX Runtime.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use crate::config::Settings;
use crate::library::Library;
use crate::search::embed::{EmbedError, Embedder};

/// Tools without a stored vector that start-up embeds before serving (a few ms each); with
/// more, they are embedded in the background.
const START_EMBED_MOST: usize = 64;
/// How long stopping waits for the model to finish loading or the tool batch being embedded
/// (ONNX Runtime must not be torn down under them at exit).
pub(super) const EMBED_GRACE: Duration = Duration::from_secs(5);

/// The model and whoever is computing vectors with it.
#[derive(Default)]
pub(super) struct Vectors {
    /// The embedding model, once loading was tried (`None`: BM25 only).
    embedder: OnceLock<Option<Arc<Embedder>>>,
    /// Held while the model loads and tool vectors are computed, so only one thread does it
    /// and stopping can wait for it.
    embedding: Mutex<()>,
    /// Set when serving ends: no more tool vectors are computed.
    stopping: AtomicBool,
}

impl Vectors {
    /// The embedding model, loaded on first use (see [`crate::library::embedder`]); `None`:
    /// BM25 only.
    fn embedder(&self, settings: &Settings) -> Option<Arc<Embedder>> {
        self.embedder
            .get_or_init(|| crate::library::embedder(settings))
            .clone()
    }

    /// The model (loading it if needed), unless serving is ending; call it holding `embedding`.
    fn embedder_unless_stopping(&self, settings: &Settings) -> Option<Arc<Embedder>> {
        if self.stopping.load(Ordering::SeqCst) {
            return None;
        }
        let embedder = self.embedder(settings)?;
        (!self.stopping.load(Ordering::SeqCst)).then_some(embedder)
    }

    /// Whether loading the model was tried and gave none: there is nothing to embed with.
    pub(super) fn are_off(&self) -> bool {
        self.embedder.get().is_some_and(Option::is_none)
    }

    /// Stops embedding and waits (within [`EMBED_GRACE`]) for the model load or the batch in
    /// progress: the process must not exit under ONNX Runtime while it runs.
    pub(super) async fn stop(&self) {
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

    /// Loads the model and attaches the tool vectors that the `current` library persisted,
    /// embedding at most [`START_EMBED_MOST`] tools that have none; `true` when more are
    /// missing and should be embedded in the background.
    pub(super) fn load_at_start(
        &self,
        settings: &Settings,
        current: impl Fn() -> Arc<Library>,
    ) -> bool {
        // A library swapped in meanwhile is embedded after this, by `embed`.
        let _one = self.embedding.lock();
        let Some(embedder) = self.embedder_unless_stopping(settings) else {
            return false;
        };
        let started = crate::clock::Instant::now();
        let library = current();
        match library.embed_within(embedder, Some(&settings.catalog_dir), START_EMBED_MOST) {
            Ok(Some(stats)) => tracing::info!(
                tools = stats.tools,
                embedded = stats.embedded,
                took = ?started.elapsed(),
                "tool vectors loaded; search is hybrid"
            ),
            Ok(None) => {
                tracing::info!("tool vectors missing; BM25 answers until they are computed");
                return true;
            }
            Err(e @ EmbedError::Stopped) => tracing::debug!("{e}"),
            Err(e) => tracing::warn!("tool vectors not loaded, BM25 only: {e}"),
        }
        false
    }

    /// Loads the model if needed and computes the tool vectors of the `current` library (and
    /// of any library swapped in meanwhile), persisting them next to the catalogs. Blocking.
    pub(super) fn embed(&self, settings: &Settings, current: impl Fn() -> Arc<Library>) {
        let _one = self.embedding.lock();
        let Some(embedder) = self.embedder_unless_stopping(settings) else {
            return;
        };
        loop {
            let library = current();
            if !library.is_hybrid() {
                let started = crate::clock::Instant::now();
                match library.embed(embedder.clone(), Some(&settings.catalog_dir)) {
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
            if Arc::ptr_eq(&library, &current()) {
                embedder.end_documents();
                return;
            }
        }
    }

    /// Holds the vectors as a batch in progress does (tests of what waits for it).
    #[cfg(test)]
    pub(super) fn busy(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.embedding.lock()
    }

    /// Whether the model was loaded, or loading it tried.
    #[cfg(test)]
    pub(super) fn tried(&self) -> bool {
        self.embedder.get().is_some()
    }
}
