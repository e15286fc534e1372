//! Asking a 2026-07-28 client, which takes no requests from a server: an upstream's request
//! for its call becomes an input request of the call's `InputRequiredResult`, and the answer
//! arrives with the client's retry. The session side (which holds the call meanwhile) owns
//! the receiving end; `relay.rs` asks through [`Inputs`].

use std::sync::Arc;

use rmcp::model::{ClientCapabilities, InputRequest};
use rmcp::service::ElicitationMode;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::ask::Ask;

/// Input requests one call may have waiting for the session at once; an upstream asking
/// more waits for room.
const QUEUE: usize = 16;

/// An upstream's request waiting for the client's answer.
pub struct PendingInput {
    /// What is asked, as it goes into `inputRequests`.
    pub request: InputRequest,
    /// Where the client's answer (its `inputResponses` entry) goes.
    pub answer: oneshot::Sender<Value>,
}

/// The asking end, carried by a 2026-07-28 call's [`Origin`](super::Origin).
#[derive(Clone)]
pub struct Inputs {
    asks: mpsc::Sender<PendingInput>,
    /// What the request's `_meta` declared the client can answer.
    capabilities: Arc<ClientCapabilities>,
}

/// Why an input request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the client's call that could answer has ended")]
    Ended,
}

impl Inputs {
    /// A new pair for one call: the asking end and the session's receiving end.
    pub fn new(capabilities: ClientCapabilities) -> (Self, mpsc::Receiver<PendingInput>) {
        let (asks, received) = mpsc::channel(QUEUE);
        let inputs = Self {
            asks,
            capabilities: Arc::new(capabilities),
        };
        (inputs, received)
    }

    /// Puts `request` to the client and waits for its answer.
    pub async fn ask(&self, request: InputRequest) -> Result<Value, InputError> {
        let (answer, answered) = oneshot::channel();
        let pending = PendingInput { request, answer };
        self.asks
            .send(pending)
            .await
            .map_err(|_| InputError::Ended)?;
        answered.await.map_err(|_| InputError::Ended)
    }

    /// Whether the client declared form elicitation, which meta-server's own questions use.
    pub fn takes_forms(&self) -> bool {
        self.offer(Ask::Elicitation(ElicitationMode::Form))
    }

    /// Whether the client declared what `ask` needs.
    pub(super) fn offer(&self, ask: Ask) -> bool {
        let caps = &self.capabilities;
        match ask {
            Ask::Sampling => caps.sampling.is_some(),
            Ask::Roots => caps.roots.is_some(),
            Ask::Elicitation(mode) => caps.elicitation.as_ref().is_some_and(|e| {
                let neither = e.form.is_none() && e.url.is_none();
                match mode {
                    ElicitationMode::Url => e.url.is_some(),
                    _ => neither || e.form.is_some(),
                }
            }),
        }
    }
}
