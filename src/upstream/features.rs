//! What upstreams offer besides tools: listing their prompts, resources and resource templates
//! for the catalog, and forwarding `prompts/get`, `resources/read` and `completion/complete`
//! to them on the connection (started on first use) that tool calls take; their results come
//! back without the upstream's protocol stamps (`envelope.rs`).

use std::future::Future;
use std::sync::Arc;

use tracing::Instrument;

use rmcp::ErrorData;
use rmcp::model::{
    ClientRequest, CompleteRequestParams, CompleteResult, ErrorCode, GetPromptRequest,
    GetPromptRequestParams, GetPromptResult, PaginatedRequestParams, ReadResourceRequest,
    ReadResourceRequestParams, ReadResourceResult, ServerResult,
};
use rmcp::service::ServiceError;
use serde::Serialize;
use serde_json::Value;

use super::envelope;
use super::listing::{self, Page};
use super::mrtr::{self, Round};
use super::once;
use super::{Connection, InFlight, Manager, Origin, Slot, UpstreamError};

/// A server's prompts, resources and resource templates as it sent them. A kind it does not
/// offer (capability absent, or -32601) is empty; one whose listing failed is `None`.
#[derive(Debug, Default)]
pub struct Offers {
    pub prompts: Option<Vec<Value>>,
    pub resources: Option<Vec<Value>>,
    pub resource_templates: Option<Vec<Value>>,
}

/// An upstream's answer to a forwarded request: its result, or the JSON-RPC error it answered
/// with (for the client to get as the server gave it).
pub type Answer<T> = Result<T, ErrorData>;

impl Manager {
    /// Lists `server`'s prompts, resources and resource templates (every page), connecting
    /// first if needed. A listing that fails is logged and left `None`, never failing the rest;
    /// one that goes past the server's listing bounds fails the whole (see `listing.rs`).
    pub async fn list_offers(&self, server: &str) -> Result<Offers, UpstreamError> {
        let slot = self.slot(server)?;
        let conn = self.connect(server).await?;
        let _busy = InFlight::new(&conn);
        let caps = conn.server_info().map(|i| i.capabilities.clone());
        let prompts = caps.as_ref().is_some_and(|c| c.prompts.is_some());
        let resources = caps.as_ref().is_some_and(|c| c.resources.is_some());
        let peer = &conn.peer;
        Ok(Offers {
            prompts: self
                .list_kind(&slot, &conn, "prompts/list", prompts, |p| {
                    peer.list_prompts(p)
                })
                .await?,
            resources: self
                .list_kind(&slot, &conn, "resources/list", resources, |p| {
                    peer.list_resources(p)
                })
                .await?,
            resource_templates: self
                .list_kind(&slot, &conn, "resources/templates/list", resources, |p| {
                    peer.list_resource_templates(p)
                })
                .await?,
        })
    }

    /// One kind's whole list as JSON values, each with every field the server sent: empty
    /// when not `declared` or answered -32601, `None` when it failed, an error when it went
    /// past the listing bounds.
    async fn list_kind<P, F>(
        &self,
        slot: &Slot,
        conn: &Arc<Connection>,
        what: &str,
        declared: bool,
        list: impl FnMut(Option<PaginatedRequestParams>) -> F,
    ) -> Result<Option<Vec<Value>>, UpstreamError>
    where
        P: Page<Item: Serialize>,
        F: Future<Output = Result<P, ServiceError>>,
    {
        if !declared {
            return Ok(Some(Vec::new()));
        }
        let listed = self
            .bounded(slot, conn, what, async {
                match listing::all(slot.config.lists, list).await {
                    Err(ServiceError::McpError(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => {
                        Ok(Ok(Vec::new()))
                    }
                    other => other.map(|listed| listed.map(|listed| listed.items)),
                }
            })
            .await;
        match listed {
            Ok(Ok(items)) => Ok(Some(items.iter().map(crate::verbatim::take).collect())),
            Ok(Err(overrun)) => Err(overrun.of(&slot.config.name, what)),
            Err(e) => {
                // Listed again on each connection (the catalog is stale without them): said once.
                let server = &slot.config.name;
                if once::first(&format!("{server} {what}")) {
                    tracing::warn!(
                        "{e}; what it lists there stays out of what clients see until it answers, and meta-server asks again each time it connects the server (said once)"
                    );
                } else {
                    tracing::debug!(server, "{what} failed again: {e}");
                }
                Ok(None)
            }
        }
    }

    /// Forwards one `prompts/get` within the server's call timeout.
    /// The server's requests for the client during it go to `origin` (see `relay.rs`).
    pub async fn get_prompt(
        &self,
        server: &str,
        params: GetPromptRequestParams,
        origin: &Origin,
    ) -> Result<Answer<GetPromptResult>, UpstreamError> {
        let what = format!("prompts/get {}", params.name);
        let mut params = params;
        let span = super::traced::request(server, "prompts/get", &params.name);
        super::traced::carry(&span, &mut params.meta);
        let answer = self.forward(server, &what, Some(origin), span, |conn| async move {
            mrtr::rounds(server, origin, conn.relays.roots(), |answers, state| {
                let mut params = params.clone();
                (params.input_responses, params.request_state) = (answers, state);
                let (conn, origin) = (conn.clone(), origin.clone());
                async move {
                    let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
                    Ok(match mrtr::send(&conn, &origin, request).await? {
                        ServerResult::GetPromptResult(result) => Round::Done(result),
                        ServerResult::InputRequiredResult(asked) => Round::Asked(asked),
                        _ => return Err(ServiceError::UnexpectedResponse),
                    })
                }
            })
            .await
        });
        Ok(answer.await?.map(|mut result| {
            envelope::strip(&mut result.meta);
            result
        }))
    }

    /// Forwards one `resources/read` within the server's call timeout.
    /// The server's requests for the client during it go to `origin` (see `relay.rs`).
    pub async fn read_resource(
        &self,
        server: &str,
        params: ReadResourceRequestParams,
        origin: &Origin,
    ) -> Result<Answer<ReadResourceResult>, UpstreamError> {
        let what = format!("resources/read {}", params.uri);
        let mut params = params;
        let span = super::traced::request(server, "resources/read", &params.uri);
        super::traced::carry(&span, &mut params.meta);
        let answer = self.forward(server, &what, Some(origin), span, |conn| async move {
            mrtr::rounds(server, origin, conn.relays.roots(), |answers, state| {
                let mut params = params.clone();
                (params.input_responses, params.request_state) = (answers, state);
                let (conn, origin) = (conn.clone(), origin.clone());
                async move {
                    let request =
                        ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
                    Ok(match mrtr::send(&conn, &origin, request).await? {
                        ServerResult::ReadResourceResult(result) => Round::Done(result),
                        ServerResult::InputRequiredResult(asked) => Round::Asked(asked),
                        _ => return Err(ServiceError::UnexpectedResponse),
                    })
                }
            })
            .await
        });
        Ok(answer.await?.map(|mut result| {
            envelope::strip(&mut result.meta);
            result
        }))
    }

    /// Forwards one `completion/complete` within the server's call timeout.
    pub async fn complete(
        &self,
        server: &str,
        params: CompleteRequestParams,
    ) -> Result<Answer<CompleteResult>, UpstreamError> {
        let span = super::traced::request(server, "completion/complete", "");
        let answer = self.forward(
            server,
            "completion/complete",
            None,
            span,
            |conn| async move { conn.peer.complete(params).await },
        );
        Ok(answer.await?.map(|mut result| {
            envelope::strip(&mut result.meta);
            result
        }))
    }

    /// Connects `server` if needed and runs `request` on it (in `span`), bounded like a tool
    /// call, as a call of `origin` if given; the server's own JSON-RPC error is its answer,
    /// not a failure of the connection.
    async fn forward<T, F>(
        &self,
        server: &str,
        what: &str,
        origin: Option<&Origin>,
        span: tracing::Span,
        request: impl FnOnce(Arc<Connection>) -> F,
    ) -> Result<Answer<T>, UpstreamError>
    where
        F: Future<Output = Result<T, ServiceError>>,
    {
        let slot = self.slot(server)?;
        let conn = self
            .connect_for(server, origin.unwrap_or(&Origin::Detached))
            .await?;
        let _busy = InFlight::new(&conn);
        let _caller = origin.map(|origin| conn.relays.enter(origin.clone()));
        let sent = request(conn.clone());
        let answered = self
            .bounded(&slot, &conn, what, async {
                match sent.await {
                    Ok(result) => Ok(Ok(result)),
                    Err(ServiceError::McpError(e)) => Ok(Err(e)),
                    Err(e) => Err(e),
                }
            })
            .instrument(span.clone())
            .await;
        if let Err(e) = &answered {
            super::traced::failed(&span, e);
        }
        answered
    }
}
