//! The audit line of one tool call ([`crate::audit`] writes it): who, what, how it ended, how
//! long it took and what it returned.

use crate::clock::Instant;

use serde_json::{Map, Value};

use super::reply::Reply;
use crate::audit::{AuditLog, Line, Outcome};
use crate::library::SEPARATOR;
use crate::result::notice;
use crate::server::caller::Caller;
use crate::upstream::Origin;

/// Writes the line of `caller`'s call of `name`, begun at `started`, that ended in `outcome`
/// with `reply`; `arguments` only when the log takes them.
pub(in crate::server) fn record(
    log: &AuditLog,
    caller: &Caller,
    name: &str,
    arguments: Option<&Map<String, Value>>,
    outcome: Outcome,
    reply: &Reply,
    started: Instant,
) {
    let (server, tool) = match name.split_once(SEPARATOR) {
        Some((server, tool)) => (Some(server), tool),
        None => (None, name),
    };
    let cut = reply.content.iter().any(|block| {
        block
            .as_text()
            .is_some_and(|t| t.text.starts_with(notice::HEADER))
    });
    log.write(&Line {
        time: Line::now(),
        principal: caller.principal.as_deref(),
        session: caller.who.session.as_deref(),
        client: caller.who.client.as_deref(),
        server,
        tool,
        in_script: matches!(caller.origin, Origin::Script(_)),
        outcome,
        duration_ms: Line::millis(started.elapsed()),
        result_bytes: serde_json::to_vec(reply).map_or(0, |bytes| bytes.len()),
        cut,
        arguments,
    });
}
