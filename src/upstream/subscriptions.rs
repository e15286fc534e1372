//! Resource subscriptions passed through: a client's subscription to an upstream's resource
//! becomes the upstream's own `resources/subscribe` on its shared connection, and the
//! `notifications/resources/updated` it sends come back to every subscriber of that URI. The
//! server is subscribed while any client is.
//! A subscription keeps the connection from idle stop while it lives; a connection that drops
//! ends its subscriptions (the client subscribes again). Only servers of an `initialize`
//! revision take `resources/subscribe`; a 2026-07-28 server is refused with why.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
use tokio::sync::broadcast;

use super::{Connection, Manager, Origin, UpstreamError};

/// A live subscription to one URI of one server; dropping it unsubscribes.
pub struct Subscription {
    conn: Arc<Connection>,
    uri: String,
    updates: broadcast::Receiver<String>,
}

impl Subscription {
    /// The next update of this URI; `None` once the connection is gone.
    pub async fn updated(&mut self) -> Option<()> {
        loop {
            match self.updates.recv().await {
                Ok(uri) if uri == self.uri => return Some(()),
                Ok(_) => {}
                // Updates carry nothing but the URI: one missed is one still to come.
                Err(broadcast::error::RecvError::Lagged(_)) => return Some(()),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The URI subscribed to.
    pub fn uri(&self) -> &str {
        &self.uri
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.conn.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.conn.touch();
        let last = {
            let mut subscribed = self.conn.subscribed.lock();
            let count = subscribed.entry(self.uri.clone()).or_default();
            *count = count.saturating_sub(1);
            let last = *count == 0;
            if last {
                subscribed.remove(&self.uri);
            }
            last
        };
        let (peer, uri) = (self.conn.peer.clone(), self.uri.clone());
        if last && let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                #[expect(deprecated, reason = "resources/unsubscribe, for 2025-11-25 servers")]
                let _ = peer.unsubscribe(UnsubscribeRequestParams::new(uri)).await;
            });
        }
    }
}

impl Manager {
    /// Subscribes to `uri` of `server` for `origin`, connecting first if needed.
    pub async fn subscribe(
        &self,
        server: &str,
        uri: &str,
        origin: &Origin,
    ) -> Result<Subscription, UpstreamError> {
        let slot = self.slot(server)?;
        let conn = self.connect_for(server, origin).await?;
        let info = conn.server_info();
        let offered = info.as_ref().is_some_and(|i| {
            i.protocol_version.has_initialize()
                && (i.capabilities.resources.as_ref()).is_some_and(|r| r.subscribe == Some(true))
        });
        if !offered {
            return Err(UpstreamError::Protocol {
                server: server.to_owned(),
                what: format!("resources/subscribe {uri}"),
                message: "the server does not offer resource subscriptions to meta-server (only servers of the 2025-11-25 revision that declare them do)".to_owned(),
            });
        }
        // Counted as a call in flight from before the request, so idle stop never comes between.
        conn.in_flight.fetch_add(1, Ordering::SeqCst);
        let subscription = Subscription {
            updates: conn.relays.updates(),
            conn: conn.clone(),
            uri: uri.to_owned(),
        };
        let first = {
            let mut subscribed = conn.subscribed.lock();
            let count = subscribed.entry(uri.to_owned()).or_default();
            *count += 1;
            *count == 1
        };
        // The server is subscribed once per URI, whoever else subscribes on the connection.
        if first {
            let params = SubscribeRequestParams::new(uri);
            let what = format!("resources/subscribe {uri}");
            #[expect(deprecated, reason = "resources/subscribe, for 2025-11-25 servers")]
            let sent = conn.peer.subscribe(params);
            self.bounded(&slot, &conn, &what, sent).await?;
        }
        Ok(subscription)
    }
}
