//! What the session knows about one tool call: the client's limit, whose results it makes,
//! its cancellation and where its progress goes. Shared by every path a call takes.

use std::sync::Arc;

use rmcp::model::ProgressToken;
use rmcp::service::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::result::Owner;
use crate::upstream::Origin;

/// Where the client wants progress for this call: its peer and its own progress token.
pub(in crate::server) type ProgressTo = Option<(Peer<RoleServer>, ProgressToken)>;

/// What the session knows about this call.
pub(in crate::server) struct Caller {
    /// The client's own result limit, if known.
    pub client_limit: Option<usize>,
    /// Whose stored results the call may create and read.
    pub owner: Owner,
    /// Who sent it over HTTP (its principal's name); `None` over stdio.
    pub principal: Option<Arc<str>>,
    /// Fires when the client cancels the request.
    pub cancelled: CancellationToken,
    pub progress_to: ProgressTo,
    /// Where an upstream's requests for the client (sampling, elicitation, roots) go.
    pub origin: Origin,
}
