//! Who sent a request over HTTP: what the token middleware marks a request with and what a
//! session's stored results are bound to.

use std::sync::Arc;

/// The principal of requests without a token (a server without one is loopback-only).
pub(crate) const ANONYMOUS: &str = "anonymous";

/// Who sent a request: today one bearer token is one principal.
#[derive(Debug, Clone)]
pub(crate) struct Principal(Arc<str>);

impl Principal {
    pub(crate) fn new(name: String) -> Self {
        Self(name.into())
    }

    pub(crate) fn name(&self) -> &str {
        &self.0
    }
}
