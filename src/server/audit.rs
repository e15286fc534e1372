//! The audit lines of what clients do through a session ([`crate::audit`] writes them): a
//! tool call (`tools/call.rs`), a `prompts/get` or a `resources/read` (`passthrough/`): who,
//! what, how it ended, how long it took and what it returned.

use rmcp::model::CallToolResult;
use serde_json::{Map, Value};

use super::State;
use super::caller::Caller;
use crate::audit::{AuditLog, Line, Outcome, Subject};
use crate::clock::Instant;
use crate::library::SEPARATOR;
use crate::result::notice;
use crate::upstream::Origin;

/// Writes the line of `caller`'s call of `name`, begun at `started`, that ended in `outcome`
/// with `reply`; `arguments` only when the log takes them.
pub(in crate::server) fn call(
    log: &AuditLog,
    caller: &Caller,
    name: &str,
    arguments: Option<&Map<String, Value>>,
    outcome: Outcome,
    reply: &CallToolResult,
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
    let subject = Subject::Tool {
        tool,
        in_script: matches!(caller.origin, Origin::Script(_)),
        cut,
    };
    let result_bytes = crate::audit::json_bytes(reply);
    log.write(&line(
        caller,
        server,
        subject,
        outcome,
        result_bytes,
        started,
        arguments,
    ));
}

/// Writes the line of `caller`'s `prompts/get` or `resources/read` (`subject`), begun at
/// `started`, that `server` answered (`None`: no server has it) with `result`; a prompt's
/// `arguments` only when the log takes them. Nothing without an audit log.
pub(in crate::server) fn passed<T: serde::Serialize, E>(
    state: &State,
    caller: &Caller,
    server: Option<&str>,
    subject: Subject,
    arguments: Option<&Map<String, Value>>,
    result: &Result<T, E>,
    started: Instant,
) {
    let Some(log) = &state.audit else {
        return;
    };
    let (outcome, result_bytes) = match result {
        Ok(result) => (Outcome::Ok, crate::audit::json_bytes(result)),
        Err(_) => (Outcome::Error, 0),
    };
    let arguments = arguments.filter(|_| log.with_arguments());
    log.write(&line(
        caller,
        server,
        subject,
        outcome,
        result_bytes,
        started,
        arguments,
    ));
}

fn line<'a>(
    caller: &'a Caller,
    server: Option<&'a str>,
    subject: Subject<'a>,
    outcome: Outcome,
    result_bytes: usize,
    started: Instant,
    arguments: Option<&'a Map<String, Value>>,
) -> Line<'a> {
    Line {
        time: Line::now(),
        principal: caller.principal.as_deref(),
        session: caller.who.session.as_deref(),
        client: caller.who.client.as_deref(),
        server,
        subject,
        outcome,
        duration_ms: Line::millis(started.elapsed()),
        result_bytes,
        arguments,
    }
}
