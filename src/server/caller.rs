//! What the session knows about one tool call: the client's limit, whose results it makes,
//! its cancellation and where its progress goes. Shared by every path a call takes.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;

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
    /// The servers whose own instructions the client was given.
    pub introduced: Introduced,
}

/// The servers whose own instructions (from their catalogs) a client has been given with
/// their tools' details: once per server in a session; on every answer where no session
/// remembers (2026-07-28, the command line).
#[derive(Clone, Default)]
pub(in crate::server) struct Introduced(Option<Arc<Mutex<HashSet<String>>>>);

impl Introduced {
    /// A session's memory: each server's instructions are given once.
    pub fn per_session() -> Self {
        Self(Some(Arc::default()))
    }

    /// Whether `server`'s instructions are still to be given.
    pub fn is_new(&self, server: &str) -> bool {
        self.0
            .as_ref()
            .is_none_or(|given| !given.lock().contains(server))
    }

    /// Records that `servers`' instructions were given.
    pub fn mark<'a>(&self, servers: impl IntoIterator<Item = &'a str>) {
        if let Some(given) = &self.0 {
            given.lock().extend(servers.into_iter().map(str::to_owned));
        }
    }
}
