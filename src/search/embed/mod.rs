//! Optional local embeddings: the [`Embedder`] (a sentence-embedding model run by ONNX Runtime,
//! loaded from local files) and the tool vectors persisted next to the catalogs. The cargo
//! feature `embeddings` swaps `enabled.rs` for `disabled.rs`; the interface is the same.

#[cfg_attr(feature = "embeddings", path = "enabled.rs")]
#[cfg_attr(not(feature = "embeddings"), path = "disabled.rs")]
mod imp;
mod store;
mod table;

use std::path::{Path, PathBuf};

pub use imp::Embedder;
pub use store::{DocVectors, VectorFile, missing, text_hash, update_vectors};
pub use table::{QuantizedRow, VectorTable};

/// Sub-directory of the embedding directory holding the model files.
pub const MODEL_DIR: &str = "all-minilm-l6-v2-int8";
/// ONNX Runtime library file in the embedding directory.
pub const RUNTIME_FILE: &str = "libonnxruntime.so";
/// Texts passed to the model at once: memory grows with them, and a stop waits for one batch.
pub const BATCH: usize = 32;

/// Errors of the embedding path; every one means "fall back to BM25".
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("this build has no embeddings (built with --no-default-features); search is BM25 only")]
    NotBuilt,
    #[error("no ONNX Runtime library at {0}; run scripts/fetch-embed-assets or set ORT_DYLIB_PATH")]
    MissingRuntime(PathBuf),
    #[error("cannot load ONNX Runtime from {path}: {reason}")]
    Runtime { path: PathBuf, reason: String },
    #[error("embedding model file {0} is missing; run scripts/fetch-embed-assets")]
    MissingModel(PathBuf),
    #[error("embedding model: {0}")]
    Model(String),
    #[error("vector file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("vector file {path}: {reason}")]
    Format { path: PathBuf, reason: String },
    #[error("embedding stopped: meta-server is stopping")]
    Stopped,
}

/// The text embedded for a tool: its name split into words, title and description.
pub fn tool_text(name: &str, title: &str, description: &str) -> String {
    let mut text = super::words_of(name);
    for part in [title, description] {
        let part = part.trim();
        if !part.is_empty() && !text.contains(part) {
            text.push_str(": ");
            text.push_str(part);
        }
    }
    // The model reads 256 word pieces at most; a long description only costs time.
    if text.len() > 2000 {
        text.truncate(text.floor_char_boundary(2000));
    }
    text
}

/// The model directory inside the embedding directory `dir`.
pub fn model_dir(dir: &Path) -> PathBuf {
    dir.join(MODEL_DIR)
}

/// Dot product of `a` (f32, or the i8 rows of [`DocVectors`]) with `b`: of two L2-normalised
/// vectors, their cosine.
///
/// Sixteen independent partial sums let the compiler use SIMD lanes: a sequential float sum
/// cannot be reordered, and scoring 10,000 tools with it took ~2 ms per query.
pub fn dot<T: Copy + Into<f32>>(a: &[T], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let n = a.len().min(b.len());
    let (a_chunks, a_tail) = a[..n].as_chunks::<LANES>();
    let (b_chunks, b_tail) = b[..n].as_chunks::<LANES>();
    let mut sums = [0.0_f32; LANES];
    for (x, y) in a_chunks.iter().zip(b_chunks) {
        for ((s, &x), y) in sums.iter_mut().zip(x).zip(y) {
            *s += x.into() * y;
        }
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(&x, y)| x.into() * y).sum();
    sums.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    #[test]
    fn dot_matches_the_plain_sum_for_any_length() {
        for n in [0, 1, 15, 16, 17, 384, 390] {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((super::dot(&a, &b) - plain).abs() < 1e-4, "n = {n}");
        }
    }
}
