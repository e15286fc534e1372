//! What an upstream asks its client for (sampling, elicitation, roots), and whether a
//! 2025-11-25 client declared it; `relay.rs` sends it to a session, `inputs.rs` to a
//! 2026-07-28 client's retry.

use rmcp::model::ElicitRequestParams;
use rmcp::service::{ElicitationMode, Peer, RoleServer};

/// What an upstream asks the client for.
#[derive(Clone, Copy)]
pub(super) enum Ask {
    Sampling,
    Elicitation(ElicitationMode),
    Roots,
}

impl Ask {
    pub(super) fn elicitation(params: &ElicitRequestParams) -> Self {
        Self::Elicitation(match params {
            ElicitRequestParams::UrlElicitationParams { .. } => ElicitationMode::Url,
            _ => ElicitationMode::Form,
        })
    }

    pub(super) fn what(self) -> &'static str {
        match self {
            Self::Sampling => "sampling",
            Self::Elicitation(ElicitationMode::Url) => "URL-mode elicitation",
            Self::Elicitation(_) => "elicitation",
            Self::Roots => "its roots",
        }
    }

    /// The capability a client declares to offer this.
    pub(super) fn capability(self) -> &'static str {
        match self {
            Self::Sampling => "sampling",
            Self::Elicitation(ElicitationMode::Url) => "elicitation (url)",
            Self::Elicitation(_) => "elicitation",
            Self::Roots => "roots",
        }
    }

    /// Whether the client declared what this needs.
    pub(super) fn offered_by(self, peer: &Peer<RoleServer>) -> bool {
        let Some(info) = peer.peer_info() else {
            return false;
        };
        match self {
            Self::Sampling => info.capabilities.sampling.is_some(),
            Self::Elicitation(mode) => peer.supported_elicitation_modes().contains(&mode),
            Self::Roots => info.capabilities.roots.is_some(),
        }
    }
}
