//! A server's catalog made fresh: listed here, or with a shared store through the replicas'
//! lease, then installed.

use std::sync::Arc;

use super::error::RefreshError;
use super::{listing, shared};
use crate::server::State;

/// Lists `server`'s tools and installs the catalog; with a shared store, only if no other
/// replica is listing it or has listed it: `changed` (its tool list changed) rules out
/// catalogs listed before now.
pub(in crate::server) async fn refresh(
    state: &Arc<State>,
    server: &str,
    changed: bool,
) -> Result<(), RefreshError> {
    let fresh = match &state.shared {
        Some(store) => shared::refresh(state, store, server, changed).await?,
        None => listing::fetch(state, server).await?,
    };
    listing::install(state, fresh).await
}
