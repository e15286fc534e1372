//! Multi round-trip requests (SEP-2322) of 2026-07-28 upstreams. Such a server answers a
//! request that needs input (sampling, elicitation, roots) with an `InputRequiredResult`; the
//! request is sent again, as a new request, with the answers and the `requestState` echoed
//! unchanged. Who answers is the caller of that very request:
//! - a 2026-07-28 client gets the round as the server asked it (its keys, its requests, a
//!   round that only carries state too), and whatever its retry carries goes back: in front
//!   of a server, meta-server is that server, and the server judges the answers;
//! - a 2025-11-25 session is asked each question, as a 2025-11-25 server would ask it;
//! - anyone else (a script's nested call, `meta-server call`) cannot answer.
//!
//! The rules of relayed requests hold all the same: a sampling or elicitation request says
//! which server asks (`attribution.rs`), a 2025-11-25 session has at most so many open
//! (`asking.rs`), and a roots request is answered by `roots.rs`'s rule: the configured roots
//! by meta-server itself, or the client's within them.
//!
//! A 2026-07-28 caller's declared capabilities (and log level) go with the request, so that
//! the server asks only for what that client can give.

use std::time::Duration;

use rmcp::model::{
    ClientRequest, ElicitResult, ElicitationAction, ErrorData, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, RequestMetaObject, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleServer, ServiceError};
use serde::Serialize;

use super::ask::Ask;
use super::asking::Asking;
use super::attribution;
use super::relay::{self, Origin};
use super::roots::Roots;
use super::{CancelOnDrop, Connection};

/// Rounds one request may take before it fails (rmcp's high-level client allows as many).
pub(super) const MAX_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// One answer of a request that may ask for input.
pub(super) enum Round<T> {
    Done(T),
    Asked(InputRequiredResult),
}

/// Sends a request with `send` (given the answers and the state of the round before) until
/// the server stops asking, its questions answered by `origin` (see [`answer`]). The first
/// round carries what a 2026-07-28 caller's own request carried in `inputResponses`.
pub(super) async fn rounds<T, F>(
    server: &str,
    origin: &Origin,
    roots: &Roots,
    mut send: impl FnMut(Option<InputResponses>, Option<String>) -> F,
) -> Result<T, ServiceError>
where
    F: Future<Output = Result<Round<T>, ServiceError>>,
{
    let (mut answers, mut state) = (first_answers(origin), None);
    let mut rounds_without_input = 0;
    for _ in 0..MAX_ROUNDS {
        let asked = match send(answers.take(), state.take()).await? {
            Round::Done(result) => return Ok(result),
            Round::Asked(asked) => asked,
        };
        (answers, state) = answer(server, origin, roots, asked, &mut rounds_without_input).await?;
    }
    Err(ServiceError::InputRequiredRoundsExceeded {
        max_rounds: MAX_ROUNDS,
    })
}

/// What a 2026-07-28 caller's request carried in `inputResponses`, for its first round.
pub(super) fn first_answers(origin: &Origin) -> Option<InputResponses> {
    origin.inputs().and_then(|inputs| inputs.first_answers())
}

/// The `_meta` a request for `origin` carries to a 2026-07-28 server: a 2026-07-28 caller's
/// capabilities and log level instead of meta-server's own.
pub(super) fn options(conn: &Connection, origin: &Origin) -> PeerRequestOptions {
    let mut options = PeerRequestOptions::no_options();
    let modern = conn
        .server_info()
        .is_some_and(|i| !i.protocol_version.has_initialize());
    let (Some(inputs), true) = (origin.inputs(), modern) else {
        return options;
    };
    let mut meta = RequestMetaObject::new();
    meta.set_client_capabilities(inputs.capabilities().clone());
    if let Origin::Stateless {
        log: Some((_, level)),
        ..
    } = origin
        && let Some(level) = *level.lock()
    {
        meta.set_log_level(level);
    }
    options.meta = Some(meta);
    options
}

/// Sends `request` for `origin`'s call with [`options`]; the server is told to stop if the
/// answer is no longer awaited.
pub(super) async fn send(
    conn: &Connection,
    origin: &Origin,
    request: ClientRequest,
) -> Result<ServerResult, ServiceError> {
    let handle = conn
        .peer
        .send_request_with_option(request, options(conn, origin))
        .await?;
    let mut abandoned = CancelOnDrop::new(&conn.peer, handle.id.clone());
    let response = handle.await_response().await;
    abandoned.disarm();
    response
}

/// What the retry after `asked` carries: the answers to its input requests (if any) and its
/// request state. `rounds_without_input` counts retries that carried only state for a caller
/// asked here; those wait a little longer each time (50 ms doubling to 250 ms), as rmcp's do.
pub(super) async fn answer(
    server: &str,
    origin: &Origin,
    roots: &Roots,
    asked: InputRequiredResult,
    rounds_without_input: &mut u32,
) -> Result<(Option<InputResponses>, Option<String>), ServiceError> {
    if let Some(inputs) = origin.inputs() {
        let answers = round(server, inputs, roots, asked.input_requests).await?;
        return Ok((answers, asked.request_state));
    }
    let requests = asked.input_requests.unwrap_or_default();
    if requests.is_empty() && asked.request_state.is_none() {
        return Err(ServiceError::UnexpectedResponse);
    }
    if requests.is_empty() {
        let millis = (50u64 << (*rounds_without_input).min(3)).min(250);
        tokio::time::sleep(Duration::from_millis(millis)).await;
        *rounds_without_input += 1;
        return Ok((None, asked.request_state));
    }
    *rounds_without_input = 0;
    let answers = responses(server, origin, roots, requests).await?;
    Ok((Some(answers), asked.request_state))
}

/// A 2026-07-28 client's answers to a round of `server`, its requests attributed. A roots
/// request is put to the client as asked, but what goes back under its key is `roots.rs`'s
/// answer: the client's roots within the configured ones where this client may narrow them,
/// else the configured ones (none without `roots`), whatever the client said.
async fn round(
    server: &str,
    inputs: &super::Inputs,
    roots: &Roots,
    requests: Option<InputRequests>,
) -> Result<Option<InputResponses>, ServiceError> {
    let mut of_roots = Vec::new();
    let requests = requests.map(|requests| {
        (requests.into_iter())
            .map(|(key, request)| {
                if matches!(request, InputRequest::ListRoots(_)) {
                    of_roots.push(key.clone());
                }
                (key, attributed(server, request))
            })
            .collect::<InputRequests>()
    });
    let mut answers = inputs.round(requests).await.map_err(|e| {
        ServiceError::McpError(ErrorData::internal_error(
            format!("the server's questions got no answer: {e}"),
            None,
        ))
    })?;
    for key in of_roots {
        let Some(answer) = answers.as_mut().and_then(|a| a.get_mut(&key)) else {
            continue;
        };
        let given = match serde_json::from_value(answer.take()) {
            Ok(client) if roots.asks_client() => roots.within(client),
            _ => roots.configured(),
        };
        *answer = serde_json::to_value(given).expect("roots serialize");
    }
    Ok(answers)
}

/// `request` as its client sees it: a sampling or elicitation request says which server asks.
fn attributed(server: &str, request: InputRequest) -> InputRequest {
    match request {
        InputRequest::CreateMessage(mut r) => {
            r.params = attribution::sampling(server, r.params);
            InputRequest::CreateMessage(r)
        }
        InputRequest::Elicitation(mut r) => {
            r.params = attribution::elicitation(server, r.params);
            InputRequest::Elicitation(r)
        }
        other => other,
    }
}

/// The answers of `origin` (a 2025-11-25 session, or no one who can answer) to `requests`.
#[expect(
    deprecated,
    reason = "sampling and roots, asked of 2025-11-25 sessions"
)]
async fn responses(
    server: &str,
    origin: &Origin,
    roots: &Roots,
    requests: InputRequests,
) -> Result<InputResponses, ServiceError> {
    let peer = match origin {
        Origin::Client { peer, .. } => Some(peer),
        _ => None,
    };
    let answers = requests.into_iter().map(|(key, request)| async move {
        let value = match attributed(server, request) {
            InputRequest::CreateMessage(r) => {
                let peer = asked_of(peer, Ask::Sampling, &key, origin)?;
                let _open = open(server, origin, Ask::Sampling)
                    .map_err(|e| refused(&key, Ask::Sampling.what(), &e.message))?;
                let result = peer.create_message(r.params).await;
                value(&key, relay::answer(server, Ask::Sampling, result))?
            }
            InputRequest::Elicitation(r) => {
                let ask = Ask::elicitation(&r.params);
                // An elicitation nobody can answer is declined, an answer the server expects
                // and handles.
                let answered = match asked_of(peer, ask, &key, origin) {
                    Ok(peer) => match open(server, origin, ask) {
                        Ok(_open) => {
                            let answer = peer.create_elicitation(r.params).await;
                            relay::answer(server, ask, answer).map_err(|e| e.message.into_owned())
                        }
                        Err(e) => Err(e.message.into_owned()),
                    },
                    Err(e) => Err(e.to_string()),
                };
                value(
                    &key,
                    Ok(answered.unwrap_or_else(|why| {
                        tracing::debug!(key, "elicitation declined: {why}");
                        ElicitResult::new(ElicitationAction::Decline)
                    })),
                )?
            }
            InputRequest::ListRoots(_) if !roots.asks_client() => {
                value(&key, Ok(roots.configured()))?
            }
            // The client's roots within the configured ones; those when it cannot be asked.
            InputRequest::ListRoots(_) => {
                let given = match asked_of(peer, Ask::Roots, &key, origin) {
                    Ok(peer) => relay::answer(server, Ask::Roots, peer.list_roots().await).ok(),
                    Err(_) => None,
                };
                value(
                    &key,
                    Ok(given.map_or_else(|| roots.configured(), |c| roots.within(c))),
                )?
            }
            _ => {
                return Err(refused(
                    &key,
                    "input",
                    "meta-server does not know this kind",
                ));
            }
        };
        Ok((key, value))
    });
    futures::future::try_join_all(answers)
        .await
        .map(|answers| answers.into_iter().collect())
}

/// A 2025-11-25 session's place for one more open request of `server` (see `asking.rs`).
fn open(server: &str, origin: &Origin, ask: Ask) -> Result<Option<Asking>, ErrorData> {
    match origin {
        Origin::Client { id, .. } => Asking::open(*id, server, ask).map(Some),
        _ => Ok(None),
    }
}

/// The session to ask for `ask`, if it declared it; else why it cannot be asked.
fn asked_of<'a>(
    peer: Option<&'a Peer<RoleServer>>,
    ask: Ask,
    key: &str,
    origin: &Origin,
) -> Result<&'a Peer<RoleServer>, ServiceError> {
    match peer {
        Some(peer) if ask.offered_by(peer) => Ok(peer),
        Some(_) => Err(refused(
            key,
            ask.what(),
            &format!(
                "the client did not declare the {} capability",
                ask.capability()
            ),
        )),
        None if matches!(origin, Origin::Script(_)) => Err(refused(
            key,
            ask.what(),
            "a meta__run_script script cannot answer; call the tool directly with call_tool",
        )),
        None => Err(refused(key, ask.what(), "no client is connected to ask")),
    }
}

/// A client's answer as the `inputResponses` entry it goes back in.
fn value<T: Serialize>(
    key: &str,
    answer: Result<T, ErrorData>,
) -> Result<serde_json::Value, ServiceError> {
    let answer = answer.map_err(|e| refused(key, "input", &e.message))?;
    serde_json::to_value(answer).map_err(|e| refused(key, "input", &e.to_string()))
}

fn refused(key: &str, what: &str, why: &str) -> ServiceError {
    ServiceError::McpError(ErrorData::internal_error(
        format!(
            "it asked for {what} (input request \"{key}\") that meta-server could not give: {why}"
        ),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::upstream::{Inputs, PendingInput};

    /// A round of a sampling and a roots request put to a 2026-07-28 client, which answers
    /// `client_roots` with its own roots: what the client saw and what goes back.
    async fn through(roots: &Roots, client_roots: Value) -> (InputRequests, InputResponses) {
        let caps = rmcp::model::ClientCapabilities::default();
        let (inputs, mut asks) = Inputs::new(caps, None);
        let requests: InputRequests = serde_json::from_value(json!({
            "greeting": {"method": "sampling/createMessage", "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}],
                "maxTokens": 5}},
            "client_roots": {"method": "roots/list", "params": {}}
        }))
        .unwrap();
        let client = tokio::spawn(async move {
            let Some(PendingInput::Round { requests, answer }) = asks.recv().await else {
                panic!("no round");
            };
            let said = json!({"role": "assistant", "model": "m",
                "content": {"type": "text", "text": "Hello"}});
            let answers = [
                ("greeting".to_owned(), said),
                ("client_roots".to_owned(), client_roots),
            ];
            answer.send(Some(answers.into())).unwrap();
            requests.unwrap()
        });
        let answers = round("up", &inputs, roots, Some(requests)).await.unwrap();
        (client.await.unwrap(), answers.unwrap())
    }

    #[tokio::test]
    #[expect(deprecated, reason = "sampling, relayed for 2025-11-25 servers")]
    async fn a_round_is_attributed_and_its_roots_answer_follows_the_roots_rule() {
        let wide = json!({"roots": [{"uri": "file:///"}]});
        // Shared by many clients, no `roots` key: the server is given none.
        let (seen, back) = through(&Roots::new(None, false), wide.clone()).await;
        let Some(InputRequest::CreateMessage(asked)) = seen.get("greeting") else {
            panic!("{seen:?}");
        };
        let system = asked.params.system_prompt.as_deref().unwrap_or_default();
        assert!(system.contains("MCP server \"up\""), "{system}");
        assert!(matches!(
            seen.get("client_roots"),
            Some(InputRequest::ListRoots(_))
        ));
        assert_eq!(back["client_roots"], json!({"roots": []}));
        assert_eq!(back["greeting"]["content"]["text"], "Hello");
        // One client and configured directories: the client's roots within them.
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner");
        std::fs::create_dir(&inner).unwrap();
        let allowed = [dir.path().to_path_buf()];
        let one = Roots::new(Some(&allowed), true);
        let (_, back) = through(&one, wide).await;
        let given = serde_json::to_value(one.configured()).unwrap();
        assert_eq!(
            back["client_roots"], given,
            "a wider root gives the configured ones"
        );
        let uri = url::Url::from_directory_path(&inner).unwrap().to_string();
        let (_, back) = through(&one, json!({"roots": [{"uri": uri}]})).await;
        let kept = back["client_roots"]["roots"][0]["uri"].as_str().unwrap();
        assert!(kept.trim_end_matches('/').ends_with("/inner"), "{back:?}");
    }
}
