//! Build with the `embeddings` feature: all-MiniLM-L6-v2 (int8 ONNX) through fastembed, with
//! ONNX Runtime loaded at run time from the embedding directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use fastembed::{
    InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel,
};

use super::{BATCH, EmbedError, RUNTIME_FILE, model_dir};

/// The model's ONNX file as published: int8 weights that ONNX Runtime widens to fp32 at load.
const MODEL_FILE: &str = "model.onnx";
/// The same model with integer matrix products (`scripts/fetch-embed-assets` derives it), twice
/// as fast; used for queries and tools alike when present.
const INTEGER_FILE: &str = "model-integer.onnx";
/// Identify the model file in vector files: vectors of another file are recomputed, so queries
/// are always compared with tool vectors of the file that embedded them.
const MODEL_ID: &str = "all-minilm-l6-v2-int8";
const INTEGER_MODEL_ID: &str = "all-minilm-l6-v2-int8-matmulinteger";

/// Most texts embedded with the query session when the document session does not exist yet.
const FEW_DOCUMENTS: usize = 64;

/// Queries whose vectors are kept.
const QUERY_CACHE: u64 = 1024;

/// A loaded sentence-embedding model. Vectors are L2-normalised, so a dot product is a cosine.
///
/// Queries and documents get separate sessions. A short query gains little from a second
/// thread and waits for it on a busy machine (10k tools, 2 cores, load 3: p99 18 ms with one
/// thread, 23 ms with two); and embedding a new catalog must not hold the lock queries wait on.
pub struct Embedder {
    /// One intra-op thread; fastembed's `embed` takes `&mut self`.
    query_model: Mutex<TextEmbedding>,
    /// Every core, created on the first call of [`Self::embed_documents`]: with persisted
    /// vectors most processes never need it.
    document_model: Mutex<Option<TextEmbedding>>,
    dir: PathBuf,
    /// [`INTEGER_FILE`] when it exists, else [`MODEL_FILE`]; both sessions load it.
    file: &'static str,
    queries: moka::sync::Cache<String, Arc<[f32]>>,
    /// Set by [`Self::stop`]: documents are no longer embedded.
    stopped: AtomicBool,
}

impl Embedder {
    /// Loads ONNX Runtime (`dir/libonnxruntime.so`, else `ORT_DYLIB_PATH`) and the model in
    /// `dir/all-minilm-l6-v2-int8/`. Missing files are errors, never panics.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        init_runtime(&runtime_path(dir))?;
        let file = if model_dir(dir).join(INTEGER_FILE).exists() {
            INTEGER_FILE
        } else {
            MODEL_FILE
        };
        Ok(Self {
            query_model: Mutex::new(session(dir, file, Some(1))?),
            document_model: Mutex::new(None),
            dir: dir.to_owned(),
            file,
            queries: moka::sync::Cache::new(QUERY_CACHE),
            stopped: AtomicBool::new(false),
        })
    }

    /// Identifies the model file in persisted vector files.
    pub fn model_id(&self) -> &'static str {
        if self.file == INTEGER_FILE {
            INTEGER_MODEL_ID
        } else {
            MODEL_ID
        }
    }

    /// One vector per text, computed in batches of [`BATCH`] texts to bound memory.
    ///
    /// Up to [`FEW_DOCUMENTS`] texts go through the query session while the document session
    /// does not exist yet: creating it is a second model load (over a second on a busy
    /// machine), which a server starting with its vectors stored would pay for the handful of
    /// built-in tools alone. Same model file, same vectors.
    pub fn embed_documents(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut model = self.document_model.lock();
        if model.is_none() && texts.len() <= FEW_DOCUMENTS {
            return self.embed_batches(&mut self.query_model.lock(), texts);
        }
        if model.is_none() {
            self.check_stopped()?;
            *model = Some(session(&self.dir, self.file, None)?);
            tracing::debug!(texts = texts.len(), "document session created");
        }
        self.embed_batches(model.as_mut().expect("document session"), texts)
    }

    /// Drops the document session, if any, once a library's tools are embedded: it holds a
    /// copy of the model (~30 MB) that later changes, a few tools at a time, rarely need.
    pub fn end_documents(&self) {
        if self.document_model.lock().take().is_some() {
            tracing::debug!("document session dropped");
            trim();
        }
    }

    /// Ends embedding for good, as the process is about to exit (ONNX Runtime's globals are
    /// torn down at exit, under a session still running): [`Self::embed_documents`] calls
    /// return [`EmbedError::Stopped`] before their next batch. Queries are still answered.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    fn check_stopped(&self) -> Result<(), EmbedError> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(EmbedError::Stopped);
        }
        Ok(())
    }

    /// `texts` through `model`, one batch at a time, unless stopped.
    fn embed_batches(
        &self,
        model: &mut TextEmbedding,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            self.check_stopped()?;
            out.extend(
                model
                    .embed(batch, Some(BATCH))
                    .map_err(|e| EmbedError::Model(e.to_string()))?,
            );
        }
        Ok(out)
    }

    /// The vector of a query, cached: repeated queries cost nothing.
    pub fn embed_query(&self, query: &str) -> Result<Arc<[f32]>, EmbedError> {
        if let Some(v) = self.queries.get(query) {
            return Ok(v);
        }
        let v: Arc<[f32]> = self
            .query_model
            .lock()
            .embed([query], Some(1))
            .map_err(|e| EmbedError::Model(e.to_string()))?
            .pop()
            .ok_or_else(|| EmbedError::Model("no vector for the query".into()))?
            .into();
        self.queries.insert(query.to_owned(), v.clone());
        Ok(v)
    }
}

/// A session of `file` of the model in `dir`, with `threads` intra-op threads (`None`: every
/// core).
fn session(dir: &Path, file: &str, threads: Option<usize>) -> Result<TextEmbedding, EmbedError> {
    let model = model_dir(dir);
    let read = |file: &str| {
        let path = model.join(file);
        std::fs::read(&path).map_err(|_| EmbedError::MissingModel(path))
    };
    let tokenizer = TokenizerFiles {
        tokenizer_file: read("tokenizer.json")?,
        config_file: read("config.json")?,
        special_tokens_map_file: read("special_tokens_map.json")?,
        tokenizer_config_file: read("tokenizer_config.json")?,
    };
    let user = UserDefinedEmbeddingModel::new(read(file)?, tokenizer).with_pooling(Pooling::Mean);
    // Spinning threads only burn CPU that other work on the machine could use.
    let mut options = InitOptionsUserDefined::new()
        .with_max_length(256)
        .with_session_config("session.intra_op.allow_spinning", "0");
    if let Some(threads) = threads {
        // The query session lives as long as the process: without the CPU arena it does not
        // keep the buffers of its largest batch (the built-in tools at start) for good
        // (BENCHMARKS.md, `scripts/bench-process --rss-model`). The document session keeps
        // its arena, which halves the time to embed a catalog, and is dropped after it.
        let cpu = ort::ep::CPU::default().with_arena_allocator(false).build();
        options = options
            .with_intra_threads(threads)
            .with_execution_providers(vec![cpu]);
    }
    let session = TextEmbedding::try_new_from_user_defined(user, options)
        .map_err(|e| EmbedError::Model(e.to_string()));
    // The model's bytes, read and parsed, are freed by now.
    trim();
    session
}

/// Gives memory freed by ONNX Runtime back to the system: glibc keeps freed pages of the
/// threads' heaps otherwise (~5 MB after a model load).
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free pages of the allocator's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `dir/libonnxruntime.so` if it exists, else `ORT_DYLIB_PATH`, else the missing default.
fn runtime_path(dir: &Path) -> PathBuf {
    let local = dir.join(RUNTIME_FILE);
    if local.exists() {
        return local;
    }
    std::env::var_os("ORT_DYLIB_PATH")
        .filter(|p| !p.is_empty())
        .map_or(local, PathBuf::from)
}

/// Loads ONNX Runtime once per process; a failure can be retried with another path.
fn init_runtime(path: &Path) -> Result<(), EmbedError> {
    static LOADED: Mutex<bool> = Mutex::new(false);
    let mut loaded = LOADED.lock();
    if *loaded {
        return Ok(());
    }
    if !path.exists() {
        return Err(EmbedError::MissingRuntime(path.to_owned()));
    }
    // Loading the library is what can fail; sessions then create the default environment.
    let builder = ort::init_from(path).map_err(|e| EmbedError::Runtime {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    drop(builder);
    *loaded = true;
    Ok(())
}
