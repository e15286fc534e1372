//! The two protocol revisions served side by side, chosen per request: 2025-11-25 (an
//! `initialize` starts a session) and 2026-07-28 (no `initialize`, no session: each request
//! names its version, client and capabilities in `_meta`), and the cache hints a 2026-07-28
//! answer carries.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{CacheScope, ErrorCode, ProtocolVersion};
use rmcp::service::{RequestContext, RoleServer};

/// Every revision up to 2026-07-28: rmcp answers `server/discover` with them, bounds the
/// `initialize` negotiation by them and refuses a request naming another with -32022.
pub(super) fn supported() -> &'static [ProtocolVersion] {
    ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28)
}

/// How long a 2026-07-28 client may keep a list that is fixed for the life of the process
/// (`tools/list`, the resource templates); only a restart with another config changes them.
pub(super) const FIXED_LIST_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Whether a request is of a revision without sessions (2026-07-28), in which the server
/// sends the client no requests of its own (an `InputRequiredResult` asks instead).
pub(super) fn is_stateless(cx: &RequestContext<RoleServer>) -> bool {
    cx.protocol_version().is_some_and(|v| !v.has_initialize())
}

/// The `ttlMs` and `cacheScope` of a list fixed for the life of the process, the same for
/// every client and token; `None` for a 2025-11-25 session, whose results stay as they were.
pub(super) fn fixed_list_hints(cx: &RequestContext<RoleServer>) -> Option<(u64, CacheScope)> {
    is_stateless(cx).then(|| (FIXED_LIST_TTL.as_millis() as u64, CacheScope::Public))
}

/// Whether a request names a revision without `initialize` (2026-07-28) in its own `_meta`:
/// such an `initialize` is one of that revision, not the start of a 2025-11-25 session.
pub(super) fn names_stateless(cx: &RequestContext<RoleServer>) -> bool {
    cx.meta
        .protocol_version()
        .is_some_and(|v| !v.has_initialize())
}

/// The answer to a method 2026-07-28 removed (`initialize`, `logging/setLevel`), asked on that
/// revision: -32601, saying what the revision has instead.
pub(super) fn removed(method: &str, instead: &str) -> McpError {
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "{method} is not a method of MCP 2026-07-28, which this request names in its _meta; {instead}"
        ),
        None,
    )
}
