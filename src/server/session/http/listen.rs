//! A named token's `subscriptions/listen` asks only for resources it sees. rmcp settles which
//! of a stream's `resourceSubscriptions` are accepted before the handler sees the request, so
//! the URIs of servers hidden from the token are taken out of the request here: the
//! acknowledgement neither accepts them nor tells the token that a server lists them, and no
//! hidden server is started for them.

use std::sync::Arc;

use axum::extract::{Request, State as Extract};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;

use super::super::principal::Principal;
use crate::server::State;
use crate::server::passthrough::Passthrough;

/// What the filter reads the routes from.
#[derive(Clone)]
pub(super) struct Listens {
    pub state: Arc<State>,
    pub passthrough: Arc<Passthrough>,
}

/// Where a `subscriptions/listen` request holds its resource URIs.
const URIS: &str = "/params/notifications/resourceSubscriptions";

/// Takes the URIs the request's token does not see out of a `subscriptions/listen` request
/// (known by its `Mcp-Method` header, which rmcp checks against the body). Other requests,
/// and those of unlimited tokens, pass untouched.
pub(super) async fn within_access(
    Extract(listens): Extract<Listens>,
    request: Request,
    next: Next,
) -> Response {
    let listen = (request.headers().get("mcp-method")).is_some_and(|m| m == "subscriptions/listen");
    let access = (request.extensions().get::<Principal>()).map(|p| p.access().clone());
    let Some(access) = access.filter(|a| listen && a.is_limited()) else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    // The body was read whole, within its limit, by the layer before.
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return next
            .run(Request::from_parts(parts, axum::body::Body::empty()))
            .await;
    };
    let mut message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        // rmcp says what is wrong with it.
        Err(_) => return next.run(Request::from_parts(parts, bytes.into())).await,
    };
    let Some(uris) = message.pointer_mut(URIS).and_then(Value::as_array_mut) else {
        return next.run(Request::from_parts(parts, bytes.into())).await;
    };
    let routes = (listens.passthrough).routes(&listens.state, &access);
    uris.retain(|uri| {
        uri.as_str()
            .is_some_and(|uri| matches!(routes.resource(uri), Ok(Some(_))))
    });
    let body = serde_json::to_vec(&message).expect("a JSON value serializes");
    next.run(Request::from_parts(parts, body.into())).await
}
