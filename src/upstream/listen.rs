//! Tool-list changes of a 2026-07-28 upstream. Such a server sends
//! `notifications/tools/list_changed` only on a `subscriptions/listen` stream, so one is held
//! open per connection for whoever keeps catalogs fresh; it ends with the connection.

use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient};

use super::{Event, Events};

/// Follows `peer`'s tool-list changes onto `events` if it speaks 2026-07-28 and says its
/// tool list can change; does nothing for an `initialize`-era server (its notifications
/// reach `UpstreamClient` unasked).
pub(super) fn follow_tool_changes(server: &str, peer: &Peer<RoleClient>, events: &Events) {
    let Some(info) = peer.peer_info() else { return };
    let changes = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .unwrap_or(false);
    if info.protocol_version.has_initialize() || !changes {
        return;
    }
    let (server, peer, events) = (server.to_owned(), peer.clone(), events.clone());
    tokio::spawn(async move {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut subscription = match peer.listen(filter).await {
            Ok(subscription) => subscription,
            Err(e) => {
                tracing::debug!(server = %server, "no tools/list_changed subscription: {e}");
                return;
            }
        };
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(
                notification,
                ServerNotification::ToolListChangedNotification(_)
            ) {
                tracing::debug!(server = %server, "upstream sent tools/list_changed");
                if events.send(Event::ToolListChanged(server.clone())).is_err() {
                    return;
                }
            }
        }
    });
}
