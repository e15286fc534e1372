//! Asking a 2026-07-28 client, which takes no requests from a server: an upstream's request
//! for its call becomes an input request of the call's `InputRequiredResult`, and the answer
//! arrives with the client's retry. A 2026-07-28 upstream's own round (its
//! `InputRequiredResult`) is put to the client as the server asked it, under the server's keys,
//! and whatever the retry carries goes back to it. The session side (which holds the call
//! meanwhile) owns the receiving end; `relay.rs` asks through [`Inputs`], `mrtr.rs` puts
//! rounds.

use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::model::{ClientCapabilities, InputRequest, InputRequests, InputResponses};
use rmcp::service::ElicitationMode;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::ask::Ask;

/// Input requests one call may have waiting for the session at once; an upstream asking
/// more waits for room.
const QUEUE: usize = 16;

/// What waits for the client's answer.
pub enum PendingInput {
    /// An upstream's request, which meta-server names in `inputRequests`.
    Ask {
        /// What is asked, as it goes into `inputRequests`.
        request: Box<InputRequest>,
        /// Where the client's answer (its `inputResponses` entry) goes.
        answer: oneshot::Sender<Value>,
    },
    /// A 2026-07-28 upstream's round: its input requests (none in a round that only carries
    /// state), and where the retry's `inputResponses` go, whatever they hold.
    Round {
        requests: Option<InputRequests>,
        answer: oneshot::Sender<Option<InputResponses>>,
    },
}

/// The asking end, carried by a 2026-07-28 call's [`Origin`](super::Origin).
#[derive(Clone)]
pub struct Inputs {
    asks: mpsc::Sender<PendingInput>,
    /// What the request's `_meta` declared the client can answer.
    capabilities: Arc<ClientCapabilities>,
    /// The `inputResponses` the client's first request carried (a client may answer before it
    /// is asked), for the call's first upstream round.
    first: Arc<Mutex<Option<InputResponses>>>,
}

/// Why an input request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the client's call that could answer has ended")]
    Ended,
}

impl Inputs {
    /// A new pair for one call: the asking end and the session's receiving end. `first` is
    /// what the call's request carried in `inputResponses`.
    pub fn new(
        capabilities: ClientCapabilities,
        first: Option<InputResponses>,
    ) -> (Self, mpsc::Receiver<PendingInput>) {
        let (asks, received) = mpsc::channel(QUEUE);
        let inputs = Self {
            asks,
            capabilities: Arc::new(capabilities),
            first: Arc::new(Mutex::new(first)),
        };
        (inputs, received)
    }

    /// Puts `request` to the client and waits for its answer.
    pub async fn ask(&self, request: InputRequest) -> Result<Value, InputError> {
        let (answer, answered) = oneshot::channel();
        let pending = PendingInput::Ask {
            request: Box::new(request),
            answer,
        };
        self.asks
            .send(pending)
            .await
            .map_err(|_| InputError::Ended)?;
        answered.await.map_err(|_| InputError::Ended)
    }

    /// Puts an upstream's round (`requests` as it asked them) to the client and waits for
    /// the `inputResponses` of its retry.
    pub async fn round(
        &self,
        requests: Option<InputRequests>,
    ) -> Result<Option<InputResponses>, InputError> {
        let (answer, answered) = oneshot::channel();
        let pending = PendingInput::Round { requests, answer };
        self.asks
            .send(pending)
            .await
            .map_err(|_| InputError::Ended)?;
        answered.await.map_err(|_| InputError::Ended)
    }

    /// The `inputResponses` of the call's request, for its first upstream round (taken).
    pub fn first_answers(&self) -> Option<InputResponses> {
        self.first.lock().take()
    }

    /// What the client declared it can answer: what the upstream is told, so that it asks
    /// only for that.
    pub(super) fn capabilities(&self) -> &ClientCapabilities {
        &self.capabilities
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
