//! Why a server's catalog could not be made fresh.

use crate::search::SearchError;
use crate::upstream::UpstreamError;

/// Why listing or installing a catalog failed; the message is what the model and the logs see.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error("not configured")]
    NotConfigured,
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    #[error(transparent)]
    Index(#[from] SearchError),
    #[error("listing \"{server}\" failed: {reason}")]
    Task { server: String, reason: String },
}
