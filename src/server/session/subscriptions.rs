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
use crate::server::passthrough::{self, Passthrough};
use crate::upstream::{Origin, Subscription};

/// The subscriptions of one session (or one listen stream), by URI; dropped with it.
#[derive(Default)]
pub(super) struct Subscribed(Mutex<HashMap<String, AbortOnDropHandle<()>>>);

impl Subscribed {
    /// Subscribes to `uri` (once: a second subscription to it is the first) and runs `tell`
    /// with the URI at each of its updates; `tell` answering false ends it.
    pub(super) async fn add<F>(
        &self,
        state: &State,
        passthrough: &Passthrough,
        uri: &str,
        origin: &Origin,
        tell: impl Fn(String) -> F + Send + 'static,
    ) -> Result<(), McpError>
    where
        F: Future<Output = bool> + Send,
    {
        if self.0.lock().contains_key(uri) {
            return Ok(());
        }
        let mut subscription = subscribe(state, passthrough, uri, origin).await?;
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

    /// Subscribes to each of `uris` that an upstream lists, for a listen stream: the updated
    /// URIs arrive on the returned channel. One that cannot be subscribed is logged and skipped.
    pub(super) async fn stream(
        &self,
        state: &State,
        passthrough: &Passthrough,
        uris: &[String],
    ) -> mpsc::Receiver<String> {
        let (updated, updates) = mpsc::channel(16);
        for uri in uris {
            let updated = updated.clone();
            let tell = move |uri| {
                let updated = updated.clone();
                async move { updated.send(uri).await.is_ok() }
            };
            let added = self
                .add(state, passthrough, uri, &Origin::Detached, tell)
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

/// The upstream subscription to `uri`, on the server that lists it.
async fn subscribe(
    state: &State,
    passthrough: &Passthrough,
    uri: &str,
    origin: &Origin,
) -> Result<Subscription, McpError> {
    let routes = passthrough.routes(state, &Access::default());
    let Some(server) = routes.resource(uri) else {
        return Err(passthrough::not_found(
            format!(
                "no server lists {}; resources/list and resources/templates/list show the resources",
                crate::echo::echo(uri)
            ),
            uri,
        ));
    };
    (state.manager.subscribe(server, uri, origin).await)
        .map_err(|e| McpError::internal_error(e.to_string(), None))
}
