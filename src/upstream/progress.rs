//! Relaying an upstream's `notifications/progress` for one call to whoever made the call.
//! rmcp gives every upstream request its own progress token, which goes out only on a call
//! whose caller wants progress (`wire::Outgoing`); a route maps that token to the caller's
//! channel for as long as the call lives, and progress for any other token (unknown, finished
//! or cancelled calls) is dropped.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::mpsc;

/// Where a call's progress goes. Bounded: when the receiver lags, progress is dropped rather
/// than letting a flooding upstream grow memory or stall its connection.
pub type ProgressSender = mpsc::Sender<ProgressNotificationParam>;

/// The live routes of one connection, shared with its transport (see `inbox.rs`).
#[derive(Clone, Default)]
pub(super) struct ProgressRoutes(Arc<Mutex<HashMap<ProgressToken, ProgressSender>>>);

impl ProgressRoutes {
    /// Routes `token`'s progress to `to` until the returned guard drops.
    pub(super) fn register(&self, token: ProgressToken, to: ProgressSender) -> Route {
        self.0.lock().insert(token.clone(), to);
        Route {
            routes: self.clone(),
            token,
        }
    }

    /// Hands `progress` to its call, or drops it when no call owns its token.
    pub(super) fn deliver(&self, progress: ProgressNotificationParam) {
        let routes = self.0.lock();
        match routes.get(&progress.progress_token) {
            Some(to) => {
                let _ = to.try_send(progress);
            }
            None => {
                tracing::debug!(token = ?progress.progress_token, "progress for no live call dropped")
            }
        }
    }
}

/// Removes its route when dropped (call finished, failed, timed out or was cancelled).
pub(super) struct Route {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for Route {
    fn drop(&mut self) {
        self.routes.0.lock().remove(&self.token);
    }
}
