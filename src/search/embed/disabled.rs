//! Build without the `embeddings` feature: no embedder can exist, search is BM25 only.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;

use super::EmbedError;

/// Stand-in for the embedder of an `embeddings` build; it cannot be constructed.
pub struct Embedder(Infallible);

impl Embedder {
    /// Always fails with [`EmbedError::NotBuilt`], which says how to get embeddings.
    pub fn load(_dir: &Path) -> Result<Self, EmbedError> {
        Err(EmbedError::NotBuilt)
    }

    pub fn model_id(&self) -> &'static str {
        match self.0 {}
    }

    pub fn embed_documents(&self, _texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self.0 {}
    }

    pub fn embed_query(&self, _query: &str) -> Result<Arc<[f32]>, EmbedError> {
        match self.0 {}
    }

    pub fn stop(&self) {
        match self.0 {}
    }

    pub fn end_documents(&self) {
        match self.0 {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_says_the_build_has_no_embeddings() {
        let e = Embedder::load(Path::new("/nonexistent"))
            .err()
            .expect("a build without the feature has no embedder");
        let message = e.to_string();
        assert!(message.contains("no embeddings"), "{message}");
        assert!(message.contains("--no-default-features"), "{message}");
    }
}
