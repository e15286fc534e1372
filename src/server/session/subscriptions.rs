//! A client's subscriptions to upstream resources: `resources/subscribe` of a 2025-11-25
//! session, and the `resourceSubscriptions` of a 2026-07-28 `subscriptions/listen` stream.
//! Each is an upstream [`Subscription`] whose updates a task forwards until it is dropped.

use std::collections::HashMap;
use std::future::Future;

use parking_lot::Mutex;
use rmcp::ErrorData as McpError;
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use crate::server::State;
use crate::server::access::Access;
use crate::server::passthrough::{self, Passthrough, Routes};
use crate::upstream::{Origin, Subscription};

/// Resource subscriptions one session (or one listen stream) may hold: each is an upstream
/// request and a task, so a client cannot make thousands.
pub(super) const MAX_SUBSCRIPTIONS: usize = 256;

/// The subscriptions of one session (or one listen stream), by URI; dropped with it.
#[derive(Default)]
pub(super) struct Subscribed(Mutex<HashMap<String, AbortOnDropHandle<()>>>);

/// Why a listen stream asking for `asked` resource subscriptions is refused, if it is.
pub(super) fn too_many(asked: usize) -> Option<McpError> {
    (asked > MAX_SUBSCRIPTIONS).then(|| {
        McpError::invalid_params(
            format!(
                "subscriptions/listen asked for {asked} resource subscriptions; a stream takes at most {MAX_SUBSCRIPTIONS}: listen to fewer resources, or on several streams"
            ),
            None,
        )
    })
}

impl Subscribed {
    /// Subscribes to `uri` of a server `access` sees (once: a second subscription to it is
    /// the first) and runs `tell` with the URI at each of its updates; `tell` answering false
    /// ends it.
    pub(super) async fn add<F>(
        &self,
        state: &State,
        passthrough: &Passthrough,
        (uri, access): (&str, &Access),
        origin: &Origin,
        tell: impl Fn(String) -> F + Send + 'static,
    ) -> Result<(), McpError>
    where
        F: Future<Output = bool> + Send,
    {
        {
            let held = self.0.lock();
            if held.contains_key(uri) {
                return Ok(());
            }
            if held.len() >= MAX_SUBSCRIPTIONS {
                return Err(McpError::invalid_params(
                    format!(
                        "this session already holds {MAX_SUBSCRIPTIONS} resource subscriptions, the most meta-server keeps for one; unsubscribe from some first"
                    ),
                    None,
                ));
            }
        }
        let mut subscription = subscribe(state, passthrough, uri, access, origin).await?;
        let task = tokio::spawn(async move {
            while subscription.updated().await.is_some() {
                if !tell(subscription.uri().to_owned()).await {
                    break;
                }
            }
        });
        self.0
            .lock()
            .insert(uri.to_owned(), AbortOnDropHandle::new(task));
        Ok(())
    }

    /// Ends the subscription to `uri`, if any.
    pub(super) fn remove(&self, uri: &str) {
        self.0.lock().remove(uri);
    }

    /// Subscribes to each of `uris` that a server `access` sees lists, for a listen stream: the
    /// updated URIs arrive on the returned channel. One that cannot be subscribed is logged and
    /// skipped.
    pub(super) async fn stream(
        &self,
        state: &State,
        passthrough: &Passthrough,
        uris: &[String],
        access: &Access,
    ) -> mpsc::Receiver<String> {
        let (updated, updates) = mpsc::channel(16);
        for uri in uris {
            let updated = updated.clone();
            let tell = move |uri| {
                let updated = updated.clone();
                async move { updated.send(uri).await.is_ok() }
            };
            let added = self
                .add(state, passthrough, (uri, access), &Origin::Detached, tell)
                .await;
            if let Err(e) = added {
                tracing::info!(
                    uri,
                    "resource subscription of a listen stream skipped: {}",
                    e.message
                );
            }
        }
        updates
    }
}

/// The upstream subscription to `uri`, on the server that lists it, if `access` sees that
/// server; a hidden server's URI is refused as one no server lists, and nothing is started.
async fn subscribe(
    state: &State,
    passthrough: &Passthrough,
    uri: &str,
    access: &Access,
    origin: &Origin,
) -> Result<Subscription, McpError> {
    let routes = passthrough.routes(state, access);
    let found = passthrough::off_the_workers(&routes, uri, Routes::resource);
    let Some(server) = found.await? else {
        return Err(passthrough::not_found(
            format!(
                "no server lists {}; resources/list and resources/templates/list show the resources",
                crate::echo::echo(uri)
            ),
            uri,
        ));
    };
    (state.manager.subscribe(&server, uri, origin).await)
        .map_err(|e| McpError::internal_error(e.to_string(), None))
}
