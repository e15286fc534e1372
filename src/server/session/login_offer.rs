//! Logging in from a session, without waiting for a browser: when a server needs a login and
//! the client takes URL-mode elicitation, the authorization URL is offered to the user and the
//! login completes in the background (the loopback callback), taking effect at the next call.

use crate::clock::Instant;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ElicitRequestParams;
use rmcp::service::{ElicitationMode, Peer, RoleServer};

use crate::auth::{Prompt, Show};
use crate::server::State;

/// How long an offered login stays open for the user.
const OFFER_TIMEOUT: Duration = Duration::from_secs(600);

/// What the caller is told about the offer, appended to the "needs a login" error.
pub(in crate::server) const OFFERED: &str =
    "A login link was offered to the user; call again once they have logged in.";

/// What the caller is told when the login completed while its call was failing.
pub(in crate::server) const JUST_LOGGED_IN: &str = "The user has just logged in; call again.";

/// Whether an offered login of `server` completed after `since` (a call that began before it
/// may still have failed for want of it: offering the login again would be wrong).
pub(in crate::server) fn logged_in_since(state: &State, server: &str, since: Instant) -> bool {
    state.logins.completed_since(server, since)
}

/// Offers a login to `server` through `peer` if it takes URL-mode elicitation; `true` when an
/// offer is out (now or from an earlier call).
pub(in crate::server) fn offer(
    state: &Arc<State>,
    server: &str,
    challenge: String,
    peer: &Peer<RoleServer>,
) -> bool {
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Url)
    {
        return false;
    }
    let Some(config) = state.settings().server(server).cloned() else {
        return false;
    };
    if !state.logins.offer(server) {
        return true;
    }
    let state = state.clone();
    let peer = peer.clone();
    tokio::spawn(async move {
        let name = config.name.clone();
        let show = Show::Offer(Box::new(move |url| {
            let params = ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: format!(
                    "Log in to {name} so its tools can be used (meta-server keeps the login)."
                ),
                url,
                elicitation_id: format!("login-{name}-{}", rand::random::<u64>()),
            };
            tokio::spawn(async move {
                if let Err(e) = peer.create_elicitation(params).await {
                    tracing::info!("the client did not take the login offer: {e}");
                }
            });
        }));
        let prompt = Prompt {
            show,
            timeout: OFFER_TIMEOUT,
        };
        match crate::auth::login(&config, Some(&challenge), prompt).await {
            Ok(login) => {
                tracing::info!(server = %login.server, "logged in through the client's login offer");
                state.logins.complete(&login.server);
                state.catalogs.set_unavailable(&login.server, None);
            }
            Err(e) => {
                tracing::warn!(server = %config.name, "login offered to the client failed: {e}")
            }
        }
        state.logins.end(&config.name);
    });
    true
}
