//! Who sent a request over HTTP: what the token middleware marks a request with, what a
//! session's stored results are bound to, and what it may see and call.

use std::sync::Arc;

use crate::server::access::Access;

/// The principal of requests without a token (a server without one is loopback-only).
pub(crate) const ANONYMOUS: &str = "anonymous";

/// Who sent a request: one bearer token is one principal.
#[derive(Debug, Clone)]
pub(crate) struct Principal {
    name: Arc<str>,
    access: Access,
}

impl Principal {
    /// A principal that sees and calls everything.
    pub(crate) fn new(name: String) -> Self {
        Self::limited(name, Access::default())
    }

    /// A principal that sees and calls what `access` lets it.
    pub(crate) fn limited(name: String, access: Access) -> Self {
        Self {
            name: name.into(),
            access,
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn access(&self) -> &Access {
        &self.access
    }
}

/// The principal of a request over HTTP (anonymous without a token); `None` over stdio.
pub(super) fn principal(extensions: &rmcp::model::Extensions) -> Option<Arc<str>> {
    let parts = extensions.get::<http::request::Parts>()?;
    let name = parts
        .extensions
        .get::<Principal>()
        .map_or(ANONYMOUS, |p| p.name());
    Some(name.into())
}

/// What the principal of a request may see and call (everything over stdio).
pub(super) fn access(extensions: &rmcp::model::Extensions) -> Access {
    extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .map_or_else(Access::default, |p| p.access().clone())
}
