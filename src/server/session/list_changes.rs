//! Telling clients that the lists they see changed: a catalog that replaces its server's
//! previous one may change `prompts/list`, `resources/list` or `resources/templates/list`; a
//! config change that adds, removes or changes an alwaysLoad server changes `tools/list` (and
//! nothing else does). A 2025-11-25 session is sent `notifications/{tools,prompts,resources}/
//! list_changed`; a 2026-07-28 client gets the same on its `subscriptions/listen` stream, if
//! it asked for them.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::server::State;
use crate::server::access::Access;
use crate::server::passthrough::{Passthrough, Routes};

/// Changes a slow `subscriptions/listen` stream may fall behind by before it skips some (it is
/// then told both lists changed).
const BACKLOG: usize = 16;

/// Which lists changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Changed {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
}

impl Changed {
    /// What a stream that fell behind is told.
    pub(super) const ALL: Self = Self {
        tools: true,
        prompts: true,
        resources: true,
    };
    pub(super) const TOOLS: Self = Self {
        tools: true,
        prompts: false,
        resources: false,
    };
    pub(super) const PROMPTS: Self = Self {
        tools: false,
        prompts: true,
        resources: false,
    };
    pub(super) const RESOURCES: Self = Self {
        tools: false,
        prompts: false,
        resources: true,
    };
}

/// The lists as clients see them, to tell what changed.
#[derive(PartialEq)]
struct Lists {
    prompts: Value,
    resources: Value,
}

impl Lists {
    fn of(routes: &Routes) -> Self {
        let value = |v: Result<Value, _>| v.unwrap_or(Value::Null);
        Self {
            prompts: value(serde_json::to_value(routes.prompts())),
            resources: value(serde_json::to_value((
                routes.resources(),
                routes.templates(),
            ))),
        }
    }
}

/// The sessions and streams of this process told of list changes.
pub(super) struct ListChanges {
    sessions: Mutex<Vec<Peer<RoleServer>>>,
    streams: broadcast::Sender<Changed>,
}

impl ListChanges {
    /// Follows `state`'s catalogs from now on (a task that ends with the state).
    pub(super) fn follow(state: &Arc<State>, passthrough: Arc<Passthrough>) -> Arc<Self> {
        let this = Arc::new(Self {
            sessions: Mutex::new(Vec::new()),
            streams: broadcast::Sender::new(BACKLOG),
        });
        let mut swaps = state.catalogs.library_swaps();
        let (state, changes): (Weak<State>, _) = (Arc::downgrade(state), Arc::downgrade(&this));
        let mut last = state
            .upgrade()
            .map(|s| Lists::of(&passthrough.routes(&s, &Access::default())));
        tokio::spawn(async move {
            while swaps.changed().await.is_ok() {
                let (Some(state), Some(changes)) = (state.upgrade(), changes.upgrade()) else {
                    break;
                };
                let now = Lists::of(&passthrough.routes(&state, &Access::default()));
                let changed = last.as_ref().map_or(Changed::ALL, |last| Changed {
                    tools: false,
                    prompts: last.prompts != now.prompts,
                    resources: last.resources != now.resources,
                });
                last = Some(now);
                if changed.prompts || changed.resources {
                    changes.tell(changed).await;
                }
            }
        });
        this
    }

    /// Tells the 2025-11-25 session of `peer` of changes until it closes.
    pub(super) fn add_session(&self, peer: Peer<RoleServer>) {
        let mut sessions = self.sessions.lock();
        sessions.retain(|p| !p.is_transport_closed());
        sessions.push(peer);
    }

    /// The changes from now on, for one `subscriptions/listen` stream.
    pub(super) fn stream(&self) -> broadcast::Receiver<Changed> {
        self.streams.subscribe()
    }

    /// Tells every session and stream that `tools/list` changed.
    pub(super) async fn tools_changed(&self) {
        self.tell(Changed::TOOLS).await;
    }

    async fn tell(&self, changed: Changed) {
        let _ = self.streams.send(changed);
        let sessions = {
            let mut sessions = self.sessions.lock();
            sessions.retain(|p| !p.is_transport_closed());
            sessions.clone()
        };
        for peer in sessions {
            if changed.tools {
                let _ = peer.notify_tool_list_changed().await;
            }
            if changed.prompts {
                let _ = peer.notify_prompt_list_changed().await;
            }
            if changed.resources {
                let _ = peer.notify_resource_list_changed().await;
            }
        }
    }
}
