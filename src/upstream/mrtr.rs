//! Multi round-trip requests (SEP-2322) of 2026-07-28 upstreams. Such a server answers a
//! `tools/call` that needs input (sampling, elicitation, roots) with an `InputRequiredResult`;
//! the call is sent again, as a new request, with the answers and the `requestState` echoed
//! unchanged. The answers come from meta-server's own handler of upstream requests, as the same
//! requests of a 2025-11-25 server do.

use std::time::Duration;

use rmcp::Service;
use rmcp::model::{
    ClientResult, ElicitResult, ElicitationAction, ErrorData, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, RequestId, ServerRequest,
};
use rmcp::service::{Peer, RequestContext, RoleClient, ServiceError};

use super::{Connection, UpstreamClient};

/// Rounds one call may take before it fails (rmcp's high-level client allows as many).
pub(super) const MAX_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

/// One answer of a request that may ask for input.
pub(super) enum Round<T> {
    Done(T),
    Asked(InputRequiredResult),
}

/// Sends a request with `send` (given the answers and the state of the round before) until
/// the server stops asking, answering its questions with the connection's own handler.
pub(super) async fn rounds<T, F>(
    conn: &Connection,
    mut send: impl FnMut(Option<InputResponses>, Option<String>) -> F,
) -> Result<T, ServiceError>
where
    F: Future<Output = Result<Round<T>, ServiceError>>,
{
    let (mut answers, mut state) = (None, None);
    let mut rounds_without_input = 0;
    for _ in 0..MAX_ROUNDS {
        let asked = match send(answers.take(), state.take()).await? {
            Round::Done(result) => return Ok(result),
            Round::Asked(asked) => asked,
        };
        let client = conn.client().await.ok_or(ServiceError::TransportClosed)?;
        (answers, state) = answer(&client, &conn.peer, asked, &mut rounds_without_input).await?;
    }
    Err(ServiceError::InputRequiredRoundsExceeded {
        max_rounds: MAX_ROUNDS,
    })
}

/// What the retry of a call carries after `asked`: the answers to its input requests (if it
/// made any) and its request state. `rounds_without_input` counts retries that carried only
/// state; those wait a little longer each time (50 ms doubling to 250 ms), as rmcp's do.
pub(super) async fn answer(
    client: &UpstreamClient,
    peer: &Peer<RoleClient>,
    asked: InputRequiredResult,
    rounds_without_input: &mut u32,
) -> Result<(Option<InputResponses>, Option<String>), ServiceError> {
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
    let answers = responses(client, peer, requests).await?;
    Ok((Some(answers), asked.request_state))
}

async fn responses(
    client: &UpstreamClient,
    peer: &Peer<RoleClient>,
    requests: InputRequests,
) -> Result<InputResponses, ServiceError> {
    let answers = requests.into_iter().map(|(key, request)| async move {
        let (what, request) = match request {
            InputRequest::CreateMessage(r) => ("sampling", ServerRequest::CreateMessageRequest(r)),
            InputRequest::Elicitation(r) => ("elicitation", ServerRequest::ElicitRequest(r)),
            InputRequest::ListRoots(r) => ("roots", ServerRequest::ListRootsRequest(r)),
            _ => {
                return Err(refused(
                    &key,
                    "input",
                    "meta-server does not know this kind",
                ));
            }
        };
        let elicitation = matches!(request, ServerRequest::ElicitRequest(_));
        let cx = RequestContext::new(RequestId::String(key.clone().into()), peer.clone());
        let result = match client.handle_request(request, cx).await {
            Ok(result) => result,
            // An elicitation nobody can answer is declined, an answer the server expects and
            // handles; why is told in the call's result (see `relay.rs`).
            Err(e) if elicitation => {
                tracing::debug!(key, "elicitation declined: {}", e.message);
                ClientResult::ElicitResult(ElicitResult::new(ElicitationAction::Decline))
            }
            Err(e) => return Err(refused(&key, what, &e.message)),
        };
        let value =
            serde_json::to_value(result).map_err(|e| refused(&key, what, &e.to_string()))?;
        Ok((key, value))
    });
    futures::future::try_join_all(answers)
        .await
        .map(|answers| answers.into_iter().collect())
}

fn refused(key: &str, what: &str, why: &str) -> ServiceError {
    ServiceError::McpError(ErrorData::internal_error(
        format!(
            "it asked for {what} (input request \"{key}\") that meta-server could not give: {why}"
        ),
        None,
    ))
}
