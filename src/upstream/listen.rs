//! List changes of a 2026-07-28 upstream. Such a server sends `notifications/tools/list_changed`
//! (and those of its prompts and resources) only on a `subscriptions/listen` stream, so one is
//! held open per connection for whoever keeps catalogs fresh; it ends with the connection.

use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient};

use super::{Event, Events};

/// Follows `peer`'s tool, prompt and resource list changes (those it says can change) onto
/// `events` if it speaks 2026-07-28; does nothing for an `initialize`-era server (its
/// notifications reach `UpstreamClient` unasked).
pub(super) fn follow_list_changes(server: &str, peer: &Peer<RoleClient>, events: &Events) {
    let Some(info) = peer.peer_info() else { return };
    if info.protocol_version.has_initialize() {
        return;
    }
    let caps = &info.capabilities;
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = caps
        .tools
        .as_ref()
        .and_then(|t| t.list_changed)
        .filter(|c| *c);
    filter.prompts_list_changed = (caps.prompts.as_ref())
        .and_then(|p| p.list_changed)
        .filter(|c| *c);
    filter.resources_list_changed = (caps.resources.as_ref())
        .and_then(|r| r.list_changed)
        .filter(|c| *c);
    if filter == SubscriptionFilter::new() {
        return;
    }
    let (server, peer, events) = (server.to_owned(), peer.clone(), events.clone());
    tokio::spawn(async move {
        let mut subscription = match peer.listen(filter).await {
            Ok(subscription) => subscription,
            Err(e) => {
                tracing::debug!(server = %server, "no list_changed subscription: {e}");
                return;
            }
        };
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(
                notification,
                ServerNotification::ToolListChangedNotification(_)
                    | ServerNotification::PromptListChangedNotification(_)
                    | ServerNotification::ResourceListChangedNotification(_)
            ) {
                tracing::debug!(server = %server, "upstream sent a list_changed");
                if events.send(Event::ToolListChanged(server.clone())).is_err() {
                    return;
                }
            }
        }
    });
}
